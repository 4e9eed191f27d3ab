package compiler_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// TestStalePlans: which files of a previous index a compile removes. Only
// entries naming a file directly in the directory count; an index that is
// missing or not a plan index removes nothing.
func TestStalePlans(t *testing.T) {
	head := []*plan.NodePlan{{Node: "win-1"}}
	for _, tt := range []struct {
		name     string
		index    string // "" for none
		existing int
		stale    []string
	}{
		{"no index", "", 0, nil},
		{"not JSON", "{", 0, nil},
		{"not an index", `{"kind":"NodePlan","plans":[{"node":"win-2","file":"win-2.json"}]}`, 0, nil},
		{"kept", `{"kind":"` + plan.IndexKind + `","plans":[{"node":"win-1","file":"win-1.json"}]}`, 1, nil},
		{"gone", `{"kind":"` + plan.IndexKind + `","plans":[{"node":"win-1","file":"win-1.json"},{"node":"win-2","file":"win-2.json"},{"node":"win-3","file":"win-3.json"}]}`, 3, []string{"win-2.json", "win-3.json"}},
		{"outside the directory", `{"kind":"` + plan.IndexKind + `","plans":[{"node":"x","file":"../x.json"},{"node":"y","file":"sub/y.json"}]}`, 2, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.index != "" {
				if err := os.WriteFile(filepath.Join(dir, plan.IndexFile), []byte(tt.index), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r, err := compiler.StalePlans(dir, head)
			if err != nil {
				t.Fatal(err)
			}
			var stale []string
			for _, e := range r.Stale {
				stale = append(stale, e.File)
			}
			if r.Existing != tt.existing || !slices.Equal(stale, tt.stale) {
				t.Errorf("got %d existing, stale %v; want %d, %v", r.Existing, stale, tt.existing, tt.stale)
			}
		})
	}
}
