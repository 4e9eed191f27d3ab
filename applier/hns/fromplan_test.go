package hns_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

func fromPlanSample() *plan.NodePlan {
	block := netip.MustParsePrefix("192.168.0.0/26")
	ssh := plan.ACL{Id: "host-ssh", Protocols: "6", Action: "Allow", Direction: "In", LocalPorts: "22", RuleType: "Switch", Priority: 100}
	allow := plan.ACL{Id: "pod-all", Action: "Allow", Direction: "Out", RuleType: "Switch", Priority: 1000}
	deny := plan.ACL{Id: "pod-deny", Action: "Block", Direction: "In", RuleType: "Switch", Priority: 2000}
	p := &plan.NodePlan{
		Node: "win-1",
		Network: plan.Network{
			Name: "Calico", Type: "Overlay",
			Ipams: []plan.Ipam{{Type: "Static", Subnets: []plan.Subnet{{
				IpAddressPrefix: block,
				Policies:        []plan.Policy{plan.NewPolicy(plan.VSID{IsolationId: 4096})},
				Routes:          []plan.Route{{NextHop: netip.MustParseAddr("192.168.0.1"), DestinationPrefix: netip.MustParsePrefix("0.0.0.0/0")}},
			}}}},
			Policies: []plan.Policy{plan.NewPolicy(plan.VxlanPort{Port: 4789}), plan.NewPolicy(plan.HostRouteSetting{})},
		},
		// ACLs among the host endpoint's policies: the order differs from
		// a Snapshot's, which keeps ACLs apart.
		HostEndpoint: plan.Endpoint{Name: "Calico_ep", IpConfigurations: []plan.IpConfig{{IpAddress: netip.MustParseAddr("192.168.0.2"), PrefixLength: 26}},
			Flags: plan.FlagRemoteEndpoint, Policies: []plan.Policy{plan.NewPolicy(ssh),
				plan.NewPolicy(plan.ProviderAddress{ProviderAddress: netip.MustParseAddr("10.0.0.5")})}},
		Endpoints: []plan.Endpoint{{Name: "pod-a", IpConfigurations: []plan.IpConfig{{IpAddress: netip.MustParseAddr("192.168.0.5"), PrefixLength: 26}},
			Policies: []plan.Policy{plan.NewPolicy(deny), plan.NewPolicy(allow)}}},
	}
	p.SetRoutes(plan.RemoteSubnetTable("c", []plan.RemoteSubnetRoute{
		{DestinationPrefix: netip.MustParsePrefix("192.168.0.64/26"), IsolationId: 4096, ProviderAddress: netip.MustParseAddr("10.0.0.6"), Node: "win-2"},
		{DestinationPrefix: netip.MustParsePrefix("192.168.0.128/26"), IsolationId: 4096, ProviderAddress: netip.MustParseAddr("10.0.0.7"), Node: "linux-1"},
		{DestinationPrefix: netip.MustParsePrefix("192.168.0.192/26"), IsolationId: 4096, ProviderAddress: netip.MustParseAddr("10.0.0.8"), Node: "win-3",
			DistributedRouterMacAddress: "0E-2A-0A-00-00-08"},
	}))
	return p
}

func TestWantFromPlan(t *testing.T) {
	p := fromPlanSample()
	w, pending, err := hns.WantFromPlan(p, hns.LiveValues{TunnelMACs: map[string]string{"win-2": "00-15-5D-00-00-06"}})
	if err != nil {
		t.Fatal(err)
	}

	// linux-1's MAC is unknown: its route waits, and says why.
	if len(pending) != 1 || !strings.Contains(pending[0], "192.168.0.128/26") || !strings.Contains(pending[0], "linux-1") {
		t.Errorf("pending = %q, want the route to linux-1", pending)
	}
	var routes []string
	for _, r := range w.Network.RemoteRoutes {
		routes = append(routes, r.Prefix.String()+" "+r.DRMAC)
	}
	if diff := cmp.Diff([]string{"192.168.0.64/26 00-15-5D-00-00-06", "192.168.0.192/26 0E-2A-0A-00-00-08"}, routes); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	n := w.Network
	if n.Type != "Overlay" || n.VXLANPort != 4789 || !n.HostRoute || len(n.Subnets) != 1 || n.Subnets[0].VNI != 4096 || n.Subnets[0].Gateway != netip.MustParseAddr("192.168.0.1") {
		t.Errorf("network = %+v", n)
	}
	he := w.HostEndpoint
	if len(he.ACLs) != 1 || he.ACLs[0].Id != "host-ssh" || len(he.Policies) != 1 || he.Policies[0].Type != plan.TypeProviderAddress {
		t.Errorf("host endpoint: ACLs %v, policies %v; want the ACL apart from the ProviderAddress", he.ACLs, he.Policies)
	}
	if acls := w.PodACLs[netip.MustParseAddr("192.168.0.5")]; len(acls) != 2 || acls[0].Id != "pod-deny" || acls[1].Id != "pod-all" {
		t.Errorf("pod ACLs = %v, want canonical order (In before Out)", acls)
	}
}

// A plan applied to HNS is then matched by it: the second Diff is empty,
// whatever order the plan lists ACLs and policies in.
func TestWantFromPlanConverges(t *testing.T) {
	h := hnsmem.New()
	seed(t, h)
	w, _, err := hns.WantFromPlan(fromPlanSample(), hns.LiveValues{TunnelMACs: map[string]string{"win-2": "00-15-5D-00-00-06"}})
	if err != nil {
		t.Fatal(err)
	}
	converge(t, h, w) // creates the network, and the CNI the pod
	matches(t, h, w)
	have, err := h.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e := have.Endpoint("Calico_ep"); e == nil || len(e.ACLs) != 1 || len(e.Policies) != 1 {
		t.Fatalf("host endpoint = %+v", e)
	}

	// A changed host ACL is a change.
	w.HostEndpoint.ACLs[0].LocalPorts = "3389"
	if ops := hns.Diff(have, w); len(ops) != 1 || ops[0].Kind != hns.KindEndpoint || ops[0].Action != hns.Update {
		t.Errorf("after a host ACL change, Diff = %v, want one endpoint update", ops)
	}
	converge(t, h, w)
	matches(t, h, w)
}
