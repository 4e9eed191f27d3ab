// Package examples_test vets every bundled example, so none can rot.
package examples_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
)

func TestExamplesVet(t *testing.T) {
	dirs, err := filepath.Glob("*/*.cue")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := intent.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	load := map[string]bool{}
	for _, r := range rules {
		load[r.ID] = r.Phase == "load"
	}
	seen := map[string]bool{}
	for _, f := range dirs {
		seen[filepath.Dir(f)] = true
	}
	for _, want := range []string{"calico-vxlan", "calico-bgp", "flannel-host-gw", "aks-azure-cni", "eks-vpc-cni", "flannel-vxlan"} {
		if !seen[want] {
			t.Errorf("example %s is missing", want)
		}
	}
	for dir := range seen {
		t.Run(dir, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
				t.Errorf("example has no README.md: %v", err)
			}
			res, findings, err := compiler.Build(dir, compiler.Options{})
			if err != nil {
				t.Fatal(err)
			}
			// Every example reads cleanly and compiles; the warnings and
			// infos of the rules are what the examples show.
			for _, f := range findings {
				if f.Severity == diag.Error || load[f.Rule] {
					t.Errorf("%s", f)
				}
			}
			if !res.Compiled() || len(res.Plans) == 0 {
				t.Fatalf("example compiled to no plan")
			}
			in := res.Intent
			if in.Cluster == nil || len(in.Cluster.Nodes) == 0 || len(in.Cluster.Pools) == 0 && !in.Cluster.PolicyOnly() {
				t.Fatalf("example loaded no cluster, nodes or pools (only a cluster whose CNI owns the Windows network has none)")
			}
			var win, linux int
			for _, n := range in.Cluster.Nodes {
				if n.IsWindows() {
					win++
				} else {
					linux++
				}
			}
			if win == 0 || linux == 0 {
				t.Errorf("example has %d Windows and %d Linux nodes; every example is a hybrid cluster", win, linux)
			}
			if in.Manifests.Len() == 0 {
				t.Errorf("example has no manifests")
			}
		})
	}
}
