package hns_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

var ctx = context.Background()

// randomWant draws a node's desired HNS state: network type, VNI, subnet,
// a subset of routes, host endpoint, and ACL lists for some pods.
func randomWant(r *rand.Rand) *hns.Want {
	block := []string{"192.168.0.0/26", "192.168.0.64/26", "10.200.0.0/24"}[r.IntN(3)]
	p := netip.MustParsePrefix(block)
	typ := []string{"Overlay", "L2Bridge"}[r.IntN(2)]
	w := &hns.Want{PodACLs: map[netip.Addr][]plan.ACL{}}
	w.Network = hns.Network{Name: "Calico", Type: typ, HostRoute: typ == "Overlay",
		Subnets: []hns.Subnet{{Prefix: p, Gateway: p.Addr().Next()}}}
	if typ == "Overlay" {
		w.Network.VXLANPort = 4789
		w.Network.Subnets[0].VNI = uint32(4096 + r.IntN(2))
		for i := range 12 {
			if r.IntN(3) > 0 {
				w.Network.RemoteRoutes = append(w.Network.RemoteRoutes, hns.RemoteRoute{
					Prefix: netip.MustParsePrefix(fmt.Sprintf("172.30.%d.0/26", i)), VNI: w.Network.Subnets[0].VNI,
					ProviderAddress: netip.MustParseAddr(fmt.Sprintf("10.0.0.%d", 30+i)), DRMAC: fmt.Sprintf("00-15-5D-00-00-%02X", i+r.IntN(2)*16)})
			}
		}
	} else {
		w.Network.AdapterName = "Ethernet"
	}
	w.HostEndpoint = hns.Endpoint{Name: "Calico_ep", Network: "Calico", IP: netip.PrefixFrom(p.Addr().Next().Next(), p.Bits()),
		Remote: typ == "Overlay", HostAttached: typ == "L2Bridge"}
	if r.IntN(2) == 0 { // a host endpoint ACL, kept apart from its other policies
		w.HostEndpoint.ACLs = []plan.ACL{{Id: "host-in", Protocols: "6", Action: "Allow", Direction: "In",
			LocalPorts: "22", RuleType: "Switch", Priority: 100}}
	}
	for i := range 4 {
		ip := pod(p, i)
		if r.IntN(2) == 0 {
			continue
		}
		var acls []plan.ACL
		for j := range 1 + r.IntN(4) {
			acls = append(acls, plan.ACL{Id: fmt.Sprintf("r%d-%d", i, j), Protocols: []string{"6", "17", "256"}[r.IntN(3)],
				Action: []string{"Allow", "Block"}[r.IntN(2)], Direction: []string{"In", "Out"}[r.IntN(2)],
				RemoteAddresses: fmt.Sprintf("10.%d.0.0/16", r.IntN(4)), RuleType: "Switch", Priority: uint16(1000 + j)})
		}
		w.PodACLs[ip] = acls
	}
	return w
}

func pod(p netip.Prefix, i int) netip.Addr {
	a := p.Addr()
	for range 5 + i {
		a = a.Next()
	}
	return a
}

// seed puts foreign objects into HNS: the nat network, kube-proxy's load
// balancer; and, on the Calico network once it exists, the CNI's pods.
func seed(t *testing.T, h *hnsmem.HNS) {
	t.Helper()
	if err := h.AddNetwork(hns.Network{Name: "nat", Type: "NAT"}); err != nil {
		t.Fatal(err)
	}
	h.AddLoadBalancer("lb-1", netip.MustParseAddr("10.96.0.10"))
}

// addPods adds the CNI's pod endpoints for want's pods (all four), where
// the network exists and they are missing.
func addPods(t *testing.T, h *hnsmem.HNS, w *hns.Want) {
	t.Helper()
	have, err := h.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if have.Network("Calico") == nil {
		return
	}
	p := w.Network.Subnets[0].Prefix
	for i := range 4 {
		ip := pod(p, i)
		name := fmt.Sprintf("pod%d_Calico", i)
		if have.Endpoint(name) != nil {
			continue
		}
		if err := h.AddPodEndpoint("Calico", name, netip.PrefixFrom(ip, p.Bits()), "", []plan.Policy{plan.NewPolicy(plan.OutBoundNAT{})}); err != nil {
			t.Fatal(err)
		}
	}
	// kube-proxy's remote endpoint for a service backend on another node.
	if w.Network.Type == "Overlay" && have.Endpoint(kubeProxyEP) == nil {
		if err := h.AddRemoteEndpoint("Calico", kubeProxyEP, netip.MustParsePrefix("172.30.0.9/32"), "02-11-22-33-44-55", nil); err != nil {
			t.Fatal(err)
		}
	}
}

const kubeProxyEP = "kube-proxy-remote-172.30.0.9"

// drain removes the CNI's pods from a network that ops replace, as
// draining the node would: HNS refuses to delete a network with endpoints,
// and the agent deletes only its own.
func drain(t *testing.T, h *hnsmem.HNS, have *hns.State, ops []hns.Op) {
	t.Helper()
	for _, op := range ops {
		if op.Kind != hns.KindNetwork || op.Action != hns.Replace {
			continue
		}
		for _, e := range have.EndpointsOn(op.Name) {
			if strings.HasPrefix(e.Name, "pod") || e.Name == kubeProxyEP {
				if err := h.RemoveEndpoint(e.Name); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// converge applies Diff's ops; the pods the CNI would recreate after a
// replace are recreated, and a second Diff must be empty.
func converge(t *testing.T, h *hnsmem.HNS, w *hns.Want) {
	t.Helper()
	for round := range 3 {
		have, err := h.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ops := hns.Diff(have, w)
		if round == 2 && len(ops) > 0 {
			t.Fatalf("not converged after two rounds: %v", ops)
		}
		drain(t, h, have, ops)
		for _, op := range ops {
			if err := h.Apply(ctx, op); err != nil {
				t.Fatalf("%s: %v", op, err)
			}
		}
		addPods(t, h, w) // the CNI networks the pods again
	}
}

// matches checks that HNS holds want: the owned network and host endpoint
// as wanted, the ACL lists of the wanted pods, and the foreign objects.
func matches(t *testing.T, h *hnsmem.HNS, w *hns.Want) {
	t.Helper()
	have, err := h.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ops := hns.Diff(have, w); len(ops) != 0 {
		t.Fatalf("a second Diff is not empty: %v", ops)
	}
	n := have.Network("Calico")
	got := *n
	got.ID, got.ProviderAddress, got.DRMAC = "", netip.Addr{}, ""
	want := w.Network
	slices.SortFunc(want.RemoteRoutes, func(a, b hns.RemoteRoute) int { return a.Prefix.Addr().Compare(b.Prefix.Addr()) })
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("network (-want +got):\n%s", diff)
	}
	for ip, acls := range w.PodACLs {
		for _, e := range have.EndpointsOn("Calico") {
			if e.IP.Addr() == ip && !slices.Equal(hns.CanonicalACLs(e.ACLs), hns.CanonicalACLs(acls)) {
				t.Errorf("pod %s: ACLs differ", ip)
			}
		}
	}
	if w.Network.Type == "Overlay" {
		if e := have.Endpoint(kubeProxyEP); e == nil || !e.Remote {
			t.Errorf("kube-proxy's remote endpoint was lost:\n%s", h.String())
		}
	}
	if have.Network("nat") == nil || len(have.LoadBalancers) != 1 {
		t.Errorf("a foreign object was lost:\n%s", h.String())
	}
}

// TestConvergeRandom is the property: for random have and want, applying
// Diff's ops through the in-memory HNS reaches want, the next Diff is
// empty, and foreign objects survive.
func TestConvergeRandom(t *testing.T) {
	for seedN := range 200 {
		r := rand.New(rand.NewPCG(uint64(seedN), 7))
		h := hnsmem.New()
		seed(t, h)
		start := randomWant(r)
		converge(t, h, start)
		want := randomWant(r)
		converge(t, h, want)
		matches(t, h, want)
		if t.Failed() {
			t.Fatalf("seed %d", seedN)
		}
	}
}

// TestTransitions walks a fixed list of states in order, then in random
// order (tailscale's TestRouterStates shape): every transition converges
// and the foreign objects survive every one.
func TestTransitions(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var states []*hns.Want
	for range 8 {
		states = append(states, randomWant(r))
	}
	h := hnsmem.New()
	seed(t, h)
	order := append([]int{0, 1, 2, 3, 4, 5, 6, 7}, r.Perm(8)...)
	for _, i := range order {
		converge(t, h, states[i])
		matches(t, h, states[i])
	}
	if !strings.Contains(h.String(), "nat") {
		t.Errorf("the foreign network is gone:\n%s", h.String())
	}
}

// TestFaults: every injected fault either is retried to success or
// surfaces as a typed error, and leaves HNS as it was before the call.
func TestFaults(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := 1; n <= 6; n++ {
		for _, fault := range []*hns.Error{
			{Call: "injected", Code: 0x80070102, Msg: "timeout", Transient: true},
			{Call: "injected", Code: hns.CodeInvalidPolicy, Msg: "invalid policy"},
		} {
			h := hnsmem.New()
			seed(t, h)
			want := randomWant(r)
			have, _ := h.Snapshot(ctx)
			ops := hns.Diff(have, want)
			h.FailCall(n, fault)
			for i, op := range ops {
				before := h.String()
				err := h.Apply(ctx, op)
				if err == nil {
					continue
				}
				var e *hns.Error
				if !asError(err, &e) {
					t.Fatalf("op %d: an untyped error: %v", i, err)
				}
				if after := h.String(); after != before {
					t.Fatalf("op %d failed with %v but changed HNS:\n%s", i, err, cmp.Diff(before, after))
				}
				if hns.IsTransient(err) {
					if err := h.Apply(ctx, op); err != nil { // the retry
						t.Fatalf("op %d: retry after a transient fault: %v", i, err)
					}
				}
			}
		}
	}
}

func asError(err error, target **hns.Error) bool {
	e, ok := err.(*hns.Error)
	if ok {
		*target = e
	}
	return ok
}

// loadBig puts have (a BigNode state) into a fresh in-memory HNS, as the
// CNI and an earlier agent run would have left it.
func loadBig(tb testing.TB, have *hns.State) *hnsmem.HNS {
	tb.Helper()
	h := hnsmem.New()
	if err := h.AddNetwork(have.Networks[0]); err != nil {
		tb.Fatal(err)
	}
	for _, e := range have.Endpoints {
		var err error
		if e.Name == "Calico_ep" {
			err = h.Apply(ctx, hns.Op{Action: hns.Create, Kind: hns.KindEndpoint, Name: e.Name, Network: e.Network, EndpointSpec: &e})
		} else {
			policies := make([]plan.Policy, len(e.ACLs))
			for i, a := range e.ACLs {
				policies[i] = plan.NewPolicy(a)
			}
			err = h.AddPodEndpoint(e.Network, e.Name, e.IP, "", policies)
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
	h.ResetCalls()
	return h
}

// wantOf is the Want that have already satisfies.
func wantOf(have *hns.State) *hns.Want {
	w := &hns.Want{Network: have.Networks[0], PodACLs: map[netip.Addr][]plan.ACL{}}
	w.Network.RemoteRoutes = slices.Clone(w.Network.RemoteRoutes)
	for _, e := range have.Endpoints {
		if e.Name == "Calico_ep" {
			w.HostEndpoint = e
		} else {
			w.PodACLs[e.IP.Addr()] = e.ACLs
		}
	}
	return w
}

// TestMutatingCallsPerObject: at the scale, Diff's ops are one per
// object that differs (10 moved routes: 20, one removed and one added
// each; 7 ACL lists: 7), and applied op by op they make one mutating call
// each. Batched as the applier sends them (BatchRoutes), routes cost
// otherwise: one call per batch of up to DefaultRouteBatch routes of one
// network and one direction, here 2 for the 20 route ops (remove, then
// add), so 9 calls for the 27 differing objects. ACL lists, networks and
// endpoints stay one call each. A second pass makes none either way.
func TestMutatingCallsPerObject(t *testing.T) {
	const routes, endpoints = 10, 7
	differing := 2*routes + endpoints
	for _, tc := range []struct {
		name  string
		batch int
		calls int
	}{
		{"op by op", 1, differing},
		{"batched", hns.DefaultRouteBatch, 2 + endpoints},
	} {
		have, want := hns.BigNode(routes, endpoints)
		h := loadBig(t, have)
		snap, err := h.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ops := hns.Diff(snap, want)
		if len(ops) != differing {
			t.Errorf("%s: Diff made %d ops for %d differing objects", tc.name, len(ops), differing)
		}
		for _, op := range hns.BatchRoutes(ops, tc.batch) {
			if err := h.Apply(ctx, op); err != nil {
				t.Fatal(err)
			}
		}
		if got := h.MutatingCalls(); got != tc.calls {
			t.Errorf("%s: %d mutating calls for %d differing objects (ratio %.2f), want %d", tc.name, got, differing, float64(got)/float64(differing), tc.calls)
		}
		h.ResetCalls()
		snap, _ = h.Snapshot(ctx)
		if ops := hns.Diff(snap, want); len(ops) != 0 || h.MutatingCalls() != 0 {
			t.Errorf("%s: second pass: %d ops, %d mutating calls", tc.name, len(ops), h.MutatingCalls())
		}
	}
}

// BenchmarkConverge is one agent pass at the scale through the
// in-memory HNS: Snapshot, Diff, Apply of 27 differing objects, back and
// forth between two states, op by op (no batches: see
// TestMutatingCallsPerObject). It reports mutating calls per differing
// object, which must be 1.
func BenchmarkConverge(b *testing.B) {
	const routes, endpoints = 10, 7
	have, want := hns.BigNode(routes, endpoints)
	h := loadBig(b, have)
	wants := []*hns.Want{want, wantOf(have)}
	n := 0
	for b.Loop() {
		snap, err := h.Snapshot(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, op := range hns.Diff(snap, wants[n%2]) {
			if err := h.Apply(ctx, op); err != nil {
				b.Fatal(err)
			}
		}
		n++
	}
	b.ReportMetric(float64(h.MutatingCalls())/float64(n*(2*routes+endpoints)), "calls/object")
}
