package hns

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func addr(s string) netip.Addr  { return netip.MustParseAddr(s) }

func wantNode() *Want {
	return &Want{
		Network: Network{Name: "Calico", Type: "Overlay", VXLANPort: 4789, HostRoute: true,
			Subnets: []Subnet{{Prefix: pfx("192.168.0.0/26"), Gateway: addr("192.168.0.1"), VNI: 4096}},
			RemoteRoutes: []RemoteRoute{
				{Prefix: pfx("192.168.0.64/26"), VNI: 4096, ProviderAddress: addr("10.0.0.22"), DRMAC: "00-15-5D-00-00-02"},
				{Prefix: pfx("192.168.0.128/26"), VNI: 4096, ProviderAddress: addr("10.0.0.23"), DRMAC: "00-15-5D-00-00-03"},
			}},
		HostEndpoint: Endpoint{Name: "Calico_ep", Network: "Calico", IP: pfx("192.168.0.2/26"), Remote: true,
			Policies: []plan.Policy{plan.NewPolicy(plan.ProviderAddress{ProviderAddress: addr("10.0.0.21")})}},
		PodACLs: map[netip.Addr][]plan.ACL{addr("192.168.0.5"): {
			{Id: "a-0", Protocols: "6", Action: "Allow", Direction: "In", LocalPorts: "80", RuleType: "Switch", Priority: 1000},
			{Id: "end-0", Protocols: "256", Action: "Block", Direction: "In", RuleType: "Switch", Priority: 1001},
		}},
	}
}

// haveMatching is HNS holding exactly wantNode, plus what HNS and others
// add: the network's ProviderAddress and DR MAC, a foreign network, the
// CNI's pod endpoint and kube-proxy's remote endpoint.
func haveMatching() *State {
	w := wantNode()
	net := w.Network
	net.ProviderAddress, net.DRMAC = addr("10.0.0.21"), "00-15-5D-AA-BB-CC"
	acls := w.PodACLs[addr("192.168.0.5")]
	// HNS holds the ACLs as a set: reversed order is the same list.
	return &State{
		Networks: []Network{net, {Name: "nat", Type: "NAT"}},
		Endpoints: []Endpoint{
			w.HostEndpoint,
			{Name: "abc_Calico", Network: "Calico", IP: pfx("192.168.0.5/26"), ACLs: []plan.ACL{acls[1], acls[0]},
				Policies: []plan.Policy{plan.NewPolicy(plan.OutBoundNAT{})}},
			{Name: "remote-1", Network: "Calico", IP: pfx("192.168.0.70/26"), Remote: true},
		},
	}
}

func ops(t *testing.T, have *State, want *Want) []string {
	t.Helper()
	var out []string
	for _, o := range Diff(have, want) {
		out = append(out, strings.Join(strings.Fields(o.String()), " "))
	}
	return out
}

func TestDiff(t *testing.T) {
	tests := []struct {
		name string
		have func() *State
		want func() *Want
		ops  []string
	}{
		{name: "in sync: no op (HNS-added policies and foreign objects ignored)", have: haveMatching, want: wantNode},
		{name: "empty HNS: network, routes one by one, host endpoint", have: func() *State { return &State{} }, want: wantNode, ops: []string{
			"+ network Calico # absent",
			"+ route 192.168.0.64/26 on Calico (VSID 4096, PA 10.0.0.22, DR MAC 00-15-5D-00-00-02) # absent",
			"+ route 192.168.0.128/26 on Calico (VSID 4096, PA 10.0.0.23, DR MAC 00-15-5D-00-00-03) # absent",
			"+ endpoint Calico_ep on Calico # absent",
		}},
		{name: "VNI changed: replace, then routes and host endpoint again", have: haveMatching, want: func() *Want {
			w := wantNode()
			w.Network.Subnets[0].VNI = 4097
			return w
		}, ops: []string{
			"- endpoint Calico_ep on Calico # its network is replaced",
			"-/+ network Calico # vni-changed",
			"+ route 192.168.0.64/26 on Calico (VSID 4096, PA 10.0.0.22, DR MAC 00-15-5D-00-00-02) # absent",
			"+ route 192.168.0.128/26 on Calico (VSID 4096, PA 10.0.0.23, DR MAC 00-15-5D-00-00-03) # absent",
			"+ endpoint Calico_ep on Calico # absent",
		}},
		{name: "VXLAN port changed", have: haveMatching, want: func() *Want { w := wantNode(); w.Network.VXLANPort = 4790; return w },
			ops: []string{
				"- endpoint Calico_ep on Calico # its network is replaced",
				"-/+ network Calico # vxlan-port-changed",
				"+ route 192.168.0.64/26 on Calico (VSID 4096, PA 10.0.0.22, DR MAC 00-15-5D-00-00-02) # absent",
				"+ route 192.168.0.128/26 on Calico (VSID 4096, PA 10.0.0.23, DR MAC 00-15-5D-00-00-03) # absent",
				"+ endpoint Calico_ep on Calico # absent",
			}},
		{name: "a route moves to another VTEP: one removed, one added", have: haveMatching, want: func() *Want {
			w := wantNode()
			w.Network.RemoteRoutes[1].DRMAC = "00-15-5D-00-00-09"
			return w
		}, ops: []string{
			"- route 192.168.0.128/26 on Calico # not in the plan",
			"+ route 192.168.0.128/26 on Calico (VSID 4096, PA 10.0.0.23, DR MAC 00-15-5D-00-00-09) # absent",
		}},
		{name: "an ACL changes: the pod endpoint's list is sent whole, its other policies kept", have: haveMatching, want: func() *Want {
			w := wantNode()
			w.PodACLs[addr("192.168.0.5")][0].LocalPorts = "8080"
			return w
		}, ops: []string{"~ acl abc_Calico on Calico (2 ACLs) # ACL list differs"}},
		{name: "host endpoint policies change", have: haveMatching, want: func() *Want {
			w := wantNode()
			w.HostEndpoint.Policies = []plan.Policy{plan.NewPolicy(plan.ProviderAddress{ProviderAddress: addr("10.0.0.99")})}
			return w
		}, ops: []string{"~ endpoint Calico_ep on Calico # policies changed"}},
		{name: "network policies change in place", have: haveMatching, want: func() *Want { w := wantNode(); w.Network.HostRoute = false; return w },
			ops: []string{"~ netpolicies Calico # network policies"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ops(t, tt.have(), tt.want())
			if diff := cmp.Diff(tt.ops, got); diff != "" {
				t.Errorf("ops (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDiffNeverDeletesForeign: whatever the want, Diff deletes nothing the
// agent does not own — no foreign network, no pod or remote endpoint.
func TestDiffNeverDeletesForeign(t *testing.T) {
	have := haveMatching()
	for _, w := range []*Want{wantNode(), {Network: Network{Name: "Other", Type: "L2Bridge"}, HostEndpoint: Endpoint{Name: "Other_ep", Network: "Other"}}} {
		for _, o := range Diff(have, w) {
			if o.Action == Delete && o.Kind != KindRoute {
				t.Errorf("Diff deletes %s", o)
			}
			if o.Kind == KindNetwork && o.Name != w.Network.Name {
				t.Errorf("Diff touches a network it does not own: %s", o)
			}
			if o.Kind == KindEndpoint && o.Name != w.HostEndpoint.Name {
				t.Errorf("Diff touches an endpoint it does not own: %s", o)
			}
		}
	}
}

// renamed is wantNode with the network renamed Calico2 (and its host
// endpoint Calico2_ep), everything else the same.
func renamed(owned *Owned) func() *Want {
	return func() *Want {
		w := wantNode()
		w.Network.Name, w.HostEndpoint.Name, w.HostEndpoint.Network = "Calico2", "Calico2_ep", "Calico2"
		w.Owned = owned
		return w
	}
}

// TestDiffRename: a plan that renames the agent's network replaces it
// (issue 13: it created Calico2 beside Calico, on the same block and VNI,
// with two host endpoints at .2), whether the state directory recorded
// the network or, with the record lost, the network has exactly the
// plan's identity. Without positive evidence nothing is adopted.
func TestDiffRename(t *testing.T) {
	renameOps := []string{
		"- endpoint Calico_ep on Calico # its network is replaced",
		"-/+ network Calico2 (was Calico) # network-name-changed",
		"+ route 192.168.0.64/26 on Calico2 (VSID 4096, PA 10.0.0.22, DR MAC 00-15-5D-00-00-02) # absent",
		"+ route 192.168.0.128/26 on Calico2 (VSID 4096, PA 10.0.0.23, DR MAC 00-15-5D-00-00-03) # absent",
		"+ endpoint Calico2_ep on Calico2 # absent",
	}
	createOps := []string{
		"+ network Calico2 # absent",
		"+ route 192.168.0.64/26 on Calico2 (VSID 4096, PA 10.0.0.22, DR MAC 00-15-5D-00-00-02) # absent",
		"+ route 192.168.0.128/26 on Calico2 (VSID 4096, PA 10.0.0.23, DR MAC 00-15-5D-00-00-03) # absent",
		"+ endpoint Calico2_ep on Calico2 # absent",
	}
	otherVNI := func() *State {
		h := haveMatching()
		h.Networks[0].Subnets[0].VNI = 4097
		return h
	}
	twice := func() *State {
		h := haveMatching()
		n := h.Networks[0]
		n.Name = "Calico-old"
		h.Networks = append(h.Networks, n)
		return h
	}
	tests := []struct {
		name string
		have func() *State
		want func() *Want
		ops  []string
	}{
		{"recorded: replaced through its old name", haveMatching, renamed(&Owned{Network: "Calico", HostEndpoint: "Calico_ep"}), renameOps},
		{"recorded, and its identity changes too", otherVNI, renamed(&Owned{Network: "Calico", HostEndpoint: "Calico_ep"}), renameOps},
		{"record lost: recognised by type, subnet and VNI; host endpoint by address", haveMatching, renamed(nil), renameOps},
		{"record lost and another VNI: not proven ours, left alone", otherVNI, renamed(nil), createOps},
		{"record lost and two such networks: no telling which", twice, renamed(nil), createOps},
		{"the record names the plan's network: nothing else is adopted", haveMatching, renamed(&Owned{Network: "Calico2", HostEndpoint: "Calico2_ep"}), createOps},
		{"the recorded network is gone: created", func() *State { return &State{} }, renamed(&Owned{Network: "Calico", HostEndpoint: "Calico_ep"}), createOps},
		{"the renamed network exists: nothing to replace", func() *State {
			h := haveMatching()
			h.Networks[0].Name = "Calico2"
			for i := range h.Endpoints {
				h.Endpoints[i].Network = "Calico2"
			}
			h.Endpoints[0].Name = "Calico2_ep"
			return h
		}, renamed(&Owned{Network: "Calico", HostEndpoint: "Calico_ep"}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ops(t, tt.have(), tt.want())
			if diff := cmp.Diff(tt.ops, got); diff != "" {
				t.Errorf("ops (-want +got):\n%s", diff)
			}
		})
	}
}

// TestVXLANOnly: a network that differs from the plan's by its VNI or
// VxlanPort alone is a VXLAN-only replace; with any other identity field
// changed too (name, type, prefix, gateway), or nothing changed, or a
// value read back absent, it is not.
func TestVXLANOnly(t *testing.T) {
	w := wantNode().Network
	edit := func(f func(n *Network)) *Network {
		n := w
		n.Subnets = append([]Subnet(nil), w.Subnets...)
		f(&n)
		return &n
	}
	for _, tc := range []struct {
		name string
		have *Network
		want bool
	}{
		{"same", edit(func(*Network) {}), false},
		{"vni", edit(func(n *Network) { n.Subnets[0].VNI = 5000 }), true},
		{"port", edit(func(n *Network) { n.VXLANPort = 4790 }), true},
		{"vni and port", edit(func(n *Network) { n.Subnets[0].VNI, n.VXLANPort = 5000, 4790 }), true},
		{"vni and prefix", edit(func(n *Network) { n.Subnets[0].VNI, n.Subnets[0].Prefix = 5000, pfx("192.168.1.0/26") }), false},
		{"vni and gateway", edit(func(n *Network) { n.Subnets[0].VNI, n.Subnets[0].Gateway = 5000, addr("192.168.0.2") }), false},
		{"vni and type", edit(func(n *Network) { n.Subnets[0].VNI, n.Type = 5000, "L2Bridge" }), false},
		{"vni and name", edit(func(n *Network) { n.Subnets[0].VNI, n.Name = 5000, "Calico2" }), false},
		{"vni unread", edit(func(n *Network) { n.Subnets[0].VNI = 0 }), false}, // unknown, not changed: no replace
		{"vni, port unread", edit(func(n *Network) { n.Subnets[0].VNI, n.VXLANPort = 5000, 0 }), true},
		{"absent", nil, false},
	} {
		if got := VXLANOnly(tc.have, &w); got != tc.want {
			t.Errorf("%s: VXLANOnly = %v, want %v", tc.name, got, tc.want)
		}
	}
}
