package check_test

import (
	"testing"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/check"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/internal/synth"
)

// BenchmarkVet measures `hnsplan vet` of the 1,000-Windows-node intent:
// compiler.Build, as vet runs it — Load (see intent.BenchmarkLoad, the
// baseline), every constraint rule (BenchmarkRules alone) and the policy
// program, then the plan compiler, so that vet reports what compile would.
func BenchmarkVet(b *testing.B) {
	dir := b.TempDir()
	if err := synth.Write(dir, synth.Benchmark); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		res, f, err := compiler.Build(dir, compiler.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if f.HasErrors() || !res.Compiled() {
			b.Fatalf("the benchmark intent is invalid:\n%v", f)
		}
	}
}

// BenchmarkRules measures the constraint rules alone, on a loaded intent.
func BenchmarkRules(b *testing.B) {
	dir := b.TempDir()
	if err := synth.Write(dir, synth.Benchmark); err != nil {
		b.Fatal(err)
	}
	rules, _ := intent.Catalog()
	cat := check.NewCatalog(rules)
	in, _, err := intent.Load(dir, intent.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		check.Run(in, cat)
	}
}
