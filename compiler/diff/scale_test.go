package diff_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hnsplan/hnsplan/compiler/diff"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/internal/synth"
)

// vniChange writes an intent of size s twice: as is, and with another
// VNI, which replaces every network and rewrites every route.
func vniChange(t testing.TB, s synth.Size) (base, head string) {
	t.Helper()
	dir := t.TempDir()
	base, head = filepath.Join(dir, "base"), filepath.Join(dir, "head")
	for _, d := range []string{base, head} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := synth.Write(d, s); err != nil {
			t.Fatal(err)
		}
	}
	c, err := os.ReadFile(filepath.Join(head, "cluster.cue"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(head, "cluster.cue"), []byte(strings.Replace(string(c), "vni: 4096", "vni: 4097", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return base, head
}

// TestVNIChangeGroups: the diff of a 1,000-node VNI change (every network
// replaced, every route rewritten) is one change on 1,000 nodes, its
// routes one line, the cluster's VXLAN change said once with its window
// (1,000 waves at maxUnavailable 1), and its markdown far under the
// comment cap.
func TestVNIChangeGroups(t *testing.T) {
	base, head := vniChange(t, synth.Benchmark)
	res := diff.Plans(compileDir(t, base), compileDir(t, head))
	if s := res.Summarize(); s.NetworksReplaced != 1000 || s.NodesChanged != 1000 {
		t.Fatalf("summary %+v", s)
	}
	groups := res.Groups()
	if len(groups) != 1 || len(groups[0].Nodes) != 1000 {
		t.Fatalf("%d groups, want one of 1,000 nodes", len(groups))
	}
	md := res.Markdown()
	if len(md) > diff.MarkdownCap/4 {
		t.Errorf("markdown is %d characters, want a quarter of the cap (%d) at most", len(md), diff.MarkdownCap)
	}
	var text bytes.Buffer
	if err := res.WriteText(&text, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"**Plan: 1,000 nodes to change, 1,000 networks to replace. VXLAN VNI 4096 -> 4097: pods on nodes on different VNIs cannot reach each other across nodes for 1,000 waves of the Windows nodes' rollout, about 13h53m20s.**",
		"> [!CAUTION]",
		`FelixConfiguration "default" spec.vxlanVNI 4096 -> 4097`,
		"<details><summary>the same change on 1,000 nodes: <code>win-0000</code> … <code>win-0999</code>: -/+ network, ~ remoteSubnetRoutes</summary>",
		"drain of each of the 1,000 nodes",
		"~ VSID 4096 -> 4097 on every route both route tables hold",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	for _, want := range []string{"# the same change on 1,000 nodes: win-0000 … win-0999\n", "~ VSID 4096 -> 4097 on every route both route tables hold\n",
		"Windows nodes (hnsplan, 1,000): each drains and recreates its network, 1 at a time (maxUnavailable 1): 1,000 waves\n"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("markdown:\n%s\ntext:\n%s", md, text.String())
	}
}

// TestMarkdownCap: the markdown of a diff of thousands of different
// changes stays under the comment cap and says how many nodes it left
// out.
func TestMarkdownCap(t *testing.T) {
	res := &diff.Result{}
	const n = 3000
	for i := range n {
		res.Changes = append(res.Changes, diff.Change{Node: fmt.Sprintf("win-%04d", i), Kind: "hostEndpoint", Name: "Calico_ep", Action: diff.Update,
			Details: []diff.Detail{{Path: "IpConfigurations", Before: "10.240.0.1", After: fmt.Sprintf("10.240.%d.%d", i/250, i%250)}}})
	}
	md := res.Markdown()
	if len(md) > diff.MarkdownCap {
		t.Errorf("markdown is %d characters, over the cap of %d", len(md), diff.MarkdownCap)
	}
	shown := strings.Count(md, "<details>")
	var left int
	if _, err := fmt.Sscanf(strings.ReplaceAll(md[strings.LastIndex(md, "_… "):], ",", ""), "_… %d more nodes not shown", &left); err != nil {
		t.Fatalf("no truncation notice: %v\n%s", err, md[len(md)-300:])
	}
	if shown+left != n || shown < 100 {
		t.Errorf("%d nodes shown and %d left out, want %d in all", shown, left, n)
	}
	if !strings.HasSuffix(strings.TrimSpace(md), "for the whole diff._") {
		t.Errorf("markdown does not end with the truncation notice:\n%s", md[len(md)-300:])
	}
}

// BenchmarkDiff diffs two compilations of the 1,000-Windows-node intent
// (a VNI change: every network replaced, every route rewritten), both
// compiled in the same run; compile-ms is one of the two compilations.
func BenchmarkDiff(b *testing.B) { benchDiff(b, synth.Benchmark) }

// BenchmarkDiffScale is BenchmarkDiff at issue 16's size, 4,500 Windows
// and 500 Linux nodes. The issue asks a diff of two such compilations to
// take at most 2.5 times one compilation: x-compile is (both compiles,
// one after the other, and the diff with its markdown) / one compile.
func BenchmarkDiffScale(b *testing.B) { benchDiff(b, synth.Scale) }

func benchDiff(b *testing.B, s synth.Size) {
	base, head := vniChange(b, s)
	var bp, hp []*plan.NodePlan
	var compile, both, diffed float64
	for b.Loop() {
		b.StopTimer()
		t0 := testingNow()
		bp = compileDir(b, base)
		compile += sinceMS(t0)
		hp = compileDir(b, head)
		both += sinceMS(t0)
		b.StartTimer()
		t1 := testingNow()
		res := diff.Plans(bp, hp)
		if !res.HasChanges() {
			b.Fatal("no changes")
		}
		if len(res.Markdown()) > diff.MarkdownCap {
			b.Fatal("markdown over the cap")
		}
		diffed += sinceMS(t1)
	}
	n := float64(b.N)
	b.ReportMetric(compile/n, "compile-ms")
	b.ReportMetric(diffed/n, "diff-ms")
	b.ReportMetric((both+diffed)/compile, "x-compile")
}

func testingNow() time.Time       { return time.Now() }
func sinceMS(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

// BenchmarkGroups groups the changes of n nodes: all alike (one route
// change of MaxListDetails routes each way, shared as Plans shares it, and
// one network replace), and all different. Time per node stays flat from
// 1,000 to 4,500 nodes: grouping is linear.
func BenchmarkGroups(b *testing.B) {
	var routes []diff.Detail
	for i := range 2 * diff.MaxListDetails {
		routes = append(routes, diff.Detail{Path: "remoteSubnetRoutes", After: fmt.Sprintf("10.%d.%d.0/26 -> win-%04d (PA 172.20.0.1, VSID 4097, DR MAC live)", i/256, i%256, i)})
	}
	for _, n := range []int{1000, 4500} {
		for _, alike := range []bool{true, false} {
			res := &diff.Result{}
			for i := range n {
				node := fmt.Sprintf("win-%04d", i)
				vni := "4097"
				if !alike {
					vni = fmt.Sprint(5000 + i)
				}
				res.Changes = append(res.Changes,
					diff.Change{Node: node, Kind: "network", Name: "Calico", Action: diff.Replace, Reasons: []string{diff.ReasonVNI},
						Details: []diff.Detail{{Path: "VNI", Before: "4096", After: vni, ForcesReplacement: true}}},
					diff.Change{Node: node, Kind: "remoteSubnetRoutes", Name: "remoteSubnetRoutes", Action: diff.Update, Reasons: []string{diff.ReasonRoutes},
						Impact: []string{"100 to add, 0 to remove, in place"}, Details: routes})
			}
			want := 1
			if !alike {
				want = n
			}
			b.Run(fmt.Sprintf("nodes=%d/alike=%v", n, alike), func(b *testing.B) {
				for b.Loop() {
					if g := res.Groups(); len(g) != want {
						b.Fatalf("%d groups, want %d", len(g), want)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/node")
			})
		}
	}
}
