package intent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

// FuzzManifests feeds arbitrary bytes to the manifest reader: it must not
// panic, and every finding must name the file.
func FuzzManifests(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n"))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems: [{apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: x}, spec: {podSelector: {}, ingress: [{from: [{ipBlock: {cidr: 10.0.0.1/8, except: [1.2.3.4/32]}}]}]}}]\n"))
	f.Add([]byte("apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\nmetadata: {name: g}\nspec: {ingress: [{action: Allow, protocol: 6, source: {nets: [10.0.0.0/8], ports: ['1:2', http]}}]}\n"))
	f.Add([]byte("--- &a\n*a\n---\n[1, {]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m Manifests
		var errs diag.List
		forEachObject("m.yaml", data, RuleManifest, &errs, func(obj *yamlNode, src Source, apiVersion, kind string) {
			m.add(obj, src, apiVersion, kind, &errs)
		})
		for _, e := range errs {
			if e.Pos.File != "m.yaml" {
				t.Errorf("finding without the file: %s", e)
			}
		}
	})
}

// FuzzCUE loads arbitrary text as the intent's CUE file: no panic, and
// every error finding has a position.
func FuzzCUE(f *testing.F) {
	f.Add(minimal)
	f.Add(strings.Replace(minimal, "192.168.0.0/16", "192.168.0.1/16", 1))
	f.Add("package c\ncluster: nodes: x: {os: \"windows\", addres: 1}\n")
	f.Fuzz(func(t *testing.T, text string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "c.cue"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, findings, err := Load(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range findings {
			if !f.Pos.IsValid() {
				t.Errorf("finding without a position: %s", f)
			}
		}
	})
}
