package compiler_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// planOf is a plan file of node as compile writes it.
func planOf(t *testing.T, node string) []byte {
	t.Helper()
	data, err := plan.Encode(&plan.NodePlan{FormatVersion: plan.FormatVersion, Kind: plan.Kind, Node: node})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func index(entries ...plan.IndexEntry) string {
	data, _ := json.Marshal(plan.Index{Kind: plan.IndexKind, Plans: entries})
	return string(data)
}

func entry(node, file string) plan.IndexEntry { return plan.IndexEntry{Node: node, File: file} }

// TestStalePlans: which files of a previous index a compile removes. Only
// entries that name a plan file as compile writes them ("<node>.json",
// directly in the directory) and whose file holds that node's plan count;
// an index that is missing or not a plan index removes nothing. A stale
// or crafted index must never make compile remove README.md, go.mod or
// "..".
func TestStalePlans(t *testing.T) {
	head := []*plan.NodePlan{{Node: "win-1"}}
	for _, tt := range []struct {
		name      string
		index     string // "" for none
		indexFile string // plan.IndexFile unless set
		files     map[string]string
		existing  int
		stale     []string
		legacy    bool
	}{
		{name: "no index"},
		{name: "not JSON", index: "{"},
		{name: "not an index", index: `{"kind":"NodePlan","plans":[{"node":"win-2","file":"win-2.json"}]}`, files: map[string]string{"win-2.json": "plan:win-2"}},
		{name: "kept", index: index(entry("win-1", "win-1.json")), files: map[string]string{"win-1.json": "plan:win-1"}, existing: 1},
		{name: "gone", index: index(entry("win-1", "win-1.json"), entry("win-2", "win-2.json"), entry("win-3", "win-3.json")),
			files: map[string]string{"win-1.json": "plan:win-1", "win-2.json": "plan:win-2", "win-3.json": "plan:win-3"}, existing: 3, stale: []string{"win-2.json", "win-3.json"}},
		{name: "gone already", index: index(entry("win-2", "win-2.json")), existing: 1},
		{name: "outside the directory", index: index(entry("x", "../x.json"), entry("y", "sub/y.json"), entry("..", ".."), entry("z", "/etc/z.json")), existing: 4},
		{name: "not a plan file name", index: index(entry("README", "README.md"), entry("go", "go.mod"), entry("a", "b.json"), entry("Win", "Win.json")),
			files: map[string]string{"README.md": "x", "go.mod": "x", "b.json": "plan:a", "Win.json": "plan:Win"}, existing: 4},
		{name: "not that node's plan", index: index(entry("win-2", "win-2.json"), entry("win-3", "win-3.json")),
			files: map[string]string{"win-2.json": `{"name": "my own file"}`, "win-3.json": "plan:win-9"}, existing: 2},
		{name: "symlink", index: index(entry("win-2", "win-2.json")), files: map[string]string{"win-2.json": "symlink:elsewhere.json", "elsewhere.json": "plan:win-2"}, existing: 1},
		{name: "legacy index", indexFile: plan.LegacyIndexFile, index: index(entry("win-1", "win-1.json"), entry("win-2", "win-2.json")),
			files: map[string]string{"win-2.json": "plan:win-2"}, existing: 2, stale: []string{"win-2.json"}, legacy: true},
		{name: "index.json is a node's plan", indexFile: plan.LegacyIndexFile, index: string(planOf(t, "index"))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.index != "" {
				if err := os.WriteFile(filepath.Join(dir, cmpOr(tt.indexFile, plan.IndexFile)), []byte(tt.index), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for name, content := range tt.files {
				var err error
				if target, ok := strings.CutPrefix(content, "symlink:"); ok {
					err = os.Symlink(target, filepath.Join(dir, name))
				} else {
					data := []byte(content)
					if node, ok := strings.CutPrefix(content, "plan:"); ok {
						data = planOf(t, node)
					}
					err = os.WriteFile(filepath.Join(dir, name), data, 0o644)
				}
				if err != nil {
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
			if r.Existing != tt.existing || !slices.Equal(stale, tt.stale) || r.Legacy != tt.legacy {
				t.Errorf("got %d existing, stale %v, legacy %v; want %d, %v, %v", r.Existing, stale, r.Legacy, tt.existing, tt.stale, tt.legacy)
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func nodePlans(nodes ...string) []*plan.NodePlan {
	var ps []*plan.NodePlan
	for _, n := range nodes {
		ps = append(ps, &plan.NodePlan{FormatVersion: plan.FormatVersion, Kind: plan.Kind, Node: n})
	}
	return ps
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestWritePlansAllOrNothing: a node name that cannot be a plan file
// fails before anything is written; temporary files a killed compile left
// are removed, and only those; a node named "index" keeps its plan.
func TestWritePlansAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("a", plan.MaxNodeNameLen+1)
	if _, err := compiler.WritePlans(dir, "c", nodePlans("win-1", long), nil); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Fatalf("WritePlans with a %d-character node name: %v", len(long), err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Fatalf("a failed compile left %v", names)
	}
	// Leftovers of a killed compile, and files that only look like them.
	for _, name := range []string{".hnsplan-123456.tmp", ".hnsplan-9.tmp", ".hnsplan-x1.tmp", "hnsplan-1.tmp", ".hnsplan-.tmp", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := compiler.WritePlans(dir, "c", nodePlans("index", "win-1", long[:plan.MaxNodeNameLen]), nil); err != nil {
		t.Fatal(err)
	}
	want := []string{".hnsplan-.tmp", ".hnsplan-x1.tmp", plan.IndexFile, long[:plan.MaxNodeNameLen] + ".json", "hnsplan-1.tmp", "index.json", "notes.txt", "win-1.json"}
	if got := dirNames(t, dir); !slices.Equal(got, want) {
		t.Errorf("directory holds %v\nwant %v", got, want)
	}
	files, plans, ok, err := compiler.ReadPlanDir(dir)
	if err != nil || !ok || len(files) != 3 || plans[0].Node != "index" {
		t.Errorf("ReadPlanDir: %d files, ok %v, %v", len(files), ok, err)
	}
}

// TestReadPlanDir: an index never leads a reader out of its directory,
// to a symlink, or to more than plan.MaxSize bytes.
func TestReadPlanDir(t *testing.T) {
	for _, tt := range []struct {
		name  string
		index string
		setup func(dir string) error
		err   string // "" for success
	}{
		{name: "plain", index: index(entry("win-1", "win-1.json"))},
		{name: "parent", index: index(entry("win-1", "../win-1.json")), err: `names "../win-1.json", which is not a plan file`},
		{name: "absolute", index: index(entry("win-1", "/etc/passwd")), err: `names "/etc/passwd"`},
		{name: "dot-dot node", index: index(entry("..", "...json")), err: "not a plan file"},
		{name: "twice", index: index(entry("win-1", "win-1.json"), entry("win-1", "win-1.json")), err: "listed twice"},
		{name: "symlink", index: index(entry("win-2", "win-2.json")), setup: func(dir string) error {
			return os.Symlink(filepath.Join(dir, "win-1.json"), filepath.Join(dir, "win-2.json"))
		}, err: "not a regular file"},
		{name: "fifo-like directory", index: index(entry("win-2", "win-2.json")), setup: func(dir string) error {
			return os.Mkdir(filepath.Join(dir, "win-2.json"), 0o755)
		}, err: "not a regular file"},
		{name: "index not an index", index: `{"kind":"x"}`, err: "is not a plan index"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "win-1.json"), planOf(t, "win-1"), 0o644)
			os.WriteFile(filepath.Join(dir, plan.IndexFile), []byte(tt.index), 0o644)
			if tt.setup != nil {
				if err := tt.setup(dir); err != nil {
					t.Fatal(err)
				}
			}
			_, _, ok, err := compiler.ReadPlanDir(dir)
			switch {
			case !ok:
				t.Errorf("not a plan directory")
			case tt.err == "" && err != nil:
				t.Errorf("error %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("error %v, want one with %q", err, tt.err)
			}
		})
	}
}
