package compiler_test

import (
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
)

// corpusCluster is the cluster every corpus file is vetted in: Calico
// VXLAN, one Linux and two Windows nodes.
const corpusCluster = `package cluster

cluster: {
	name:       "corpus"
	datastore:  "kubernetes"
	networking: "calico-vxlan"
	serviceCIDRs: ["10.96.0.0/12"]
	ipam: strictAffinity: true
	vxlan: vni: 4096
	pools: default: cidr: "192.168.0.0/16"
	nodes: {
		"lin-1": {os: "linux", address: "10.240.0.10/24"}
		"win-1": {os: "windows", address: "10.240.0.21/24", maxPods: 60, windows: build: "10.0.17763.1432"}
		"win-2": {os: "windows", address: "10.240.0.22/24", maxPods: 60, windows: build: "10.0.20348.2582"}
	}
}
`

// TestCorpus vets each file of testdata/corpus (real policies and Calico
// resources other projects publish, see its README) in one cluster and
// holds the verdicts to testdata/corpus-verdicts.txtar: a file that loads
// lists its infos' rules, a refused one each error with its position and
// message. A change in what real users' files do — a policy newly refused,
// or newly accepted — shows here as a diff to review; HNSPLAN_UPDATE=1
// rewrites the golden.
func TestCorpus(t *testing.T) {
	const golden = "testdata/corpus-verdicts.txtar"
	files, err := filepath.Glob("../testdata/corpus/*/*.yaml")
	if err != nil || len(files) < 150 {
		t.Fatalf("corpus: %d files (%v); want the whole of testdata/corpus", len(files), err)
	}
	slices.Sort(files)
	var b strings.Builder
	loaded := 0
	for _, file := range files {
		name := strings.TrimPrefix(filepath.ToSlash(file), "../testdata/corpus/")
		dir := t.TempDir()
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cluster.cue"), []byte(corpusCluster), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, findings, err := compiler.Build(dir, compiler.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var errs []string
		infos := map[string]int{}
		for _, f := range findings.RelativeTo(dir) {
			if strings.TrimSpace(f.Message) == "" {
				t.Errorf("%s: a finding without a message: %s", name, f)
			}
			if f.Pos.File != "policy.yaml" {
				continue
			}
			switch f.Severity {
			case diag.Error:
				errs = append(errs, fmt.Sprintf("  %d:%d %s[%s] %s: %s", f.Pos.Line, f.Pos.Col, f.Severity, f.Rule, f.Path, f.Message))
			default:
				infos[fmt.Sprintf("%s[%s]", f.Severity, f.Rule)]++
			}
		}
		if len(errs) > 0 {
			fmt.Fprintf(&b, "%s: refused\n%s\n", name, strings.Join(errs, "\n"))
			continue
		}
		loaded++
		var notes []string
		for k, n := range infos {
			notes = append(notes, fmt.Sprintf("%s x%d", k, n))
		}
		slices.Sort(notes)
		fmt.Fprintf(&b, "%s: loads", name)
		if len(notes) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(notes, ", "))
		}
		b.WriteString("\n")
	}
	got := fmt.Sprintf("%d files: %d load, %d refused\n\n%s", len(files), loaded, len(files)-loaded, b.String())
	if update {
		ar := &txtar.Archive{
			Comment: []byte("# What `hnsplan vet` says of each file of testdata/corpus, vetted alone in a\n# Calico VXLAN cluster (compiler/corpus_test.go). HNSPLAN_UPDATE=1 rewrites it.\n"),
			Files:   []txtar.File{{Name: "verdicts", Data: []byte(got)}},
		}
		if err := os.WriteFile(golden, txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	ar, err := txtar.ParseFile(golden)
	if err != nil || len(ar.Files) != 1 {
		t.Fatalf("%s: %v (HNSPLAN_UPDATE=1 writes it)", golden, err)
	}
	if diff := cmp.Diff(string(ar.Files[0].Data), got); diff != "" {
		t.Errorf("corpus verdicts changed (-%s +now); review, then HNSPLAN_UPDATE=1:\n%s", golden, diff)
	}
}
