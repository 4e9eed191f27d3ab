package compiler_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/internal/synth"
)

// TestAddOneNode is issue 16's figure as a check, at a size a unit test
// affords (300 nodes, every Linux node with a block): compiling again into
// the same directory after one Windows node joins writes the new node's
// plan and changes at most 3 existing files — its route shard, the route
// table's head and the index — and leaves every other file as it was, not
// even rewritten (same inode). No plan changes: a plan names its route
// table by key. Every file written is at most 256 KiB (plan.MaxPartSize).
func TestAddOneNode(t *testing.T) {
	size := synth.Size{Windows: 270, Linux: 30, Pools: 200}
	intentDir, out := t.TempDir(), t.TempDir()
	compileInto := func(s synth.Size) *compiler.Result {
		t.Helper()
		if err := synth.Write(intentDir, s); err != nil {
			t.Fatal(err)
		}
		res, findings, err := compiler.Build(intentDir, compiler.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if findings.HasErrors() || !res.Compiled() {
			t.Fatalf("%d+%d nodes: %v", s.Windows, s.Linux, findings)
		}
		if _, err := compiler.WritePlans(out, res.Intent.Cluster.Name, res.Plans, nil); err != nil {
			t.Fatal(err)
		}
		return res
	}
	type file struct {
		data []byte
		info os.FileInfo
	}
	snapshot := func() map[string]file {
		t.Helper()
		entries, err := os.ReadDir(out)
		if err != nil {
			t.Fatal(err)
		}
		files := map[string]file{}
		for _, e := range entries {
			path := filepath.Join(out, e.Name())
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(data) > plan.MaxPartSize {
				t.Errorf("%s is %d bytes, more than %d", e.Name(), len(data), plan.MaxPartSize)
			}
			files[e.Name()] = file{data, info}
		}
		return files
	}

	res := compileInto(size)
	if len(res.Plans) != size.Windows || res.Plans[0].Routes == nil || len(res.Plans[0].Routes.Nodes) != size.Nodes() {
		t.Fatalf("want %d plans routing to %d nodes", size.Windows, size.Nodes())
	}
	table := res.Plans[0].Routes.Name
	before := snapshot()

	size.Windows++
	res = compileInto(size)
	joined := res.Plans[len(res.Plans)-1].Node // synth names nodes in order
	after := snapshot()

	newPlan := plan.FileName(joined)
	shard := plan.PartFileName(plan.ShardName(table, plan.ShardOf(joined)))
	may := []string{shard, plan.PartFileName(table), plan.IndexFile}
	var changed []string
	for name, a := range after {
		b, ok := before[name]
		switch {
		case !ok && name != newPlan && name != shard:
			t.Errorf("new file %s: only the new plan %s (and its shard %s, if it was empty) may be new", name, newPlan, shard)
		case !ok:
		case !bytes.Equal(a.data, b.data):
			changed = append(changed, name)
			if !slices.Contains(may, name) {
				t.Errorf("%s changed: only %v may", name, may)
			}
		case !os.SameFile(a.info, b.info):
			t.Errorf("%s holds the same bytes but was rewritten", name)
		}
	}
	if _, ok := after[newPlan]; !ok {
		t.Errorf("no plan %s for the node that joined", newPlan)
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			t.Errorf("%s was removed", name)
		}
	}
	if len(changed) > 3 {
		t.Errorf("%d existing files changed, want at most 3: %v", len(changed), changed)
	}
	slices.Sort(changed)
	t.Logf("node %s joined: %s written, %v changed", joined, newPlan, changed)
}
