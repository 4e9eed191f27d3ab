package applier_test

import (
	"testing"
	"time"

	"github.com/hnsplan/hnsplan/applier"
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
