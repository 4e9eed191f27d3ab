package compiler_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/intent"
)

// TestBuildEach: building several directories at once, with the inventory
// read once and shared, gives each exactly what Build gives it alone: the
// same findings (the inventory's among them) and the same plan files. Run
// with -race, it also shows that the builds do not write what they share.
func TestBuildEach(t *testing.T) {
	inv := "../examples/inventory/calico-vxlan.yaml"
	// On calico-bgp the inventory's pods sit outside the nodes' blocks:
	// findings of the plan compiler from the shared inventory.
	dirs := []string{"../examples/calico-vxlan", "../examples/calico-bgp", "../examples/calico-vxlan"}
	opt := compiler.Options{Inventory: []string{inv}}
	got := compiler.BuildEach(dirs, opt)
	if len(got) != len(dirs) {
		t.Fatalf("%d builds for %d directories", len(got), len(dirs))
	}
	inventoryFindings := 0
	for i, dir := range dirs {
		res, findings, err := compiler.Build(dir, opt)
		if err != nil || got[i].Err != nil {
			t.Fatalf("%s: Build: %v; BuildEach: %v", dir, err, got[i].Err)
		}
		if diff := cmp.Diff(findings, got[i].Findings); diff != "" {
			t.Errorf("%s: findings (-Build +BuildEach):\n%s", dir, diff)
		}
		for _, f := range findings {
			if f.Pos.File == inv {
				inventoryFindings++
			}
		}
		want, err := compiler.EncodePlans(res.Plans)
		if err != nil {
			t.Fatal(err)
		}
		files, err := compiler.EncodePlans(got[i].Result.Plans)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 {
			t.Fatalf("%s: no plans", dir)
		}
		if diff := cmp.Diff(want, files); diff != "" {
			t.Errorf("%s: plans (-Build +BuildEach):\n%s", dir, diff)
		}
		if got[i].Result.Intent == got[(i+1)%len(dirs)].Result.Intent {
			t.Errorf("%s: two builds share one intent", dir)
		}
	}
	if inventoryFindings == 0 {
		t.Error("no finding positioned in the inventory: the case does not show the shared inventory's findings reach each build")
	}
}

// TestBuildEachErrors: a load error is Build's, word for word; it ends the
// loading, the directories after it not built; an inventory that cannot be
// read is reported as Build reports it.
func TestBuildEachErrors(t *testing.T) {
	ok, missing := "../examples/calico-vxlan", filepath.Join(t.TempDir(), "missing")
	got := compiler.BuildEach([]string{ok, missing, ok}, compiler.Options{})
	_, _, want := compiler.Build(missing, compiler.Options{})
	var pe *intent.PathError
	if !errors.As(got[1].Err, &pe) || got[1].Err.Error() != want.Error() {
		t.Errorf("missing directory: BuildEach %v, Build %v", got[1].Err, want)
	}
	if got[0].Err != nil || !got[0].Result.Compiled() {
		t.Errorf("the directory before the error: %+v", got[0])
	}
	if got[2].Result != nil || got[2].Err != nil || got[2].Findings != nil {
		t.Errorf("the directory after the error was built: %+v", got[2])
	}

	opt := compiler.Options{Inventory: []string{missing}}
	got = compiler.BuildEach([]string{ok, ok}, opt)
	_, _, want = compiler.Build(ok, opt)
	if want == nil || got[0].Err == nil || got[0].Err.Error() != want.Error() {
		t.Errorf("missing inventory: BuildEach %v, Build %v", got[0].Err, want)
	}
}
