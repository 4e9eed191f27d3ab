package intent

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/internal/synth"
)

// FuzzManifests feeds arbitrary bytes to the manifest reader: it must not
// panic, and every finding must name the file.
func FuzzManifests(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n"))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems: [{apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: x}, spec: {podSelector: {}, ingress: [{from: [{ipBlock: {cidr: 10.0.0.1/8, except: [1.2.3.4/32]}}]}]}}]\n"))
	f.Add([]byte("apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\nmetadata: {name: g}\nspec: {ingress: [{action: Allow, protocol: 6, source: {nets: [10.0.0.0/8], ports: ['1:2', http]}}]}\n"))
	f.Add([]byte("--- &a\n*a\n---\n[1, {]\n"))
	// The hostile fan-outs (alias and merge-key chains, peers, nets,
	// ports and rules past the limits), for the fuzzer to vary; the
	// largest files (written-out policies of megabytes) are left out, to
	// keep its inputs small.
	for _, c := range synth.FanOuts() {
		for _, data := range c.Files {
			if len(data) <= 256<<10 {
				f.Add([]byte(data))
			}
		}
	}
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
		// A small budget: an input that evaluates for long is reported,
		// not a hang of the fuzzer (whose deadline then fails the run).
		// Its evaluation goes on in the background (see BudgetError);
		// in a fuzz worker that is only CPU.
		_, findings, err := Load(dir, Options{CUETimeout: 5 * time.Second, CUEMemory: 512 << 20})
		var be *BudgetError
		if errors.As(err, &be) {
			if !be.Finding.Pos.IsValid() {
				t.Errorf("budget finding without a position: %s", be.Finding)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range findings {
			if !f.Pos.IsValid() {
				t.Errorf("finding without a position: %s", f)
			}
			if strings.TrimSpace(f.Message) == "" {
				t.Errorf("finding without a message: %s", f)
			}
		}
	})
}

// FuzzInventory feeds arbitrary bytes to the inventory reader: no panic,
// every finding names the file and prints without a control character,
// and every object it keeps has names the API server would accept.
func FuzzInventory(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x, labels: {app: web}}, status: {podIP: 192.168.0.5}, spec: {nodeName: win-1}}\n- {apiVersion: v1, kind: Node, metadata: {name: win-1, annotations: {projectcalico.org/VXLANTunnelMACAddr: '00:15:5d:00:00:01'}}}\n"))
	f.Add([]byte("apiVersion: crd.projectcalico.org/v1\nkind: BlockAffinity\nmetadata: {name: win-1-192-168-0-0-26}\nspec: {node: win-1, cidr: 192.168.0.0/26, state: confirmed, deleted: 'false'}\n"))
	f.Add([]byte("{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"\\u001b[2J\"}}\n"))
	f.Add([]byte("apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s-1, namespace: x}\nendpoints: [{addresses: [192.168.0.5]}]\n"))
	f.Add([]byte("apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: a\n    labels:\n      app: web\n  spec:\n    containers:\n    - name: c\n      ports:\n      - containerPort: 80\n  status:\n    podIP: 192.168.0.5\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: x}\nkind: List\nmetadata:\n  resourceVersion: \"\"\n"))
	f.Add([]byte("{\n    \"apiVersion\": \"v1\",\n    \"items\": [\n        {\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"a\"},\n         \"status\": {\"podIP\": \"192.168.0.5\"}},\n        {\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"x\"}}\n    ],\n    \"kind\": \"List\"\n}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var inv Inventory
		var errs diag.List
		forEachObject("inv.yaml", data, RuleInventory, &errs, func(obj *yamlNode, src Source, apiVersion, kind string) {
			inv.add(obj, src, apiVersion, kind, &errs)
		})
		// A List read an item at a time (readList) is read as the whole
		// document is: the same objects, positions and findings.
		var byItem Inventory
		var itemErrs diag.List
		if !byItem.readList("inv.yaml", data, &itemErrs) {
			forEachObject("inv.yaml", data, RuleInventory, &itemErrs, func(obj *yamlNode, src Source, apiVersion, kind string) {
				byItem.add(obj, src, apiVersion, kind, &itemErrs)
			})
		}
		if diff := cmp.Diff(inventoryJSON(t, inv), inventoryJSON(t, byItem)); diff != "" {
			t.Errorf("read an item at a time, the inventory differs (-whole +items):\n%s", diff)
		}
		if diff := cmp.Diff(findingStrings(errs), findingStrings(itemErrs)); diff != "" {
			t.Errorf("read an item at a time, the findings differ (-whole +items):\n%s", diff)
		}
		for _, e := range errs {
			if e.Pos.File != "inv.yaml" {
				t.Errorf("finding without the file: %s", e)
			}
			if s := e.String(); strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				t.Errorf("finding prints a control character: %q", s)
			}
		}
		name := func(what, n string, rule func(string) []string) {
			if msgs := rule(n); len(msgs) > 0 {
				t.Errorf("kept a %s named %q: %v", what, n, msgs)
			}
		}
		for _, p := range inv.Pods {
			name("Pod", p.Name, validation.IsDNS1123Subdomain)
			if p.Namespace != "" {
				name("Pod namespace", p.Namespace, validation.IsDNS1123Label)
			}
		}
		for _, n := range inv.Namespaces {
			name("Namespace", n.Name, validation.IsDNS1123Label)
		}
		for _, n := range inv.Nodes {
			name("Node", n.Name, validation.IsDNS1123Subdomain)
		}
		for _, s := range inv.Services {
			name("Service", s.Name, validation.IsDNS1035Label)
		}
	})
}

// inventoryJSON is inv as JSON, to compare two: its types hold addresses
// and Kubernetes quantities, whose fields cmp cannot see.
func inventoryJSON(t *testing.T, inv Inventory) string {
	j, err := json.MarshalIndent(inv, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(j)
}
