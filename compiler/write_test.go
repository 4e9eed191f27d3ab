package compiler_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/intent"
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

// index writes a format-1 index, whose entries name their files: a
// crafted one can name any path, which readers must refuse.
func index(entries ...plan.IndexEntry) string {
	type v1 struct {
		Node   string `json:"node"`
		File   string `json:"file"`
		Digest string `json:"digest"`
	}
	list := make([]v1, len(entries))
	for i, e := range entries {
		list[i] = v1{e.Node, e.File, e.Digest}
	}
	data, _ := json.Marshal(map[string]any{"kind": plan.IndexKind, "plans": list})
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

// sharedPlans are plans of nodes that share a route table and a policy
// program, as the compiler makes them.
func sharedPlans(nodes ...string) []*plan.NodePlan {
	var routes []plan.RemoteSubnetRoute
	for i, n := range nodes {
		routes = append(routes, plan.RemoteSubnetRoute{DestinationPrefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 168, byte(i), 0}), 24),
			IsolationId: 4096, ProviderAddress: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), Node: n})
	}
	table := plan.RemoteSubnetTable("c", routes)
	prog := &plan.Program{Tiers: []plan.Tier{{Name: "default", DefaultAction: "Deny", Policies: []plan.NetworkPolicy{{ID: "knp.default.deny", Selector: "all()", Ingress: true}}}}}
	ps := nodePlans(nodes...)
	for _, p := range ps {
		p.Cluster = "c"
		p.SetRoutes(table)
		p.Program = prog
	}
	return ps
}

// TestWritePlansParts: the parts are written before the plans that name
// them (a reader watching the directory never finds a plan without its
// parts), listed in the index, and read back by ReadPlanDir, which
// assembles the plans; parts no plan names any more are removed.
func TestWritePlansParts(t *testing.T) {
	dir := t.TempDir()
	plans := sharedPlans("win-1", "win-2", "win-3")
	if _, err := compiler.WritePlans(dir, "c", plans, nil); err != nil {
		t.Fatal(err)
	}
	var idx plan.Index
	data, err := os.ReadFile(filepath.Join(dir, plan.IndexFile))
	if err != nil || json.Unmarshal(data, &idx) != nil {
		t.Fatalf("index: %v", err)
	}
	if err := intent.ValidatePlanIndex(data); err != nil {
		t.Errorf("the index does not fit #PlanIndex: %v", err)
	}
	kinds := map[string]int{}
	for _, e := range idx.Parts {
		kinds[e.Kind]++
		st, err := os.Stat(filepath.Join(dir, e.File))
		if err != nil || !e.IsPartFile() {
			t.Errorf("index part %+v: %v", e, err)
			continue
		}
		// Written before every plan: its modification time is no later.
		for _, p := range plans {
			pst, err := os.Stat(filepath.Join(dir, plan.FileName(p.Node)))
			if err != nil {
				t.Fatal(err)
			}
			if st.ModTime().After(pst.ModTime()) {
				t.Errorf("part %s written after plan %s", e.Name, p.Node)
			}
		}
		part, err := os.ReadFile(filepath.Join(dir, e.File))
		if err != nil {
			t.Fatal(err)
		}
		if err := intent.ValidatePart(part); err != nil {
			t.Errorf("%s does not fit #%s: %v", e.File, e.Kind, err)
		}
	}
	if kinds[plan.KindRouteTable] != 1 || kinds[plan.KindProgramChunk] != 1 || kinds[plan.KindRouteShard] == 0 {
		t.Errorf("index lists parts %v", kinds)
	}
	files, read, ok, err := compiler.ReadPlanDir(dir)
	if err != nil || !ok || len(read) != 3 {
		t.Fatalf("ReadPlanDir: %d plans, %v, %v", len(read), ok, err)
	}
	for i, f := range files {
		if f.IsPlan() != (i >= len(idx.Parts)) {
			t.Errorf("file %d (%s): ReadPlanDir returns the parts first", i, f.Name)
		}
	}
	for _, p := range read {
		if p.Routes == nil || p.Program == nil || len(p.RemoteSubnetRoutes()) != 2 {
			t.Errorf("%s: not assembled: %d routes", p.Node, len(p.RemoteSubnetRoutes()))
		}
		if p.Routes != read[0].Routes || p.Program != read[0].Program {
			t.Errorf("%s: assembled parts not shared", p.Node)
		}
	}

	// The cluster changes its VNI: a new route table (another key, another
	// name); the old one's head and shards go, the program stays.
	next := sharedPlans("win-1", "win-2", "win-3")
	table := *next[0].Routes
	table.Key = plan.RouteKey("c", "calico-vxlan", plan.RoutesRemoteSubnet, 4097, 4789, nil)
	table = *plan.NewRouteTable("c", table.Key, table.Type, 4097, table.Nodes)
	for _, p := range next {
		p.SetRoutes(&table)
	}
	removed, err := compiler.WritePlans(dir, "c", next, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wantRemoved []string
	for _, e := range idx.Parts {
		if e.Kind != plan.KindProgramChunk {
			wantRemoved = append(wantRemoved, e.File)
		}
		if _, err := os.Stat(filepath.Join(dir, e.File)); (err == nil) != (e.Kind == plan.KindProgramChunk) {
			t.Errorf("%s: %v after the route table changed", e.File, err)
		}
	}
	slices.Sort(removed)
	slices.Sort(wantRemoved)
	if !slices.Equal(removed, wantRemoved) {
		t.Errorf("removed %v, want %v", removed, wantRemoved)
	}
	if _, read, _, err := compiler.ReadPlanDir(dir); err != nil || read[0].Routes.IsolationId != 4097 {
		t.Errorf("ReadPlanDir after the change: %v", err)
	}
}

// TestWritePlansStaleParts: compile removes a part of the previous index
// only when the entry names a part file as compile writes them and the
// file holds that part; a crafted index cannot make it remove anything
// else, nor a file outside the directory.
func TestWritePlansStaleParts(t *testing.T) {
	const stale = "routes-0123456789ab"
	partOf := func(kind, name string) string {
		return fmt.Sprintf(`{"formatVersion":"2","kind":%q,"name":%q,"digest":"sha256:00"}`, kind, name)
	}
	for _, tt := range []struct {
		name    string
		entry   plan.IndexPart
		files   map[string]string // in the directory; "../" in the parent
		removed []string
	}{
		{"stale part", plan.IndexPart{Name: stale, Kind: plan.KindRouteTable, File: plan.PartFileName(stale)},
			map[string]string{plan.PartFileName(stale): partOf(plan.KindRouteTable, stale)}, []string{plan.PartFileName(stale)}},
		{"stale part with its signature", plan.IndexPart{Name: stale, Kind: plan.KindRouteTable, File: plan.PartFileName(stale)},
			map[string]string{plan.PartFileName(stale): partOf(plan.KindRouteTable, stale), plan.SignatureFile(plan.PartFileName(stale)): "sig"}, []string{plan.PartFileName(stale)}},
		{"file holds another part", plan.IndexPart{Name: stale, Kind: plan.KindRouteTable, File: plan.PartFileName(stale)},
			map[string]string{plan.PartFileName(stale): partOf(plan.KindRouteTable, "routes-ffffffffffff")}, nil},
		{"file holds a plan", plan.IndexPart{Name: stale, Kind: plan.KindRouteTable, File: plan.PartFileName(stale)},
			map[string]string{plan.PartFileName(stale): "plan:win-9"}, nil},
		{"file is not JSON", plan.IndexPart{Name: stale, Kind: plan.KindRouteTable, File: plan.PartFileName(stale)},
			map[string]string{plan.PartFileName(stale): "notes"}, nil},
		{"a plan file", plan.IndexPart{Name: stale, Kind: plan.KindRouteTable, File: "win-9.json"},
			map[string]string{"win-9.json": partOf(plan.KindRouteTable, stale)}, nil},
		{"outside the directory", plan.IndexPart{Name: stale, Kind: plan.KindRouteTable, File: "../" + plan.PartFileName(stale)},
			map[string]string{"../" + plan.PartFileName(stale): partOf(plan.KindRouteTable, stale)}, nil},
		{"a name compile does not give", plan.IndexPart{Name: "README", Kind: plan.KindRouteTable, File: "_README.json"},
			map[string]string{"_README.json": partOf(plan.KindRouteTable, "README")}, nil},
		{"path as the name", plan.IndexPart{Name: "../" + stale, Kind: plan.KindRouteTable, File: "_../" + stale + ".json"}, nil, nil},
		{"symlink", plan.IndexPart{Name: stale, Kind: plan.KindRouteTable, File: plan.PartFileName(stale)},
			map[string]string{plan.PartFileName(stale): "symlink:elsewhere.json", "elsewhere.json": partOf(plan.KindRouteTable, stale)}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "plans")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			idx, _ := json.Marshal(plan.Index{Kind: plan.IndexKind, Parts: []plan.IndexPart{tt.entry}})
			files := map[string]string{plan.IndexFile: string(idx)}
			maps.Copy(files, tt.files)
			for name, content := range files {
				p := filepath.Join(dir, name)
				var err error
				if target, ok := strings.CutPrefix(content, "symlink:"); ok {
					err = os.Symlink(target, p)
				} else {
					data := []byte(content)
					if node, ok := strings.CutPrefix(content, "plan:"); ok {
						data = planOf(t, node)
					}
					err = os.WriteFile(p, data, 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			removed, err := compiler.WritePlans(dir, "c", sharedPlans("win-1"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(removed, tt.removed) {
				t.Errorf("removed %v, want %v", removed, tt.removed)
			}
			for name := range files {
				_, err := os.Lstat(filepath.Join(dir, name))
				gone := errors.Is(err, fs.ErrNotExist)
				wantGone := slices.Contains(tt.removed, name) || (len(tt.removed) > 0 && name == plan.SignatureFile(tt.removed[0]))
				if name != plan.IndexFile && gone != wantGone {
					t.Errorf("%s: gone %v, want %v", name, gone, wantGone)
				}
			}
		})
	}
}

// TestReadPlanDirParts: the index's part entries never lead a reader out
// of its directory, to a symlink, to a part of another kind or name, and
// a plan whose parts are not all there is an error naming the part.
func TestReadPlanDirParts(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(dir string, idx *plan.Index) error
		err    string
	}{
		{"good", func(string, *plan.Index) error { return nil }, ""},
		{"path", func(_ string, idx *plan.Index) error {
			idx.Parts[0].File = "../" + idx.Parts[0].File
			return nil
		}, "which is not a part file of this directory"},
		{"not a part name", func(_ string, idx *plan.Index) error {
			idx.Parts[0].Name, idx.Parts[0].File = "win-1", "_win-1.json"
			return nil
		}, "which is not a part file of this directory"},
		{"symlink", func(dir string, idx *plan.Index) error {
			f := filepath.Join(dir, idx.Parts[0].File)
			if err := os.Rename(f, f+".real"); err != nil {
				return err
			}
			return os.Symlink(f+".real", f)
		}, "not a regular file"},
		{"wrong kind", func(_ string, idx *plan.Index) error {
			for i := range idx.Parts {
				if idx.Parts[i].Kind == plan.KindRouteShard {
					idx.Parts[i].Kind = plan.KindProgramChunk
					return nil
				}
			}
			return errors.New("no shard")
		}, `kind is "RouteShard", not ProgramChunk`},
		{"unknown kind", func(_ string, idx *plan.Index) error {
			idx.Parts[0].Kind = "Secret"
			return nil
		}, `unknown part kind "Secret"`},
		{"listed twice", func(_ string, idx *plan.Index) error {
			idx.Parts = append(idx.Parts, idx.Parts[0])
			return nil
		}, "is listed twice"},
		{"not listed", func(_ string, idx *plan.Index) error {
			for i := range idx.Parts {
				if idx.Parts[i].Kind == plan.KindProgramChunk {
					idx.Parts = slices.Delete(idx.Parts, i, i+1)
					return nil
				}
			}
			return errors.New("no chunk")
		}, "names part program-"},
		{"tampered", func(dir string, idx *plan.Index) error {
			f := filepath.Join(dir, idx.Parts[0].File)
			data, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			return os.WriteFile(f, bytes.Replace(data, []byte(`"cluster": "c"`), []byte(`"cluster": "d"`), 1), 0o644)
		}, "digest does not match"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := compiler.WritePlans(dir, "c", sharedPlans("win-1", "win-2"), nil); err != nil {
				t.Fatal(err)
			}
			var idx plan.Index
			data, _ := os.ReadFile(filepath.Join(dir, plan.IndexFile))
			if err := json.Unmarshal(data, &idx); err != nil {
				t.Fatal(err)
			}
			if err := tt.mutate(dir, &idx); err != nil {
				t.Fatal(err)
			}
			data, _ = json.Marshal(idx)
			if err := os.WriteFile(filepath.Join(dir, plan.IndexFile), data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, plans, ok, err := compiler.ReadPlanDir(dir)
			switch {
			case !ok:
				t.Errorf("not a plan directory")
			case tt.err == "" && (err != nil || len(plans) != 2 || plans[0].Routes == nil):
				t.Errorf("ReadPlanDir: %d plans, %v", len(plans), err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("error %v, want one with %q", err, tt.err)
			case tt.err != "" && plans != nil:
				t.Errorf("plans returned with the error")
			}
		})
	}
}

// TestOneErrorPerCause: when every plan file fails with the same system
// error (a full disk, a read-only file system, no permission), WritePlans
// says it once, with how many files failed and what to do, not one line
// per file; an error of another cause is still said on its own.
func TestOneErrorPerCause(t *testing.T) {
	var plans []*plan.NodePlan
	for i := range 40 {
		plans = append(plans, &plan.NodePlan{FormatVersion: plan.FormatVersion, Kind: plan.Kind, Node: fmt.Sprintf("win-%02d", i)})
	}
	for _, tc := range []struct {
		name  string
		cause error
		hint  string
	}{
		{"full disk", syscall.ENOSPC, "the disk (or your quota) is full"},
		{"read-only", syscall.EROFS, "the file system is read-only"},
		{"permission", syscall.EACCES, "you may not write there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var mu sync.Mutex
			calls := 0
			defer compiler.SetCreateTemp(func(dir, pattern string) (*os.File, error) {
				mu.Lock()
				defer mu.Unlock()
				calls++
				if calls == 7 { // one file fails otherwise
					return nil, &fs.PathError{Op: "open", Path: filepath.Join(dir, "odd"), Err: syscall.EISDIR}
				}
				return nil, &fs.PathError{Op: "open", Path: filepath.Join(dir, pattern), Err: tc.cause}
			})()
			_, err := compiler.WritePlans(dir, "demo", plans, nil)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, tc.cause) || !errors.Is(err, syscall.EISDIR) {
				t.Errorf("error %q does not wrap %v and EISDIR", err, tc.cause)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != 2 {
				t.Fatalf("%d lines, want 2 (one per cause):\n%s", len(lines), err)
			}
			if want := "39 files could not be written: " + tc.cause.Error(); !strings.Contains(lines[0], want) || !strings.Contains(lines[0], tc.hint) {
				t.Errorf("first line %q: want %q and %q", lines[0], want, tc.hint)
			}
			if !strings.Contains(err.Error(), "is a directory") {
				t.Errorf("the other cause is lost: %s", err)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("files left behind: %v", entries)
			}
		})
	}
}
