package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVetReportsWhatCompileReports: for the same intent and inventory,
// `vet` lists exactly the findings (errors and warnings) that `compile`
// prints, and both end an invalid intent with the same summary line. The
// cases are every bundled example with the calico-vxlan inventory — on the
// other examples its pods sit outside the nodes' blocks and its
// BlockAffinities name blocks of no pool, which only the plan compiler
// sees — and an endpoint whose ACL list is over budget.
func TestVetReportsWhatCompileReports(t *testing.T) {
	inventory := "../../examples/inventory/calico-vxlan.yaml"
	dirs, err := filepath.Glob("../../examples/*/*.cue")
	if err != nil {
		t.Fatal(err)
	}
	type tc struct{ dir, inventory string }
	var cases []tc
	seen := map[string]bool{}
	for _, f := range dirs {
		if d := filepath.Dir(f); !seen[d] {
			seen[d] = true
			cases = append(cases, tc{d, inventory})
		}
	}
	if len(cases) < 3 {
		t.Fatalf("found %d examples, want at least 3", len(cases))
	}
	budget := t.TempDir()
	writeBudgetIntent(t, budget, 1001)
	cases = append(cases, tc{filepath.Join(budget, "intent"), filepath.Join(budget, "inventory.yaml")})

	compileOnly := 0 // findings of the plan compiler's rules, which vet used to miss
	for _, c := range cases {
		t.Run(filepath.Base(c.dir), func(t *testing.T) {
			var vout, verr bytes.Buffer
			vcode := run([]string{"vet", c.dir, "--inventory", c.inventory, "--severity", "warning"}, &vout, &verr)
			var cout, cerr bytes.Buffer
			ccode := run([]string{"compile", c.dir, "--inventory", c.inventory, "-o", t.TempDir()}, &cout, &cerr)
			if vcode != ccode {
				t.Errorf("vet exits %d, compile %d\nvet:\n%s%s\ncompile:\n%s%s", vcode, ccode, vout.String(), verr.String(), cout.String(), cerr.String())
			}
			vlines := lines(vout.String())
			if len(vlines) == 0 {
				t.Fatalf("vet printed nothing; stderr: %s", verr.String())
			}
			vetFindings, vetSummary := vlines[:len(vlines)-1], vlines[len(vlines)-1]
			compileFindings := lines(cerr.String())
			if ccode != 0 {
				// compile ends with the summary line, in vet's words.
				last := compileFindings[len(compileFindings)-1]
				compileFindings = compileFindings[:len(compileFindings)-1]
				if last != vetSummary {
					t.Errorf("summary lines differ:\nvet:     %s\ncompile: %s", vetSummary, last)
				}
			}
			if got, want := strings.Join(vetFindings, "\n"), strings.Join(compileFindings, "\n"); got != want {
				t.Errorf("vet and compile differ\nvet:\n%s\ncompile:\n%s", got, want)
			}
			for _, l := range vetFindings {
				for _, rule := range []string{"[ipam-block-invalid]", "[ipam-no-block]", "[pod-ip-outside-block]", "[policy-acl-budget]"} {
					if strings.Contains(l, rule) {
						compileOnly++
					}
				}
			}
		})
	}
	// Without findings of the compiler's own rules the comparison proves
	// nothing: the cases are chosen to have some.
	if compileOnly < 3 {
		t.Errorf("%d findings of the plan compiler's rules in all cases; the cases no longer exercise them", compileOnly)
	}
}

// lines splits text into its non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// writeBudgetIntent writes dir/intent and dir/inventory.yaml: a client pod
// on win-1 whose egress rule to a named port maps to a different number on
// each of n backend pods, one ACL per number — over the 1,000-ACL budget
// for n > 1000.
func writeBudgetIntent(t *testing.T, dir string, n int) {
	t.Helper()
	var inv strings.Builder
	inv.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	inv.WriteString("- {apiVersion: v1, kind: Pod, metadata: {name: client, namespace: app, labels: {role: client}}, spec: {nodeName: win-1, containers: [{name: c, image: i}]}, status: {podIP: 192.168.0.10}}\n")
	for i := range n {
		fmt.Fprintf(&inv, "- {apiVersion: v1, kind: Pod, metadata: {name: b%d, namespace: app, labels: {role: backend}}, spec: {nodeName: linux-1, containers: [{name: c, image: i, ports: [{name: api, containerPort: %d}]}]}, status: {podIP: 10.%d.%d.%d}}\n",
			i, 20000+i, 100+i/65536, i/256%256, i%256)
	}
	files := map[string]string{
		"intent/cluster.cue": `package cluster

cluster: {
	name:       "budget"
	datastore:  "kubernetes"
	networking: "calico-vxlan"
	serviceCIDRs: ["10.96.0.0/12"]
	ipam: strictAffinity: true
	pools: default: cidr: "192.168.0.0/16"
	nodes: {
		"linux-1": {os: "linux", address: "10.240.0.10/24"}
		"win-1": {os: "windows", address: "10.240.0.21/24", maxPods: 60, windows: build: "10.0.17763.1432"}
	}
}
`,
		"intent/policy.yaml": `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: to-api, namespace: app}
spec:
  podSelector: {matchLabels: {role: client}}
  policyTypes: [Egress]
  egress:
  - to: [{podSelector: {matchLabels: {role: backend}}}]
    ports: [{port: api}]
`,
		"inventory.yaml": inv.String(),
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
