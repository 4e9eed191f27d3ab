package intent

import (
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/load"

	"github.com/hnsplan/hnsplan/compiler/internal/synth"
	"github.com/hnsplan/hnsplan/schema"
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
// intent — `cue export` with the schema applied: load the package, unify
// with #Intent, validate concrete, export JSON.
func BenchmarkCUEExport(b *testing.B) {
	dir := benchDir(b)
	for b.Loop() {
		ctx := newContext()
		def := ctx.CompileBytes(schema.Source, cue.Filename(schema.Filename)).LookupPath(cue.ParsePath("#Intent"))
		inst := load.Instances([]string{"."}, &load.Config{Dir: dir})[0]
		v := def.Unify(ctx.BuildInstance(inst))
		if err := v.Validate(cue.Concrete(true)); err != nil {
			b.Fatal(err)
		}
		if _, err := v.MarshalJSON(); err != nil {
			b.Fatal(err)
		}
	}
}
