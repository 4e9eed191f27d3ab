package compiler_test

import (
	"testing"
	"time"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/check"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/internal/synth"
)

// BenchmarkCompile compiles the 1,000-Windows + 100-Linux-node intent into
// 1,000 plans of 1,099 remote subnet routes each (≈1.1 M in all) and
// reports each phase: load (CUE + decode), vet (the rules), compile (IPAM
// and plans), encode (JSON + digest, on all CPUs), and cue-eval — CUE's own
// evaluation of the same intent, for the ratio.
func BenchmarkCompile(b *testing.B) {
	dir := b.TempDir()
	if err := synth.Write(dir, synth.Benchmark); err != nil {
		b.Fatal(err)
	}
	cat := catalog(b)
	var load_, vet, comp, enc, cueEval time.Duration
	routes := 0
	for b.Loop() {
		t0 := time.Now()
		in, loaded, err := intent.Load(dir, intent.Options{})
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		findings := check.Vet(in, loaded, cat)
		if findings.HasErrors() {
			b.Fatalf("invalid: %v", findings)
		}
		t2 := time.Now()
		res, cf := compiler.Compile(in, cat)
		if cf.HasErrors() {
			b.Fatalf("compile: %v", cf)
		}
		t3 := time.Now()
		files, err := compiler.EncodePlans(res.Plans)
		if err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		load_ += t1.Sub(t0)
		vet += t2.Sub(t1)
		comp += t3.Sub(t2)
		enc += t4.Sub(t3)
		routes = 0
		for _, p := range res.Plans {
			routes += len(p.RemoteSubnetRoutes)
		}
		_ = files

		b.StopTimer()
		t5 := time.Now()
		if _, err := intent.ExportCUE(dir); err != nil {
			b.Fatal(err)
		}
		cueEval += time.Since(t5)
		b.StartTimer()
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Milliseconds()) / n }
	b.ReportMetric(ms(load_), "load-ms/op")
	b.ReportMetric(ms(vet), "vet-ms/op")
	b.ReportMetric(ms(comp), "compile-ms/op")
	b.ReportMetric(ms(enc), "encode-ms/op")
	b.ReportMetric(ms(cueEval), "cue-eval-ms/op")
	b.ReportMetric(float64(load_+vet+comp+enc)/float64(cueEval), "x-cue-eval")
	b.ReportMetric(float64(routes), "routes")
}
