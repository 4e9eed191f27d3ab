package compiler_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/txtar"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

var update = os.Getenv("HNSPLAN_UPDATE") != ""

// compileDir builds dir as the commands do (compiler.Build); the intent
// must vet without error. The findings are the plan compiler's own, which
// the goldens hold.
func compileDir(t testing.TB, dir string, inventory ...string) (*compiler.Result, diag.List) {
	t.Helper()
	return compileDirLock(t, dir, false, inventory...)
}

// compileDirLock is compileDir, as `compile --update-lock` when updateLock.
func compileDirLock(t testing.TB, dir string, updateLock bool, inventory ...string) (*compiler.Result, diag.List) {
	t.Helper()
	res, findings, err := compiler.Build(dir, compiler.Options{Inventory: inventory, UpdateLock: updateLock})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Compiled() {
		var b strings.Builder
		_ = findings.WriteText(&b, false)
		t.Fatalf("intent %s is invalid:\n%s", dir, b.String())
	}
	var own diag.List
	for _, f := range findings {
		switch f.Rule {
		case compiler.RuleBlockInvalid, compiler.RuleNoBlock, compiler.RulePodIPOutside, compiler.RuleACLBudget:
			own = append(own, f)
		}
	}
	return res, own
}

// goldens compares the compiled plans with the archive's want/ files: the
// text form of all plans (want/plan.txt), each file compile writes — the
// shared parts (want/_<part>.json) and the plans (want/<node>.json) — and
// the compiler's findings (want/findings.txt). Every file must also decode
// and fit the CUE mirror's definition of its kind, and every plan, read
// back and assembled from the parts as a reader does, must print as the
// compiled plan. HNSPLAN_UPDATE=1 rewrites the want/ files.
func goldens(t *testing.T, archive string, ar *txtar.Archive, res *compiler.Result, findings diag.List) {
	t.Helper()
	updatesLock := slices.ContainsFunc(ar.Files, func(f txtar.File) bool { return f.Name == "update-lock" })
	files, err := compiler.EncodePlans(res.Plans)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	var text, readBack bytes.Buffer
	var parts plan.Parts
	plans := 0
	for _, f := range files {
		got["want/"+f.Name] = f.Data
		if !f.IsPlan() {
			if plans > 0 {
				t.Errorf("part %s is written after a plan: a reader must find the parts first", f.Name)
			}
			part, err := decodePart(f)
			if err != nil {
				t.Errorf("part %s does not decode: %v", f.Name, err)
				continue
			}
			parts.Add(part)
			if err := intent.ValidatePart(f.Data); err != nil {
				t.Errorf("part %s does not fit schema #%s: %v", f.Name, f.Kind, err)
			}
			continue
		}
		p, err := plan.Decode(f.Data, f.Node)
		if err != nil {
			t.Errorf("plan %s does not decode: %v", f.Name, err)
		} else if err := parts.Assemble(p); err != nil {
			t.Errorf("plan %s does not assemble from the parts written before it: %v", f.Name, err)
		} else {
			if plans > 0 {
				readBack.WriteByte('\n')
			}
			if err := plan.WriteText(&readBack, p); err != nil {
				t.Fatal(err)
			}
		}
		if err := intent.ValidatePlan(f.Data); err != nil {
			t.Errorf("plan %s does not fit schema #NodePlan: %v", f.Name, err)
		}
		if plans > 0 {
			text.WriteByte('\n')
		}
		if err := plan.WriteText(&text, res.Plans[plans]); err != nil {
			t.Fatal(err)
		}
		plans++
	}
	if plans != len(res.Plans) {
		t.Fatalf("%d plan files for %d plans", plans, len(res.Plans))
	}
	if d := cmp.Diff(text.String(), readBack.String()); d != "" {
		t.Errorf("the plans read back and assembled print otherwise than compiled (-compiled +read):\n%s", d)
	}
	got["want/plan.txt"] = text.Bytes()
	var fb strings.Builder
	findings.Sort()
	_ = findings.WriteText(&fb, false)
	got["want/findings.txt"] = []byte(fb.String())
	if updatesLock {
		got["want/"+intent.LockFile] = res.IPAM.Lock.Encode()
	}

	if update {
		var kept []txtar.File
		for _, f := range ar.Files {
			if !strings.HasPrefix(f.Name, "want/") {
				kept = append(kept, f)
			}
		}
		names := make([]string, 0, len(got))
		for n := range got {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			kept = append(kept, txtar.File{Name: n, Data: got[n]})
		}
		ar.Files = kept
		if err := os.WriteFile(archive, txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := map[string][]byte{}
	for _, f := range ar.Files {
		if strings.HasPrefix(f.Name, "want/") {
			want[f.Name] = f.Data
		}
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("%s: golden %s, but no such plan was compiled", archive, name)
		}
	}
	for name, data := range got {
		w, ok := want[name]
		if !ok {
			t.Errorf("%s: no golden for %s (HNSPLAN_UPDATE=1 writes it)", archive, name)
			continue
		}
		if diff := cmp.Diff(string(w), string(data)); diff != "" {
			t.Errorf("%s: %s (-want +got):\n%s", archive, name, diff)
		}
	}
}

// decodePart decodes a part file by its kind.
func decodePart(f compiler.File) (any, error) {
	switch f.Kind {
	case plan.KindRouteTable:
		return plan.DecodeRouteTable(f.Data, f.Part)
	case plan.KindRouteShard:
		return plan.DecodeRouteShard(f.Data, f.Part)
	case plan.KindProgramChunk:
		return plan.DecodeProgramChunk(f.Data, f.Part)
	}
	return nil, fmt.Errorf("part %s of unknown kind %q", f.Part, f.Kind)
}

func readArchive(t *testing.T, name string) *txtar.Archive {
	t.Helper()
	ar, err := txtar.ParseFile(name)
	if err != nil {
		if os.IsNotExist(err) && update {
			return &txtar.Archive{}
		}
		t.Fatal(err)
	}
	return ar
}

// extract writes the archive's files other than want/ into a new directory.
func extract(t *testing.T, ar *txtar.Archive) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range ar.Files {
		if strings.HasPrefix(f.Name, "want/") {
			continue
		}
		p := filepath.Join(dir, f.Name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestExamples compiles every bundled example against its golden plans.
func TestExamples(t *testing.T) {
	dirs, _ := filepath.Glob("../examples/*/*.cue")
	seen := map[string]bool{}
	for _, f := range dirs {
		seen[filepath.Dir(f)] = true
	}
	if len(seen) < 3 {
		t.Fatalf("found %d examples", len(seen))
	}
	for dir := range seen {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			archive := filepath.Join("testdata/examples", name+".txtar")
			ar := readArchive(t, archive)
			res, findings := compileDir(t, dir)
			if len(res.Plans) == 0 {
				t.Fatal("no plans")
			}
			goldens(t, archive, ar, res, findings)
		})
	}
}

// TestModes compiles testdata/modes/*.txtar: every networking mode, and
// the inventory's effect (pod endpoints, tunnel MACs, Linux blocks, DNS).
// An archive's intent/ is the intent, inventory.yaml the inventory; a file
// update-lock compiles as --update-lock and goldens the new lock.
func TestModes(t *testing.T) {
	archives, _ := filepath.Glob("testdata/modes/*.txtar")
	if len(archives) == 0 {
		t.Fatal("no mode cases")
	}
	for _, archive := range archives {
		t.Run(strings.TrimSuffix(filepath.Base(archive), ".txtar"), func(t *testing.T) {
			ar := readArchive(t, archive)
			dir := extract(t, ar)
			var inv []string
			if _, err := os.Stat(filepath.Join(dir, "inventory.yaml")); err == nil {
				inv = append(inv, filepath.Join(dir, "inventory.yaml"))
			}
			_, err := os.Stat(filepath.Join(dir, "update-lock"))
			updateLock := err == nil
			res, findings := compileDirLock(t, filepath.Join(dir, "intent"), updateLock, inv...)
			for i := range findings {
				if rel, err := filepath.Rel(dir, findings[i].Pos.File); err == nil {
					findings[i].Pos.File = rel
				}
			}
			goldens(t, archive, ar, res, findings)
		})
	}
}
