package applier_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// withRoutes is p with routes to n remote nodes' blocks: node i's block
// is 10.(100+i/256).(i%256).0/26 behind VTEP 10.241.(i/256).(i%256),
// or, if moved[i], behind a VTEP at another address and MAC.
func withRoutes(p *plan.NodePlan, n int, moved func(int) bool) *plan.NodePlan {
	c := *p
	routes := make([]plan.RemoteSubnetRoute, n)
	for i := range n {
		pa := netip.AddrFrom4([4]byte{10, 241, byte(i / 256), byte(i % 256)})
		mac := fmt.Sprintf("0E-2A-0A-F1-%02X-%02X", byte(i/256), byte(i))
		if moved != nil && moved(i) {
			pa = netip.AddrFrom4([4]byte{10, 242, byte(i / 256), byte(i % 256)})
			mac = fmt.Sprintf("0E-2A-0A-F2-%02X-%02X", byte(i/256), byte(i))
		}
		routes[i] = plan.RemoteSubnetRoute{
			DestinationPrefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(100 + i/256), byte(i % 256), 0}), 26),
			IsolationId:       4096, ProviderAddress: pa, DistributedRouterMacAddress: mac, Node: fmt.Sprintf("node-%d", i)}
	}
	c.SetRoutes(plan.RemoteSubnetTable(p.Cluster, routes))
	c.Digest = fmt.Sprintf("%s-%d-routes", p.Digest, n)
	return &c
}

// heldRoutes are the routes the model holds on the plan's network.
func heldRoutes(t testing.TB, h *hnsmem.HNS, p *plan.NodePlan) []hns.RemoteRoute {
	t.Helper()
	n := h.Held().Network(p.Network.Name)
	if n == nil {
		t.Fatalf("network %s is not there", p.Network.Name)
	}
	return n.RemoteRoutes
}

func wantRoutes(t testing.TB, p *plan.NodePlan) []hns.RemoteRoute {
	t.Helper()
	w, _, err := applier.WantOf(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	rs := slices.Clone(w.Network.RemoteRoutes)
	st := hns.State{Networks: []hns.Network{{RemoteRoutes: rs}}}
	st.Canonical()
	return st.Networks[0].RemoteRoutes
}

var batchModes = map[string][]hnsmem.Option{
	"all-or-nothing": nil,
	"partial":        {hnsmem.WithQuirks(hnsmem.QuirkRouteBatchPartial)},
}

// TestConvergeBatchedRoutes is the convergence property with batched
// route calls, in both batch modes: from a random set of routes to
// another (some nodes gone, some new, some VTEPs moved), with random
// batch sizes and random transient and permanent faults injected into
// the calls, passes reach the plan's routes exactly; the pass after is
// a no-op.
func TestConvergeBatchedRoutes(t *testing.T) {
	dir, inv := writeIntent(t, t.TempDir(), 2, 80)
	base := compile(t, dir, inv).plans["win-1"]
	for mode, opts := range batchModes {
		t.Run(mode, func(t *testing.T) {
			for seed := range 20 {
				r := rand.New(rand.NewPCG(uint64(seed), 19))
				h := hnsmem.New(opts...)
				rec := &applier.Reconciler{HNS: h, RouteBatch: 1 + r.IntN(12), Attempts: 2}
				for step := range 2 {
					n := r.IntN(80)
					flip := r.Uint64()
					p := withRoutes(base, n, func(i int) bool { return flip>>(i%64)&1 == 1 })
					p.Digest = fmt.Sprintf("seed %d step %d", seed, step)
					rec.SetPlan(p)
					for range 1 + r.IntN(3) {
						fault := &hns.Error{Code: 0x80004005, Msg: "injected"}
						if r.IntN(2) == 0 {
							fault = &hns.Error{Code: 0x80070102, Msg: "injected timeout", Transient: true}
						}
						h.FailCall(1+r.IntN(8), fault)
					}
					converged := false
					for pass := 0; pass < 8 && !converged; pass++ {
						st, err := rec.Pass(ctx, nil)
						converged = err == nil && st.State == kube.StateConverged
					}
					if !converged {
						t.Fatalf("seed %d step %d: not converged after 8 passes: %+v", seed, step, rec.Status())
					}
					if got, want := heldRoutes(t, h, p), wantRoutes(t, p); !slices.Equal(got, want) {
						t.Fatalf("seed %d step %d: %d routes held, %d wanted", seed, step, len(got), len(want))
					}
					h.ResetCalls()
					if st, err := rec.Pass(ctx, nil); err != nil || st.Ops != 0 || h.MutatingCalls() != 0 {
						t.Fatalf("seed %d step %d: the pass after: %+v, %v, %d calls", seed, step, st, err, h.MutatingCalls())
					}
				}
			}
		})
	}
}

// TestBatchRefusedRoute: a batch HNS refuses because of one route is
// split until that route is alone: in both modes the other routes land,
// the pass fails naming the refused route, and the calls stay few.
func TestBatchRefusedRoute(t *testing.T) {
	dir, inv := writeIntent(t, t.TempDir(), 2, 80)
	base := compile(t, dir, inv).plans["win-1"]
	p := withRoutes(base, 64, nil)
	p.Routes.Nodes[slices.IndexFunc(p.Routes.Nodes, func(n plan.RouteNode) bool { return n.Node == "node-37" })].TunnelMAC = "not-a-mac"
	bad := "10.100.37.0/26"
	for mode, opts := range batchModes {
		t.Run(mode, func(t *testing.T) {
			h := hnsmem.New(opts...)
			rec := &applier.Reconciler{HNS: h}
			rec.SetPlan(p)
			st, err := rec.Pass(ctx, nil)
			if err == nil || !strings.Contains(err.Error(), "route "+bad) || hns.Code(err) != hns.CodeInvalidPolicy {
				t.Fatalf("the pass: %v, want the refused route %s named, INVALID_POLICY", err, bad)
			}
			if held := heldRoutes(t, h, p); len(held) != 63 || slices.ContainsFunc(held, func(r hns.RemoteRoute) bool { return r.Prefix.String() == bad }) {
				t.Errorf("%d routes held, want the 63 HNS accepts", len(held))
			}
			if st.Ops != 1+63 { // the network, and the routes that landed
				t.Errorf("status says %d ops applied, want 64", st.Ops)
			}
			// network + the batch + 2 calls a halving on the refused
			// route's path (6 levels); partial: fewer, what landed is
			// not sent again
			if calls := h.MutatingCalls(); calls > 1+1+2*6 {
				t.Errorf("%d calls to isolate one refused route of 64", calls)
			}
			t.Logf("%s: %d mutating calls", mode, h.MutatingCalls())
		})
	}
}

// TestBatchCalls: the routes of a fresh node cost one call per batch,
// and a changed VTEP's route is removed (one batch) before it is added
// (another); with RouteBatch 1, one call per route as before batches.
func TestBatchCalls(t *testing.T) {
	dir, inv := writeIntent(t, t.TempDir(), 2, 80)
	base := compile(t, dir, inv).plans["win-1"]
	for _, tc := range []struct {
		batch, fresh, vtep int
	}{
		{0, 1 + 3 + 1, 2},      // network, 1,200 routes in 3 batches of 500, host endpoint; 100 moved: remove + add
		{1, 1 + 1200 + 1, 200}, // one call per route
	} {
		h := hnsmem.New()
		rec := &applier.Reconciler{HNS: h, RouteBatch: tc.batch}
		rec.SetPlan(withRoutes(base, 1200, nil))
		if _, err := rec.Pass(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if got := h.MutatingCalls(); got != tc.fresh {
			t.Errorf("batch %d: a fresh node with 1,200 routes: %d calls, want %d", tc.batch, got, tc.fresh)
		}
		h.ResetCalls()
		rec.SetPlan(withRoutes(base, 1200, func(i int) bool { return i%12 == 0 }))
		st, err := rec.Pass(ctx, nil)
		if err != nil || st.Ops != 200 {
			t.Fatalf("batch %d: %+v, %v", tc.batch, st, err)
		}
		if got := h.MutatingCalls(); got != tc.vtep {
			t.Errorf("batch %d: 100 moved VTEPs: %d calls, want %d", tc.batch, got, tc.vtep)
		}
		if tc.batch == 0 {
			calls := h.Calls()
			var reqs []string
			for _, c := range calls {
				if c.Method == "hcnModifyNetwork" {
					reqs = append(reqs, strings.Fields(c.Request)[0])
				}
			}
			if !slices.Equal(reqs, []string{"Remove", "Add"}) {
				t.Errorf("the moved VTEPs' requests: %q, want the removal before the addition", reqs)
			}
		}
	}
}
