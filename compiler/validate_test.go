package compiler_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// TestCompiledPlansValidate: the agent refuses a plan that fails
// plan.Validate, so the compiler must never write one. Every example
// (with the bundled inventory where there is one) and every mode case is
// compiled, encoded, decoded as the agent does, and validated.
func TestCompiledPlansValidate(t *testing.T) {
	type input struct {
		dir, inventory string
		updateLock     bool
	}
	var inputs []input
	examples, _ := filepath.Glob("../examples/*/*.cue")
	seen := map[string]bool{}
	for _, f := range examples {
		dir := filepath.Dir(f)
		if seen[dir] {
			continue
		}
		seen[dir] = true
		inputs = append(inputs, input{dir: dir})
		if inv := filepath.Join("../examples/inventory", filepath.Base(dir)+".yaml"); fileExists(inv) {
			inputs = append(inputs, input{dir: dir, inventory: inv})
		}
	}
	archives, _ := filepath.Glob("testdata/modes/*.txtar")
	for _, archive := range archives {
		dir := extract(t, readArchive(t, archive))
		in := input{dir: filepath.Join(dir, "intent"), updateLock: fileExists(filepath.Join(dir, "update-lock"))}
		if inv := filepath.Join(dir, "inventory.yaml"); fileExists(inv) {
			in.inventory = inv
		}
		inputs = append(inputs, in)
	}
	if len(inputs) < 10 {
		t.Fatalf("found %d intents to compile, want the examples and the mode cases", len(inputs))
	}
	plans := 0
	for _, in := range inputs {
		var inv []string
		if in.inventory != "" {
			inv = append(inv, in.inventory)
		}
		res, _ := compileDirLock(t, in.dir, in.updateLock, inv...)
		for _, p := range res.Plans {
			b, err := plan.Encode(p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := plan.Decode(b, p.Node)
			if err != nil {
				t.Fatalf("%s (inventory %q) node %s: %v", in.dir, in.inventory, p.Node, err)
			}
			if err := plan.Validate(got); err != nil {
				t.Errorf("%s (inventory %q): %v", strings.TrimPrefix(in.dir, os.TempDir()), in.inventory, err)
			}
			plans++
		}
	}
	if plans == 0 {
		t.Fatal("no plans compiled")
	}
}

func fileExists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}
