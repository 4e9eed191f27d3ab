package applier_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
)

// BenchmarkFromEmptyACLs programs a node of 110 pod endpoints whose ACL
// lists are empty, with every HNS call taking 50 ms (hnsmem.Latency): the
// pass should make one mutating call per endpoint and take about
// (calls + the snapshot's 3 reads) × 50 ms. Run with -benchtime=1x.
func BenchmarkFromEmptyACLs(b *testing.B) {
	for _, latency := range []time.Duration{0, 50 * time.Millisecond} {
		b.Run("latency="+latency.String(), func(b *testing.B) { fromEmpty(b, latency) })
	}
}

// fromEmpty is BenchmarkFromEmptyACLs at one latency; latency 0 measures
// the agent's own work (rendering, diffing, and the in-memory HNS saving
// its state file after every call).
func fromEmpty(b *testing.B, latency time.Duration) {
	dir, inv := writeIntent(b, b.TempDir(), 110, 80)
	ex := compile(b, dir, inv)
	p := ex.plans["win-1"]
	var calls, reads int
	for b.Loop() {
		b.StopTimer()
		state := b.TempDir() + "/hns.json"
		h, err := hnsmem.Open(state)
		if err != nil {
			b.Fatal(err)
		}
		r := &applier.Reconciler{HNS: h}
		r.SetPlan(p)
		if _, err := r.Pass(ctx, ex.cluster); err != nil { // network, routes, host endpoint
			b.Fatal(err)
		}
		cni(b, h, p, ex.cluster)
		slow, err := hnsmem.Open(state, hnsmem.Latency(latency)) // the same state, slow
		if err != nil {
			b.Fatal(err)
		}
		r.HNS = slow
		b.StartTimer()
		st, err := r.Pass(ctx, ex.cluster)
		if err != nil || st.Ops != 110 {
			b.Fatalf("%+v, %v", st, err)
		}
		calls, reads = slow.MutatingCalls(), len(slow.Calls())-slow.MutatingCalls()
	}
	b.ReportMetric(float64(calls)/110, "calls/endpoint")
	b.ReportMetric(float64(calls+reads)*latency.Seconds(), "calls×latency-s")
}

// BenchmarkFreshNodeRoutes is issue 19's figure: a fresh node of a
// 5,000-node cluster (5,000 routes, 110 pods) with every HNS call taking
// 50 ms, converged by passes as the agent runs them (network, routes and
// host endpoint; the CNI creates the pods; their ACL lists), then 100
// remote nodes' VTEPs changing. batch=500 is the agent (hns.DefaultRouteBatch);
// batch=1 is one call per route, the design before batches, measured
// side by side. Run with -benchtime=1x: batch=1 takes over 4 minutes.
//
// Metrics: route-calls and acl-calls of the fresh node, fresh-s its wall
// time (Snapshot reads included, one latency each), vtep-calls and
// vtep-s for the VTEP change.
func BenchmarkFreshNodeRoutes(b *testing.B) {
	const remote, pods, moved = 5000, 110, 100
	dir, inv := writeIntent(b, b.TempDir(), pods, 80)
	ex := compile(b, dir, inv)
	fresh := withRoutes(ex.plans["win-1"], remote, nil)
	changed := withRoutes(ex.plans["win-1"], remote, func(i int) bool { return i%(remote/moved) == 0 })
	for _, batch := range []int{hns.DefaultRouteBatch, 1} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			var routeCalls, aclCalls, vtepCalls int
			var freshWall, vtepWall time.Duration
			for b.Loop() {
				h := hnsmem.New(hnsmem.Latency(50 * time.Millisecond))
				r := &applier.Reconciler{HNS: h, RouteBatch: batch}
				r.SetPlan(fresh)
				start := time.Now()
				if _, err := r.Pass(ctx, ex.cluster); err != nil { // network, routes, host endpoint
					b.Fatal(err)
				}
				if n := cni(b, h, fresh, ex.cluster); n != pods {
					b.Fatalf("%d pods", n)
				}
				if st, err := r.Pass(ctx, ex.cluster); err != nil || st.Ops != pods { // the pods' ACL lists
					b.Fatalf("%+v, %v", st, err)
				}
				freshWall = time.Since(start)
				routeCalls, aclCalls = countCalls(h.Calls())
				h.ResetCalls()
				r.SetPlan(changed)
				start = time.Now()
				if st, err := r.Pass(ctx, ex.cluster); err != nil || st.Ops != 2*moved {
					b.Fatalf("%+v, %v", st, err)
				}
				vtepWall = time.Since(start)
				vtepCalls = h.MutatingCalls()
			}
			b.ReportMetric(float64(routeCalls), "route-calls")
			b.ReportMetric(float64(aclCalls), "acl-calls")
			b.ReportMetric(freshWall.Seconds(), "fresh-s")
			b.ReportMetric(float64(vtepCalls), "vtep-calls")
			b.ReportMetric(vtepWall.Seconds(), "vtep-s")
			b.ReportMetric(float64(remote)/float64(routeCalls), "routes/call")
			if batch > 1 && (routeCalls > 15 || aclCalls != pods || vtepCalls > 2 || freshWall > 12*time.Second) {
				b.Errorf("batched: %d route calls (want ≤ 15), %d ACL calls (want %d), %d VTEP-change calls (want ≤ 2), fresh node in %v (want ≤ 12 s)",
					routeCalls, aclCalls, pods, vtepCalls, freshWall)
			}
		})
	}
}

// countCalls counts the calls that wrote routes (hcnModifyNetwork with a
// RemoteSubnetRoute request) and ACL lists (hcnModifyEndpoint).
func countCalls(calls []hnsmem.Call) (routes, acls int) {
	for _, c := range calls {
		switch {
		case c.Method == "hcnModifyNetwork" && strings.Contains(c.Request, "RemoteSubnetRoute"):
			routes++
		case c.Method == "hcnModifyEndpoint":
			acls++
		}
	}
	return routes, acls
}
