package compiler_test

import (
	"testing"
	"time"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/internal/synth"
)

// BenchmarkCompile builds the 1,000-Windows + 100-Linux-node intent into
// 1,000 plans of 1,099 remote subnet routes each (≈1.1 M in all), as
// `hnsplan compile` does, and reports each phase: build (compiler.Build:
// load, vet and compile), encode (JSON + digest, on all CPUs), and
// cue-eval — CUE's own evaluation of the same intent, for the ratio.
// (intent.BenchmarkLoad and check.BenchmarkRules measure load and vet's
// rules alone.)
func BenchmarkCompile(b *testing.B) {
	dir := b.TempDir()
	if err := synth.Write(dir, synth.Benchmark); err != nil {
		b.Fatal(err)
	}
	var build, enc, cueEval time.Duration
	routes := 0
	for b.Loop() {
		t0 := time.Now()
		res, findings, err := compiler.Build(dir, compiler.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if findings.HasErrors() || !res.Compiled() {
			b.Fatalf("invalid: %v", findings)
		}
		t1 := time.Now()
		if _, err := compiler.EncodePlans(res.Plans); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		build += t1.Sub(t0)
		enc += t2.Sub(t1)
		routes = 0
		for _, p := range res.Plans {
			routes += len(p.RemoteSubnetRoutes())
		}

		b.StopTimer()
		t3 := time.Now()
		if _, err := intent.ExportCUE(dir); err != nil {
			b.Fatal(err)
		}
		cueEval += time.Since(t3)
		b.StartTimer()
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Milliseconds()) / n }
	b.ReportMetric(ms(build), "build-ms/op")
	b.ReportMetric(ms(enc), "encode-ms/op")
	b.ReportMetric(ms(cueEval), "cue-eval-ms/op")
	b.ReportMetric(float64(build+enc)/float64(cueEval), "x-cue-eval")
	b.ReportMetric(float64(routes), "routes")
}
