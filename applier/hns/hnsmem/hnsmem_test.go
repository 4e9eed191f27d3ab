package hnsmem_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/txtar"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

var update = os.Getenv("HNSPLAN_UPDATE") != ""

var (
	pfx  = netip.MustParsePrefix
	addr = netip.MustParseAddr
)

const net1 = "Calico"

// overlay is the network the agent creates (as Diff sends it: no routes).
func overlay() *hns.Network {
	return &hns.Network{
		Name: net1, Type: "Overlay",
		Subnets:   []hns.Subnet{{Prefix: pfx("10.244.1.0/26"), Gateway: addr("10.244.1.1"), VNI: 4096}},
		VXLANPort: 4789, HostRoute: true,
	}
}

func route(prefix, pa string) *hns.RemoteRoute {
	return &hns.RemoteRoute{Prefix: pfx(prefix), VNI: 4096, ProviderAddress: addr(pa), DRMAC: "0E-2A-0A-F4-02-01"}
}

func hostEP() *hns.Endpoint {
	return &hns.Endpoint{
		Name: "Calico_ep", Network: net1, IP: pfx("10.244.1.2/26"), MAC: "00-15-5D-AA-BB-CC", Remote: true,
		Policies: []plan.Policy{plan.NewPolicy(plan.ProviderAddress{ProviderAddress: addr("10.0.0.4")})},
	}
}

func acl(id, dir, action string, prio uint16) plan.ACL {
	return plan.ACL{Id: id, Protocols: "256", Action: action, Direction: dir, RuleType: "Switch", Priority: prio}
}

// Ops, as Diff writes them.
func createNetwork(n *hns.Network) hns.Op {
	return hns.Op{Action: hns.Create, Kind: hns.KindNetwork, Name: n.Name, NetworkSpec: n}
}
func replaceNetwork(n *hns.Network) hns.Op {
	return hns.Op{Action: hns.Replace, Kind: hns.KindNetwork, Name: n.Name, NetworkSpec: n}
}
func deleteNetwork(name string) hns.Op {
	return hns.Op{Action: hns.Delete, Kind: hns.KindNetwork, Name: name}
}
func addRoute(r *hns.RemoteRoute) hns.Op {
	return hns.Op{Action: hns.Create, Kind: hns.KindRoute, Name: r.Prefix.String(), Network: net1, RouteSpec: r}
}
func removeRoute(r *hns.RemoteRoute) hns.Op {
	return hns.Op{Action: hns.Delete, Kind: hns.KindRoute, Name: r.Prefix.String(), Network: net1, RouteSpec: r}
}
func netPolicies(n *hns.Network) hns.Op {
	return hns.Op{Action: hns.Update, Kind: hns.KindNetPolicies, Name: n.Name, NetworkSpec: n}
}
func endpointOp(a hns.Action, e *hns.Endpoint) hns.Op {
	return hns.Op{Action: a, Kind: hns.KindEndpoint, Name: e.Name, Network: e.Network, EndpointSpec: e}
}
func aclOp(ep string, acls ...plan.ACL) hns.Op {
	return hns.Op{Action: hns.Update, Kind: hns.KindACL, Name: ep, Network: net1, ACLs: acls}
}

func apply(t *testing.T, m *hnsmem.HNS, ops ...hns.Op) {
	t.Helper()
	for _, op := range ops {
		if err := m.Apply(context.Background(), op); err != nil {
			t.Fatalf("Apply(%s): %v", op, err)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// node is a node as the agent and others leave it: the agent's network,
// one route and host endpoint; a CNI pod endpoint with its default deny;
// a kube-proxy remote endpoint and load balancer.
func node(t *testing.T, opts ...hnsmem.Option) *hnsmem.HNS {
	t.Helper()
	m := hnsmem.New(opts...)
	apply(t, m, createNetwork(overlay()), addRoute(route("10.244.2.0/26", "10.0.0.5")), endpointOp(hns.Create, hostEP()))
	must(t, m.AddPodEndpoint(net1, "pod1_Calico", pfx("10.244.1.5/26"), "0E-2A-0A-F4-01-05", []plan.Policy{
		plan.NewPolicy(plan.ProviderAddress{ProviderAddress: addr("10.0.0.4")}),
		plan.NewPolicy(plan.OutBoundNAT{Exceptions: []netip.Prefix{pfx("10.244.0.0/16"), pfx("10.96.0.0/12")}}),
		plan.NewPolicy(plan.ACL{Id: "CNIDefaultDenyAllPolicy", Protocols: "256", Action: "Block", Direction: "In", RuleType: "Switch", Priority: 65500}),
	}))
	must(t, m.AddRemoteEndpoint(net1, "remote-10.244.2.7", pfx("10.244.2.7/32"), "02-11-0A-F4-02-07",
		[]plan.Policy{plan.NewPolicy(plan.ProviderAddress{ProviderAddress: addr("10.0.0.5")})}))
	must(t, m.AddLoadBalancer("", addr("10.96.0.10")))
	m.ResetCalls()
	return m
}

// TestErrors produces every error the model returns, and checks that a
// failed call changes nothing.
func TestErrors(t *testing.T) {
	noGateway := overlay()
	noGateway.Subnets[0].Gateway = netip.Addr{}
	gatewayOutside := overlay()
	gatewayOutside.Subnets[0].Gateway = addr("10.244.9.1")
	badType := overlay()
	badType.Type = "Vxlan"
	otherNet := overlay()
	otherNet.Subnets[0].VNI = 4097
	vxlanNet := overlay()
	vxlanNet.Name = "other"

	bigVNI := route("10.244.3.0/26", "10.0.0.6")
	bigVNI.VNI = 70000
	noMAC := route("10.244.3.0/26", "10.0.0.6")
	noMAC.DRMAC = ""
	colonMAC := route("10.244.3.0/26", "10.0.0.6")
	colonMAC.DRMAC = "0e:2a:0a:f4:03:01"
	noPA := route("10.244.3.0/26", "10.0.0.6")
	noPA.ProviderAddress = netip.Addr{}
	samePrefix := route("10.244.2.0/26", "10.0.0.9")

	ep := func(name, ip string) *hns.Endpoint {
		return &hns.Endpoint{Name: name, Network: net1, IP: pfx(ip)}
	}
	badMAC := ep("x", "10.244.1.9/26")
	badMAC.MAC = "0E:2A:0A:F4:01:09"
	onMissing := ep("x", "10.244.1.9/26")
	onMissing.Network = "nope"

	bad := func(f func(*plan.ACL)) plan.ACL {
		a := plan.ACL{Protocols: "6", Action: "Allow", Direction: "In", RuleType: "Switch", Priority: 1000, LocalPorts: "80"}
		f(&a)
		return a
	}

	tests := []struct {
		name   string
		opts   []hnsmem.Option
		fresh  []hns.Op // if not nil, start from an empty HNS and these ops
		op     hns.Op
		code   uint32
		method string
	}{
		{name: "network name conflict", op: createNetwork(otherNet), code: hns.CodeNetworkAlreadyExists, method: "hcnCreateNetwork"},
		{name: "subnet without a default route", op: createNetwork(func() *hns.Network { n := noGateway; n.Name = "n2"; return n }()), code: hnsmem.CodeInvalidNetwork, method: "hcnCreateNetwork"},
		{name: "gateway outside the subnet", op: replaceNetwork(gatewayOutside), code: hnsmem.CodeInvalidNetwork, method: "hcnCreateNetwork", opts: []hnsmem.Option{hnsmem.RefuseDeleteWithEndpoints(false)}},
		{name: "unknown network type", op: createNetwork(func() *hns.Network { n := badType; n.Name = "n2"; return n }()), code: hnsmem.CodeInvalidNetwork, method: "hcnCreateNetwork"},
		{name: "delete a network with endpoints", op: deleteNetwork(net1), code: hns.CodeEntityHasReferences, method: "hcnDeleteNetwork"},
		{name: "replace a network with endpoints", op: replaceNetwork(otherNet), code: hns.CodeEntityHasReferences, method: "hcnDeleteNetwork"},
		{name: "route with VNI over 65535", op: addRoute(bigVNI), code: hns.CodeInvalidPolicy, method: "hcnModifyNetwork"},
		{name: "route without DR MAC", op: addRoute(noMAC), code: hns.CodeInvalidPolicy, method: "hcnModifyNetwork"},
		{name: "route with a colon MAC", op: addRoute(colonMAC), code: hns.CodeInvalidPolicy, method: "hcnModifyNetwork"},
		{name: "route without PA", op: addRoute(noPA), code: hns.CodeInvalidPolicy, method: "hcnModifyNetwork"},
		{name: "second route to a prefix", op: addRoute(samePrefix), code: hns.CodePolicyAlreadyExists, method: "hcnModifyNetwork"},
		{name: "route on a missing network", op: func() hns.Op { o := addRoute(noPA); o.Network = "nope"; return o }(), code: hns.CodeNetworkNotFound, method: "hcnModifyNetwork"},
		{name: "routes unsupported", op: addRoute(route("10.244.3.0/26", "10.0.0.6")), code: hnsmem.CodeInvalidPolicyType, method: "hcnModifyNetwork",
			fresh: []hns.Op{createNetwork(overlay())}, opts: []hnsmem.Option{hnsmem.WithFeatures(hns.Features{V2API: true, VxlanPort: true})}},
		{name: "VxlanPort unsupported", op: createNetwork(vxlanNet), code: hnsmem.CodeInvalidPolicyType, method: "hcnCreateNetwork",
			fresh: []hns.Op{}, opts: []hnsmem.Option{hnsmem.WithFeatures(hns.Features{V2API: true, RemoteRoute: true})}},
		{name: "no v2 API", op: createNetwork(overlay()), code: hnsmem.CodeRequestUnsupported, method: "hcnCreateNetwork",
			fresh: []hns.Op{}, opts: []hnsmem.Option{hnsmem.WithFeatures(hns.Features{Version: "9.1"})}},
		{name: "net policies of a missing network", op: netPolicies(vxlanNet), code: hns.CodeNetworkNotFound, method: "hcnModifyNetwork"},
		{name: "endpoint on a missing network", op: endpointOp(hns.Create, onMissing), code: hns.CodeNetworkNotFound, method: "hcnCreateEndpoint"},
		{name: "endpoint name taken", op: endpointOp(hns.Create, ep("pod1_Calico", "10.244.1.9/26")), code: hnsmem.CodeInvalidEndpoint, method: "hcnCreateEndpoint"},
		{name: "endpoint MAC with colons", op: endpointOp(hns.Create, badMAC), code: hnsmem.CodeInvalidEndpoint, method: "hcnCreateEndpoint"},
		{name: "endpoint outside the subnets", op: endpointOp(hns.Create, ep("x", "10.244.2.9/26")), code: hnsmem.CodeInvalidIP, method: "hcnCreateEndpoint"},
		{name: "endpoint on the network address", op: endpointOp(hns.Create, ep("x", "10.244.1.0/26")), code: hnsmem.CodeInvalidIP, method: "hcnCreateEndpoint"},
		{name: "endpoint on the broadcast address", op: endpointOp(hns.Create, ep("x", "10.244.1.63/26")), code: hnsmem.CodeInvalidIP, method: "hcnCreateEndpoint"},
		{name: "endpoint on the gateway", op: endpointOp(hns.Create, ep("x", "10.244.1.1/26")), code: hnsmem.CodeAddrInvalidOrReserved, method: "hcnCreateEndpoint"},
		{name: "endpoint on a taken address", op: endpointOp(hns.Create, ep("x", "10.244.1.5/26")), code: hnsmem.CodeAddrInvalidOrReserved, method: "hcnCreateEndpoint"},
		{name: "update a missing endpoint", op: endpointOp(hns.Update, ep("x", "10.244.1.9/26")), code: hns.CodeEndpointNotFound, method: "hcnModifyEndpoint"},
		{name: "ACLs of a missing endpoint", op: aclOp("x", acl("a", "In", "Allow", 1000)), code: hns.CodeEndpointNotFound, method: "hcnModifyEndpoint"},
		{name: "ACL remote Any", op: aclOp("pod1_Calico", bad(func(a *plan.ACL) { a.RemoteAddresses = "Any" })), code: hns.CodeInvalidPolicy, method: "hcnModifyEndpoint"},
		{name: "ACL bad local CIDR", op: aclOp("pod1_Calico", bad(func(a *plan.ACL) { a.LocalAddresses = "10.244.1.5,10.0.0.0/33" })), code: hns.CodeInvalidPolicy, method: "hcnModifyEndpoint"},
		{name: "ACL list with a space", op: aclOp("pod1_Calico", bad(func(a *plan.ACL) { a.RemoteAddresses = "10.0.0.1, 10.0.0.2" })), code: hns.CodeInvalidPolicy, method: "hcnModifyEndpoint"},
		{name: "ACL action Deny", op: aclOp("pod1_Calico", bad(func(a *plan.ACL) { a.Action = "Deny" })), code: hns.CodeInvalidPolicy, method: "hcnModifyEndpoint"},
		{name: "ACL direction Ingress", op: aclOp("pod1_Calico", bad(func(a *plan.ACL) { a.Direction = "Ingress" })), code: hns.CodeInvalidPolicy, method: "hcnModifyEndpoint"},
		{name: "ACL rule type", op: aclOp("pod1_Calico", bad(func(a *plan.ACL) { a.RuleType = "VFP" })), code: hns.CodeInvalidPolicy, method: "hcnModifyEndpoint"},
		{name: "ACL protocol name", op: aclOp("pod1_Calico", bad(func(a *plan.ACL) { a.Protocols = "tcp" })), code: hns.CodeInvalidPolicy, method: "hcnModifyEndpoint"},
		{name: "ACL 256 in a list", op: aclOp("pod1_Calico", bad(func(a *plan.ACL) { a.Protocols = "6,256" })), code: hns.CodeInvalidPolicy, method: "hcnModifyEndpoint"},
		{name: "ACL ports with any protocol", op: aclOp("pod1_Calico", bad(func(a *plan.ACL) { a.Protocols = "256" })), code: hns.CodeInvalidPolicy, method: "hcnModifyEndpoint"},
		{name: "ACL ports with ICMP", op: aclOp("pod1_Calico", bad(func(a *plan.ACL) { a.Protocols = "6,1" })), code: hns.CodeInvalidPolicy, method: "hcnModifyEndpoint"},
		{name: "ACL reversed range", op: aclOp("pod1_Calico", bad(func(a *plan.ACL) { a.RemotePorts = "8080-8000" })), code: hns.CodeInvalidPolicy, method: "hcnModifyEndpoint"},
		{name: "ACL port too big", op: aclOp("pod1_Calico", bad(func(a *plan.ACL) { a.LocalPorts = "80,65536" })), code: hns.CodeInvalidPolicy, method: "hcnModifyEndpoint"},
		{name: "ACL address any", op: aclOp("pod1_Calico", bad(func(a *plan.ACL) { a.RemoteAddresses = "any" })), code: hns.CodeInvalidPolicy, method: "hcnModifyEndpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m *hnsmem.HNS
			if tt.fresh != nil {
				m = hnsmem.New(tt.opts...)
				apply(t, m, tt.fresh...)
				m.ResetCalls()
			} else {
				m = node(t, tt.opts...)
			}
			before := m.String()
			err := m.Apply(context.Background(), tt.op)
			var he *hns.Error
			if !errors.As(err, &he) {
				t.Fatalf("Apply(%s) = %v, want an *hns.Error", tt.op, err)
			}
			if he.Code != tt.code || he.Call != tt.method {
				t.Errorf("Apply(%s) = %v, want code 0x%08X from %s", tt.op, err, tt.code, tt.method)
			}
			if he.Transient {
				t.Errorf("%v is transient", err)
			}
			if diff := cmp.Diff(before, m.String()); diff != "" {
				t.Errorf("a failed Apply changed the state (-before +after):\n%s", diff)
			}
			if calls := m.Calls(); len(calls) != 1 || calls[0].Err != err {
				t.Errorf("Calls() = %v, want the failed call", calls)
			}
		})
	}
}

// TestValidACLs accepts what HNS takes.
func TestValidACLs(t *testing.T) {
	m := node(t)
	ok := []plan.ACL{
		{Protocols: "6", Action: "Allow", Direction: "In", RuleType: "Switch", Priority: 1000, LocalPorts: "80,8000-8080", RemoteAddresses: "10.0.1.1/32,10.0.1.2"},
		{Protocols: "6,17", Action: "Allow", Direction: "Out", Priority: 1001, RemotePorts: "53"}, // NPM leaves out RuleType
		{Protocols: "", Action: "Block", Direction: "In", RuleType: "Host", LocalAddresses: "10.244.1.5,fd00::5"},
		{Protocols: "1", Action: "Allow", Direction: "Out", RuleType: "Switch", Priority: 2000},
	}
	apply(t, m, aclOp("pod1_Calico", ok...))
}

// TestIdempotent: every op applied a second time is a no-op.
func TestIdempotent(t *testing.T) {
	r := route("10.244.3.0/26", "10.0.0.6")
	noHostRoute := overlay()
	noHostRoute.HostRoute = false
	noHostRoute.AdapterName = "Ethernet 2"
	updated := hostEP()
	updated.Policies = append(updated.Policies, plan.NewPolicy(plan.SDNRoute{DestinationPrefix: pfx("10.0.0.4/32"), NeedEncap: true}))
	pod := &hns.Endpoint{Name: "own", Network: net1, IP: pfx("10.244.1.9/26")}
	ops := []hns.Op{
		createNetwork(overlay()),
		addRoute(r),
		removeRoute(r),
		removeRoute(route("10.244.2.0/26", "10.0.0.5")),
		netPolicies(noHostRoute),
		endpointOp(hns.Create, hostEP()),
		endpointOp(hns.Create, pod),
		endpointOp(hns.Update, updated),
		aclOp("pod1_Calico", acl("a", "In", "Allow", 1000), acl("b", "Out", "Block", 2000)),
		endpointOp(hns.Delete, pod),
		deleteNetwork("absent"),
	}
	m := node(t)
	for _, op := range ops {
		apply(t, m, op)
		once := m.String()
		apply(t, m, op)
		if diff := cmp.Diff(once, m.String()); diff != "" {
			t.Errorf("Apply(%s) again changed the state (-once +twice):\n%s", op, diff)
		}
	}
}

// TestDiffConverges: the ops Diff writes take the model to want, and Diff
// finds nothing left to do (it ignores what HNS added).
func TestDiffConverges(t *testing.T) {
	m := hnsmem.New()
	ctx := context.Background()
	n := overlay()
	n.RemoteRoutes = []hns.RemoteRoute{*route("10.244.2.0/26", "10.0.0.5"), *route("10.244.3.0/26", "10.0.0.6")}
	want := &hns.Want{Network: *n, HostEndpoint: *hostEP(), PodACLs: map[netip.Addr][]plan.ACL{
		addr("10.244.1.5"): {acl("a", "In", "Allow", 1000), acl("b", "In", "Block", 1001)},
	}}
	for round := range 3 {
		have, err := m.Snapshot(ctx)
		must(t, err)
		ops := hns.Diff(have, want)
		if round > 0 && len(ops) != 0 {
			t.Fatalf("round %d: Diff = %v, want nothing", round, ops)
		}
		for _, op := range ops {
			must(t, m.Apply(ctx, op))
		}
		if round == 0 {
			// The CNI creates the pod endpoint after the network.
			must(t, m.AddPodEndpoint(net1, "pod1_Calico", pfx("10.244.1.5/26"), "",
				[]plan.Policy{plan.NewPolicy(plan.ProviderAddress{ProviderAddress: addr("10.0.0.4")})}))
			have, err := m.Snapshot(ctx)
			must(t, err)
			for _, op := range hns.Diff(have, want) {
				must(t, m.Apply(ctx, op))
			}
		}
	}
	s, err := m.Snapshot(ctx)
	must(t, err)
	ep := s.Endpoint("pod1_Calico")
	if len(ep.ACLs) != 2 || len(ep.Policies) != 1 {
		t.Errorf("pod endpoint = %+v, want 1 policy and 2 ACLs", ep)
	}
}

// TestACLUpdate: an ACL update keeps the endpoint's other policies as they
// are and replaces the whole ACL list.
func TestACLUpdate(t *testing.T) {
	m := node(t)
	ctx := context.Background()
	s, err := m.Snapshot(ctx)
	must(t, err)
	pod := s.Endpoint("pod1_Calico")
	apply(t, m, aclOp(pod.Name, acl("b", "Out", "Allow", 1000), acl("a", "In", "Allow", 1000)))
	s, err = m.Snapshot(ctx)
	must(t, err)
	got := s.Endpoint("pod1_Calico")
	if diff := cmp.Diff(pod.Policies, got.Policies, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("policies changed (-before +after):\n%s", diff)
	}
	want := []plan.ACL{acl("a", "In", "Allow", 1000), acl("b", "Out", "Allow", 1000)}
	if diff := cmp.Diff(want, got.ACLs); diff != "" {
		t.Errorf("ACLs (-want +got):\n%s (the CNI's default deny must be gone)", diff)
	}

	// An empty list removes every ACL and nothing else.
	apply(t, m, aclOp(pod.Name))
	s, err = m.Snapshot(ctx)
	must(t, err)
	if got := s.Endpoint("pod1_Calico"); len(got.ACLs) != 0 || len(got.Policies) != len(pod.Policies) {
		t.Errorf("after an Update with no ACLs: %+v, want no ACLs and its %d other policies", got, len(pod.Policies))
	}
}

// TestHNSAddedPolicies: a new Overlay network gets ProviderAddress and a
// DR MAC; an L2Bridge network does not.
func TestHNSAddedPolicies(t *testing.T) {
	m := hnsmem.New(hnsmem.ManagementAddress(addr("192.168.0.10")))
	bridge := &hns.Network{Name: "cbr0", Type: "L2Bridge", AdapterName: "Ethernet",
		Subnets: []hns.Subnet{{Prefix: pfx("10.244.5.0/24"), Gateway: addr("10.244.5.1")}}}
	apply(t, m, createNetwork(overlay()), createNetwork(bridge))
	s, err := m.Snapshot(context.Background())
	must(t, err)
	o := s.Network(net1)
	if o.ProviderAddress != addr("192.168.0.10") {
		t.Errorf("ProviderAddress = %v, want the management address", o.ProviderAddress)
	}
	if !strings.HasPrefix(o.DRMAC, "00-15-5D-") || len(o.DRMAC) != 17 || strings.ToUpper(o.DRMAC) != o.DRMAC {
		t.Errorf("DRMAC = %q, want 00-15-5D-XX-XX-XX", o.DRMAC)
	}
	if o.ID == "" || o.ID == s.Network("cbr0").ID {
		t.Errorf("IDs %q and %q", o.ID, s.Network("cbr0").ID)
	}
	if b := s.Network("cbr0"); b.ProviderAddress.IsValid() || b.DRMAC != "" {
		t.Errorf("L2Bridge got HNS policies: %+v", b)
	}
	// The DR MAC is deterministic: the same name, the same MAC.
	m2 := hnsmem.New()
	apply(t, m2, createNetwork(overlay()))
	s2, err := m2.Snapshot(context.Background())
	must(t, err)
	if s2.Network(net1).DRMAC != o.DRMAC {
		t.Errorf("DR MAC %s, then %s", o.DRMAC, s2.Network(net1).DRMAC)
	}
	if len(hns.Diff(s, &hns.Want{Network: *overlay(), HostEndpoint: hns.Endpoint{}})) == 0 {
		t.Fatal("want a host endpoint op")
	}
	for _, op := range hns.Diff(s, &hns.Want{Network: *overlay(), HostEndpoint: *hostEP()}) {
		if op.Kind == hns.KindNetwork || op.Kind == hns.KindNetPolicies {
			t.Errorf("Diff does not ignore HNS's policies: %s", op)
		}
	}
}

// TestReplace: a network replace is delete + create, respecting
// references unless told otherwise.
func TestReplace(t *testing.T) {
	changed := overlay()
	changed.Subnets[0].VNI = 4097

	m := node(t, hnsmem.RefuseDeleteWithEndpoints(false))
	s, err := m.Snapshot(context.Background())
	must(t, err)
	oldID := s.Network(net1).ID
	m.ResetCalls()
	apply(t, m, replaceNetwork(changed))
	calls, mutating := m.Calls(), m.MutatingCalls()
	s, err = m.Snapshot(context.Background())
	must(t, err)
	n := s.Network(net1)
	if n.ID == oldID || n.Subnets[0].VNI != 4097 || len(n.RemoteRoutes) != 0 || len(s.Endpoints) != 0 {
		t.Errorf("after replace: %+v, %d endpoints; want a new network, no routes, no endpoints", n, len(s.Endpoints))
	}
	if len(calls) != 1 || calls[0].Method != "hcnDeleteNetwork+hcnCreateNetwork" || mutating != 1 {
		t.Errorf("calls %v (%d mutating), want one replace", calls, mutating)
	}

	// Refusing (the default), a replace succeeds once every endpoint,
	// the agent's and the others', is gone.
	m = node(t)
	apply(t, m, endpointOp(hns.Delete, hostEP()))
	must(t, m.RemoveEndpoint("pod1_Calico"))
	if err := m.Apply(context.Background(), replaceNetwork(changed)); hns.Code(err) != hns.CodeEntityHasReferences {
		t.Errorf("replace with a remote endpoint left = %v, want ENTITY_HAS_REFERENCES", err)
	}
	must(t, m.RemoveEndpoint("remote-10.244.2.7"))
	apply(t, m, replaceNetwork(changed))

	// Allowed, a delete takes the endpoints with it.
	m = node(t, hnsmem.RefuseDeleteWithEndpoints(false))
	apply(t, m, deleteNetwork(net1))
	if got, want := m.String(), "loadbalancer 00000003-0000-0000-0000-000000000005 VIP 10.96.0.10\n"; got != want {
		t.Errorf("after delete:\n%s\nwant only the load balancer", got)
	}
}

// TestReplaceRename: a replace that renames (From) deletes the network
// under its old name and creates the new one: one network after it, not
// two on the same block.
func TestReplaceRename(t *testing.T) {
	m := node(t, hnsmem.RefuseDeleteWithEndpoints(false))
	n := overlay()
	n.Name = "Calico2"
	op := replaceNetwork(n)
	op.From = net1
	apply(t, m, op)
	s, err := m.Snapshot(context.Background())
	must(t, err)
	if len(s.Networks) != 1 || s.Networks[0].Name != "Calico2" {
		t.Errorf("after a renaming replace: networks %+v, want Calico2 alone", s.Networks)
	}
}

func TestFeatures(t *testing.T) {
	f, err := hnsmem.New().Features(context.Background())
	must(t, err)
	if want := (hns.Features{V2API: true, RemoteRoute: true, VxlanPort: true, ACLRuleID: true, Version: "15.4"}); f != want {
		t.Errorf("Features = %+v, want %+v", f, want)
	}
	old := hns.Features{V2API: true, RemoteRoute: true, Version: "9.3"}
	f, err = hnsmem.New(hnsmem.WithFeatures(old)).Features(context.Background())
	must(t, err)
	if f != old {
		t.Errorf("Features = %+v, want %+v", f, old)
	}
	if _, err := hnsmem.New(hnsmem.WithFeatures(hns.Features{})).Snapshot(context.Background()); hns.Code(err) != hnsmem.CodeRequestUnsupported {
		t.Errorf("Snapshot without the v2 API = %v", err)
	}
}

// TestReboot: non-persistent networks vanish with their endpoints.
func TestReboot(t *testing.T) {
	m := node(t)
	flannel := &hns.Network{Name: "flannel.4096", Type: "Overlay", NonPersistent: true,
		Subnets: []hns.Subnet{{Prefix: pfx("10.245.1.0/24"), Gateway: addr("10.245.1.1"), VNI: 4096}}}
	apply(t, m, createNetwork(flannel))
	must(t, m.AddPodEndpoint("flannel.4096", "pod2", pfx("10.245.1.7/24"), "", nil))
	must(t, m.AddNetwork(hns.Network{Name: "nat", Type: "NAT", Subnets: []hns.Subnet{{Prefix: pfx("172.20.0.0/20"), Gateway: addr("172.20.0.1")}}}))
	golden(t, "reboot.txtar", "before", m.String())
	must(t, m.Reboot())
	golden(t, "reboot.txtar", "after", m.String())
	s, err := m.Snapshot(context.Background())
	must(t, err)
	if s.Network("flannel.4096") != nil || s.Endpoint("pod2") != nil || s.Network(net1) == nil || s.Endpoint("pod1_Calico") == nil {
		t.Errorf("after reboot:\n%s", m.String())
	}
}

// TestFaultInjection: injected failures, transient errors and timeouts
// leave the state exactly as it was.
func TestFaultInjection(t *testing.T) {
	ctx := context.Background()
	busy := &hns.Error{Code: 0x800705AA, Msg: "insufficient system resources", Transient: true}
	ops := []hns.Op{
		addRoute(route("10.244.3.0/26", "10.0.0.6")),
		aclOp("pod1_Calico", acl("a", "In", "Allow", 1000)),
		endpointOp(hns.Delete, hostEP()),
	}

	t.Run("FailCall", func(t *testing.T) {
		m := node(t)
		m.FailCall(2, busy)
		apply(t, m, ops[0])
		before := m.String()
		err := m.Apply(ctx, ops[1])
		if !hns.IsTransient(err) || hns.Code(err) != busy.Code {
			t.Fatalf("Apply = %v, want the injected transient error", err)
		}
		var he *hns.Error
		if errors.As(err, &he); he.Call != "hcnModifyEndpoint" {
			t.Errorf("injected error's Call = %q, want the failing call's", he.Call)
		}
		if diff := cmp.Diff(before, m.String()); diff != "" {
			t.Errorf("state changed (-before +after):\n%s", diff)
		}
		apply(t, m, ops[1], ops[2]) // the retry succeeds
	})

	t.Run("FailNext", func(t *testing.T) {
		m := node(t)
		m.FailNext(hns.KindEndpoint, errors.New("boom"))
		apply(t, m, ops[0], ops[1])
		before := m.String()
		if err := m.Apply(ctx, ops[2]); err == nil || err.Error() != "boom" {
			t.Fatalf("Apply = %v, want boom", err)
		}
		if diff := cmp.Diff(before, m.String()); diff != "" {
			t.Errorf("state changed (-before +after):\n%s", diff)
		}
		apply(t, m, ops[2])
	})

	t.Run("every call of a replace", func(t *testing.T) {
		// A replace that fails half-way (the create) leaves the old network.
		m := node(t, hnsmem.RefuseDeleteWithEndpoints(false))
		bad := overlay()
		bad.Subnets[0].Gateway = netip.Addr{}
		before := m.String()
		if err := m.Apply(ctx, replaceNetwork(bad)); hns.Code(err) != hnsmem.CodeInvalidNetwork {
			t.Fatalf("Apply = %v", err)
		}
		if diff := cmp.Diff(before, m.String()); diff != "" {
			t.Errorf("state changed (-before +after):\n%s", diff)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		m := node(t, hnsmem.Latency(100*time.Millisecond))
		before := m.String()
		tctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := m.Apply(tctx, ops[0])
		if !errors.Is(err, context.DeadlineExceeded) || !hns.IsTransient(err) {
			t.Fatalf("Apply = %v, want a deadline exceeded", err)
		}
		if time.Since(start) >= 100*time.Millisecond {
			t.Errorf("Apply did not honour the context")
		}
		if diff := cmp.Diff(before, m.String()); diff != "" {
			t.Errorf("state changed (-before +after):\n%s", diff)
		}
		if _, err := m.Snapshot(tctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Snapshot = %v, want a deadline exceeded", err)
		}
		if m.MutatingCalls() != 1 {
			t.Errorf("MutatingCalls = %d, want the timed-out call counted", m.MutatingCalls())
		}
	})
}

// TestCalls: the recorder names each call; reads are not mutating.
func TestCalls(t *testing.T) {
	m := node(t)
	ctx := context.Background()
	_, err := m.Features(ctx)
	must(t, err)
	_, err = m.Snapshot(ctx)
	must(t, err)
	changed := overlay()
	changed.HostRoute = false
	ep2 := &hns.Endpoint{Name: "own", Network: net1, IP: pfx("10.244.1.9/26")}
	apply(t, m,
		netPolicies(changed),
		addRoute(route("10.244.3.0/26", "10.0.0.6")),
		removeRoute(route("10.244.2.0/26", "10.0.0.5")),
		endpointOp(hns.Create, ep2),
		endpointOp(hns.Update, ep2),
		endpointOp(hns.Replace, ep2),
		aclOp("pod1_Calico", acl("a", "In", "Allow", 1000)),
		endpointOp(hns.Delete, ep2),
	)
	m.FailNext(hns.KindNetwork, &hns.Error{Code: hns.CodeEntityHasReferences, Msg: "injected"})
	if err := m.Apply(ctx, deleteNetwork(net1)); err == nil {
		t.Fatal("no error")
	}
	var lines []string
	for _, c := range m.Calls() {
		lines = append(lines, c.String())
	}
	lines = append(lines, fmt.Sprintf("mutating: %d", m.MutatingCalls()))
	golden(t, "calls.txtar", "calls", strings.Join(lines, "\n")+"\n")
	m.ResetCalls()
	if len(m.Calls()) != 0 || m.MutatingCalls() != 0 {
		t.Error("ResetCalls did not reset")
	}
}

// TestString is the golden rendering of a whole node.
func TestString(t *testing.T) {
	m := node(t)
	apply(t, m, aclOp("pod1_Calico",
		plan.ACL{Id: "allow-host-to-endpoint", Protocols: "256", Action: "Allow", Direction: "In", RuleType: "Switch", Priority: 900, RemoteAddresses: "10.0.0.4/32"},
		plan.ACL{Id: "knp.default.web-in0", Protocols: "6", Action: "Allow", Direction: "In", RuleType: "Switch", Priority: 1000, LocalAddresses: "10.244.1.5", RemoteAddresses: "10.244.0.0/16", LocalPorts: "80,8000-8080"},
		plan.ACL{Protocols: "256", Action: "Block", Direction: "In", RuleType: "Switch", Priority: 1001},
		plan.ACL{Protocols: "256", Action: "Allow", Direction: "In", RuleType: "Host", Priority: 0},
		plan.ACL{Protocols: "256", Action: "Allow", Direction: "Out", RuleType: "Switch", Priority: 1000},
	))
	golden(t, "node.txtar", "state", m.String())
}

// TestSnapshotIsACopy: changing a snapshot does not change HNS.
func TestSnapshotIsACopy(t *testing.T) {
	m := node(t)
	before := m.String()
	s, err := m.Snapshot(context.Background())
	must(t, err)
	s.Networks[0].Subnets[0].VNI = 1
	s.Networks[0].RemoteRoutes[0].DRMAC = "x"
	s.Endpoints[0].Policies[0] = plan.NewPolicy(plan.HostRouteSetting{})
	for i := range s.Endpoints {
		if len(s.Endpoints[i].ACLs) > 0 {
			s.Endpoints[i].ACLs[0].Action = "x"
		}
		for j, p := range s.Endpoints[i].Policies {
			if o, ok := p.Settings.(plan.OutBoundNAT); ok {
				o.Exceptions[0] = pfx("1.0.0.0/8")
				s.Endpoints[i].Policies[j].Settings = o
			}
		}
	}
	s.LoadBalancers[0].ID = "x"
	if diff := cmp.Diff(before, m.String()); diff != "" {
		t.Errorf("state changed (-before +after):\n%s", diff)
	}
}

// TestFailedRouteCallKeepsRoutes: a transaction shares the network's
// routes with the state until it changes them; a call that removes
// routes and then fails (a Replace whose new route HNS refuses), or adds
// some and then fails, leaves every route where it was.
func TestFailedRouteCallKeepsRoutes(t *testing.T) {
	m := node(t)
	apply(t, m, addRoute(route("10.244.3.0/26", "10.0.0.6")), addRoute(route("10.244.4.0/26", "10.0.0.7")))
	before := m.String()
	bad := route("10.244.2.0/26", "10.0.0.5")
	bad.VNI = 0x10000 // does not fit hcsshim's uint16
	if err := m.Apply(context.Background(), hns.Op{Action: hns.Replace, Kind: hns.KindRoute, Name: bad.Prefix.String(), Network: net1, RouteSpec: bad}); err == nil {
		t.Fatal("a route with VNI 0x10000 was accepted")
	}
	if diff := cmp.Diff(before, m.String()); diff != "" {
		t.Errorf("a failed Replace changed the state (-before +after):\n%s", diff)
	}
	if err := m.Apply(context.Background(), hns.Op{Action: hns.Create, Kind: hns.KindRoute, Network: net1,
		Routes: []hns.RemoteRoute{*route("10.244.5.0/26", "10.0.0.8"), *bad}}); err == nil {
		t.Fatal("a batch with a route of VNI 0x10000 was accepted")
	}
	if diff := cmp.Diff(before, m.String()); diff != "" {
		t.Errorf("a failed batch changed the state (-before +after):\n%s", diff)
	}
}

// TestOpen: the state survives a restart; IDs keep counting.
func TestOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hns.json")
	m, err := hnsmem.Open(path)
	must(t, err)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("Open created the file before any change: %v", err)
	}
	apply(t, m, createNetwork(overlay()), addRoute(route("10.244.2.0/26", "10.0.0.5")), endpointOp(hns.Create, hostEP()))
	must(t, m.AddPodEndpoint(net1, "pod1_Calico", pfx("10.244.1.5/26"), "", []plan.Policy{
		plan.NewPolicy(plan.OutBoundNAT{Exceptions: []netip.Prefix{pfx("10.96.0.0/12")}}),
		plan.NewPolicy(plan.ACL{Protocols: "256", Action: "Block", Direction: "In", RuleType: "Switch", Priority: 65500})}))
	must(t, m.AddLoadBalancer("lb-1", addr("10.96.0.10")))
	want := m.String()
	s1, err := m.Snapshot(context.Background())
	must(t, err)

	m2, err := hnsmem.Open(path)
	must(t, err)
	if diff := cmp.Diff(want, m2.String()); diff != "" {
		t.Errorf("reopened state (-saved +loaded):\n%s", diff)
	}
	apply(t, m2, endpointOp(hns.Create, &hns.Endpoint{Name: "own", Network: net1, IP: pfx("10.244.1.9/26")}))
	s2, err := m2.Snapshot(context.Background())
	must(t, err)
	ids := map[string]bool{}
	for _, e := range s2.Endpoints {
		ids[e.ID] = true
	}
	for _, n := range s1.Networks {
		ids[n.ID] = true
	}
	if len(ids) != len(s2.Endpoints)+len(s1.Networks) {
		t.Errorf("an ID was reused after reopening: %v", ids)
	}
	// A failed call is not saved.
	m2.FailCall(1, errors.New("boom"))
	if err := m2.Apply(context.Background(), deleteNetwork(net1)); err == nil {
		t.Fatal("no error")
	}
	m3, err := hnsmem.Open(path)
	must(t, err)
	if diff := cmp.Diff(m2.String(), m3.String()); diff != "" {
		t.Errorf("reopened state (-saved +loaded):\n%s", diff)
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	must(t, err)
	if len(entries) != 1 {
		t.Errorf("files left behind: %v", entries)
	}

	must(t, os.WriteFile(path, []byte("{"), 0o644))
	if _, err := hnsmem.Open(path); err == nil {
		t.Error("Open of a corrupt file succeeded")
	}
}

// TestConcurrent is a smoke test for -race.
func TestConcurrent(t *testing.T) {
	m := node(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("pod%d", i+10)
			if err := m.AddPodEndpoint(net1, name, pfx(fmt.Sprintf("10.244.1.%d/26", i+10)), "", nil); err != nil {
				t.Error(err)
				return
			}
			for j := range 20 {
				if err := m.Apply(ctx, aclOp(name, acl("a", "In", "Allow", uint16(1000+j)))); err != nil {
					t.Error(err)
				}
				if _, err := m.Snapshot(ctx); err != nil {
					t.Error(err)
				}
				_ = m.String()
				_ = m.Calls()
			}
		}()
	}
	wg.Wait()
	if got := m.MutatingCalls(); got != 8*20 {
		t.Errorf("MutatingCalls = %d, want %d", got, 8*20)
	}
}

// golden compares got with the file name in the txtar archive testdata/
// archive; HNSPLAN_UPDATE=1 rewrites it.
func golden(t *testing.T, archive, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", archive)
	ar, err := txtar.ParseFile(path)
	if err != nil && !(update && os.IsNotExist(err)) {
		t.Fatal(err)
	}
	if ar == nil {
		ar = &txtar.Archive{Comment: []byte("# Golden hnsmem states: HNSPLAN_UPDATE=1 go test ./applier/hns/hnsmem rewrites them.\n")}
	}
	for i, f := range ar.Files {
		if f.Name != name {
			continue
		}
		if update {
			ar.Files[i].Data = []byte(got)
			must(t, os.WriteFile(path, txtar.Format(ar), 0o644))
			return
		}
		if diff := cmp.Diff(string(f.Data), got); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", archive, name, diff)
		}
		return
	}
	if !update {
		t.Fatalf("%s has no file %s; run with HNSPLAN_UPDATE=1", archive, name)
	}
	ar.Files = append(ar.Files, txtar.File{Name: name, Data: []byte(got)})
	must(t, os.MkdirAll("testdata", 0o755))
	must(t, os.WriteFile(path, txtar.Format(ar), 0o644))
}
