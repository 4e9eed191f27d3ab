package intent

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/internal/synth"
)

// TestFanOutRefused: every hostile fan-out intent (synth.FanOuts: YAML
// aliases of rules and lists, alias chains, merge keys; peers, Calico
// nets, ports, rules and policies written out past the limits) is refused
// with an error naming the file and line of what passed the limit, before
// the policy is decoded: no policy past a limit is kept. (How fast, on the
// CLI: /usr/bin/time hnsplan vet of `go run ./internal/synth/gen -fanout`.)
func TestFanOutRefused(t *testing.T) {
	for _, c := range synth.FanOuts() {
		t.Run(c.Name, func(t *testing.T) {
			dir := t.TempDir()
			if err := synth.WriteFanOut(dir, c); err != nil {
				t.Fatal(err)
			}
			in, findings, err := Load(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			want := regexp.MustCompile("^" + regexp.QuoteMeta(dir+string(filepath.Separator)) + c.Want)
			var hit []diag.Finding
			for _, f := range findings {
				if f.Severity == diag.Error && want.MatchString(f.String()) {
					hit = append(hit, f)
				}
			}
			if len(hit) != 1 {
				t.Fatalf("want one error matching %s; findings:\n%s", c.Want, findings)
			}
			if hit[0].Pos.Line < 1 {
				t.Errorf("no line: %s", hit[0])
			}
			peers := 0
			for _, p := range in.Manifests.NetworkPolicies {
				for _, r := range p.Spec.Ingress {
					peers += len(r.From)
				}
				for _, r := range p.Spec.Egress {
					peers += len(r.To)
				}
				if len(p.Spec.Ingress)+len(p.Spec.Egress) > MaxPolicyRules {
					t.Errorf("policy %s of %d rules kept", p.Name, len(p.Spec.Ingress)+len(p.Spec.Egress))
				}
			}
			for _, p := range in.Manifests.CalicoPolicies {
				for _, r := range append(p.Spec.Ingress, p.Spec.Egress...) {
					peers += len(r.Source.Nets) + len(r.Destination.Nets)
				}
			}
			if peers > MaxPeers || (c.Name != "many-policies" && peers > 0) {
				t.Errorf("%d peers kept", peers)
			}
		})
	}
}

// TestPolicyWithinLimits: a policy at every limit (1,000 rules, 10,000
// peers, 10,000 ports) is read, and its aliases are counted expanded.
func TestPolicyWithinLimits(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: default}\nspec:\n  podSelector: {}\n  ingress:\n  - &r\n    from:\n")
	for range 10 {
		b.WriteString("    - ipBlock: {cidr: 10.0.0.0/8, except: [10.0.0.0/24]}\n")
	}
	b.WriteString("    ports: [{port: 1}, {port: 2}, {port: 3}, {port: 4}, {port: 5}, {port: 6}, {port: 7}, {port: 8}, {port: 9}, {port: 10}]\n")
	b.WriteString(strings.Repeat("  - *r\n", 499)) // 500 rules of 20 peers and 10 ports: 10,000 and 5,000
	b.WriteString("  egress:\n")
	b.WriteString(strings.Repeat("  - {}\n", 500))
	var errs diag.List
	m := ReadManifests("p.yaml", []byte(b.String()), &errs)
	if errs.HasErrors() || len(m.NetworkPolicies) != 1 {
		t.Fatalf("at the limits: %d policies, findings %s", len(m.NetworkPolicies), errs)
	}
	// One more peer (another except) is past it.
	over := strings.Replace(b.String(), "except: [10.0.0.0/24]}", "except: [10.0.0.0/24, 10.0.1.0/24]}", 1)
	errs = nil
	m = ReadManifests("p.yaml", []byte(over), &errs)
	if len(m.NetworkPolicies) != 0 || !strings.Contains(fmt.Sprint(errs), "more than 10,000 peers") {
		t.Fatalf("one peer over: %d policies, findings %s", len(m.NetworkPolicies), errs)
	}
}
