package check_test

import (
	"testing"

	"github.com/hnsplan/hnsplan/compiler/check"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/internal/synth"
)

// BenchmarkVet measures `hnsplan vet` of the 1,000-Windows-node intent:
// Load (see intent.BenchmarkLoad, the baseline) plus every constraint rule.
func BenchmarkVet(b *testing.B) {
	dir := b.TempDir()
	if err := synth.Write(dir, synth.Benchmark); err != nil {
		b.Fatal(err)
	}
	rules, err := intent.Catalog()
	if err != nil {
		b.Fatal(err)
	}
	cat := check.NewCatalog(rules)
	for b.Loop() {
		in, loaded, err := intent.Load(dir, intent.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if f := check.Vet(in, loaded, cat); f.HasErrors() {
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
