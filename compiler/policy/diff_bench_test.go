package policy_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/access"
	"github.com/hnsplan/hnsplan/compiler/diff"
	synthload "github.com/hnsplan/hnsplan/internal/synth/workload"
)

// BenchmarkDiffAccess is `hnsplan diff BASE HEAD --inventory` on the
// policy benchmark's cluster (bigWorkload: 2,000 policies, 30,000 pods in
// 300 namespaces, 110 a node; node 0's pods on the Windows node win-0000,
// every other node Linux) written as intents, HEAD with one policy's port
// changed. An op builds both sides as the CLI does, diffs the
// plans and renders the markdown comment; "access" adds the access delta
// (both access models and access.Diff). The figure: access ≤ 2×
// plain, and ≤ 3 s.
func BenchmarkDiffAccess(b *testing.B) {
	dir := b.TempDir()
	w := generateWorkload(bigWorkload)
	inv := filepath.Join(dir, "inventory.yaml")
	writeWorkloadIntent(b, w, filepath.Join(dir, "base"), inv)
	changed := changeOnePort(b, w)
	writeWorkloadIntent(b, w, filepath.Join(dir, "head"), inv)
	b.Logf("HEAD changes the port of %s", changed)
	for _, withAccess := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "access"}[withAccess]
		b.Run(name, func(b *testing.B) {
			var res *diff.Result
			var compile, delta time.Duration
			for b.Loop() {
				var c, d time.Duration
				res, c, d = diffIntents(b, filepath.Join(dir, "base"), filepath.Join(dir, "head"), inv, withAccess)
				compile, delta = compile+c, delta+d
			}
			b.ReportMetric(float64(compile.Milliseconds())/float64(b.N), "load+compile-ms")
			if withAccess {
				if res.Access == nil {
					b.Fatal("no access delta")
				}
				b.ReportMetric(float64(delta.Milliseconds())/float64(b.N), "access-ms")
				b.ReportMetric(float64(len(res.Access.Changes)), "access-changes")
				b.ReportMetric(float64(res.Access.Endpoints), "endpoints-evaluated")
			}
		})
	}
}

// diffIntents is what `hnsplan diff` does with two intent directories:
// compiler.BuildEach builds both sides (the inventory read once, the two
// compiles at once), diff.PlansWith compares the plans, and the access
// delta compares the two access models. It returns the time spent
// building both sides, and in the access delta (both models and
// access.Diff).
func diffIntents(tb testing.TB, base, head, inv string, withAccess bool) (*diff.Result, time.Duration, time.Duration) {
	t0 := time.Now()
	built := compiler.BuildEach([]string{base, head}, compiler.Options{Inventory: []string{inv}})
	t1 := time.Now()
	for i, b := range built {
		if b.Err != nil {
			tb.Fatal(b.Err)
		}
		if b.Findings.HasErrors() || !b.Result.Compiled() {
			msg := b.Findings.Summary()
			for i, f := range b.Findings {
				if i == 5 {
					break
				}
				msg += "\n" + f.String()
			}
			tb.Fatalf("%s: %s", []string{base, head}[i], msg)
		}
	}
	bs, hs := built[0].Result, built[1].Result
	res := diff.PlansWith(bs.Plans, hs.Plans, diff.Options{BaseDir: base, HeadDir: head})
	t2 := time.Now()
	var delta time.Duration
	if withAccess {
		bm, err := access.NewModel(bs.Intent, bs.Plans, bs.Program, base)
		if err != nil {
			tb.Fatal(err)
		}
		hm, err := access.NewModel(hs.Intent, hs.Plans, hs.Program, head)
		if err != nil {
			tb.Fatal(err)
		}
		if res.Access, err = access.Diff(bm, hm); err != nil {
			tb.Fatal(err)
		}
		delta = time.Since(t2)
	}
	_ = res.Markdown()
	return res, t1.Sub(t0), delta
}

// changeOnePort moves the first numeric port of the first Kubernetes
// policy that has one to the next port, and names the policy.
func changeOnePort(tb testing.TB, w *workload) string {
	for i := range w.manifests.NetworkPolicies {
		np := &w.manifests.NetworkPolicies[i]
		if !strings.HasPrefix(np.Name, "allow-app-") {
			continue
		}
		for j := range np.Spec.Ingress {
			for k := range np.Spec.Ingress[j].Ports {
				p := np.Spec.Ingress[j].Ports[k].Port
				if p != nil && p.Type == intstr.Int {
					np.Spec.Ingress[j].Ports[k].Port = ptr(intstr.FromInt32(p.IntVal + 1))
					return fmt.Sprintf("%s/%s (ingress[%d].ports[%d]: %d -> %d)", np.Namespace, np.Name, j, k, p.IntVal, p.IntVal+1)
				}
			}
		}
	}
	tb.Fatal("no policy with a numeric ingress port")
	return ""
}

// writeWorkloadIntent writes w as an intent directory dir and its
// inventory inv (synthload.WriteIntent), with w's policies as the test has
// them now.
func writeWorkloadIntent(tb testing.TB, w *workload, dir, inv string) {
	tb.Helper()
	w.g.Manifests = w.manifests
	if err := synthload.WriteIntent(w.g, dir, inv); err != nil {
		tb.Fatal(err)
	}
}
