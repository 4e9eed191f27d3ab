package diff_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/diff"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/internal/golden"
)

// compileDir builds dir as `hnsplan compile` does; the intent must be
// valid. The plans have their digests, as plan files do.
func compileDir(t testing.TB, dir string, inventory ...string) []*plan.NodePlan {
	t.Helper()
	res, f, err := compiler.Build(dir, compiler.Options{Inventory: inventory})
	if err != nil {
		t.Fatal(err)
	}
	if f.HasErrors() || !res.Compiled() {
		t.Fatalf("%s is invalid: %v", dir, f)
	}
	if _, err := compiler.EncodePlans(res.Plans); err != nil {
		t.Fatal(err)
	}
	return res.Plans
}

// TestDiffs runs testdata/*.txtar: base/ and head/ are intents (with
// inventory.yaml as the inventory of both when present); want.txt is the
// text diff. HNSPLAN_UPDATE=1 rewrites it. Each case's name is the reason
// it is about, which the diff must give (identical and reordered: none).
func TestDiffs(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txtar")
	if len(files) < 10 {
		t.Fatalf("%d cases", len(files))
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		t.Run(name, func(t *testing.T) {
			c := golden.Extract(t, file, "want.txt")
			dir := c.Dir
			var inv []string
			if _, err := os.Stat(filepath.Join(dir, "inventory.yaml")); err == nil {
				inv = []string{filepath.Join(dir, "inventory.yaml")}
			}
			res := diff.Plans(compileDir(t, filepath.Join(dir, "base"), inv...), compileDir(t, filepath.Join(dir, "head"), inv...))
			var text bytes.Buffer
			if err := res.WriteText(&text, false); err != nil {
				t.Fatal(err)
			}
			c.Check(t, "diff", text.String())
			// The reason the case is named after, in the JSON form.
			var js bytes.Buffer
			if err := res.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			var parsed struct {
				Changes []diff.Change `json:"changes"`
			}
			if err := json.Unmarshal(js.Bytes(), &parsed); err != nil {
				t.Fatal(err)
			}
			switch name {
			case "identical", "reordered":
				if res.HasChanges() || len(parsed.Changes) != 0 {
					t.Errorf("want no changes, got %d", len(parsed.Changes))
				}
			default:
				found := false
				for _, c := range parsed.Changes {
					for _, r := range c.Reasons {
						found = found || r == name || strings.HasPrefix(r, name+":")
					}
				}
				if !found {
					t.Errorf("no change gives the reason %s:\n%s", name, text.String())
				}
			}
		})
	}
}
