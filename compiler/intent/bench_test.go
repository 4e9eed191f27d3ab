package intent

import (
	"testing"

	"github.com/hnsplan/hnsplan/internal/synth"
)

func benchDir(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	if err := synth.Write(dir, synth.Benchmark); err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkLoad measures Load of the 1,000-node intent: CUE evaluation and
// validation, export, decoding into Go types and the Go-side checks.
func BenchmarkLoad(b *testing.B) {
	dir := benchDir(b)
	for b.Loop() {
		in, findings, err := Load(dir, Options{})
		if err != nil || findings.HasErrors() || len(in.Cluster.Nodes) != 1100 {
			b.Fatalf("Load: %v %v", err, findings)
		}
	}
}

// BenchmarkCUEExport is the baseline: what CUE alone does with the same
// intent (ExportCUE).
func BenchmarkCUEExport(b *testing.B) {
	dir := benchDir(b)
	for b.Loop() {
		if _, err := ExportCUE(dir); err != nil {
			b.Fatal(err)
		}
	}
}
