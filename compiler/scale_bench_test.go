package compiler_test

import (
	"fmt"
	"testing"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/internal/synth"
)

// BenchmarkCompileScale is `hnsplan compile` in process at each size of
// synth.Growth (1,100 to 5,000 nodes, every Linux node with a block):
// compiler.Build, then WritePlans into a fresh directory. The CLI's wall
// time and peak RSS at these sizes are `make bench`'s (hack/bench-scale.sh);
// this one is for profiles (-cpuprofile, -memprofile) and benchstat.
func BenchmarkCompileScale(b *testing.B) {
	for _, s := range synth.Growth {
		b.Run(fmt.Sprintf("nodes=%d", s.Nodes()), func(b *testing.B) {
			dir := b.TempDir()
			if err := synth.Write(dir, s); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				res, findings, err := compiler.Build(dir, compiler.Options{})
				if err != nil {
					b.Fatal(err)
				}
				if findings.HasErrors() || !res.Compiled() {
					b.Fatalf("invalid: %v", findings)
				}
				if _, err := compiler.WritePlans(b.TempDir(), res.Intent.Cluster.Name, res.Plans, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(s.Nodes()), "nodes")
		})
	}
}
