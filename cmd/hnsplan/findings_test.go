package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/internal/synth"
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
	if err := synth.WriteACLBudget(budget, 1001); err != nil {
		t.Fatal(err)
	}
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
