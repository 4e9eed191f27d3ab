package reach_test

import (
	"net/netip"
	"testing"

	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	compiler "github.com/hnsplan/hnsplan/compiler/policy"
	"github.com/hnsplan/hnsplan/compiler/reach"
	"github.com/hnsplan/hnsplan/compiler/sim"
)

// TestIssue12 decides issue 12's reproductions in a hybrid cluster: a1
// (alpha, app=web) must reach no pod of beta, whether the beta pod is on
// Windows (its ACLs decide) or Linux (the program decides).
func TestIssue12(t *testing.T) {
	for _, tc := range []struct{ name, source string }{
		{"notSelector", "{notSelector: app == 'db'}"},
		{"all()+notSelector", "{namespaceSelector: all(), notSelector: app == 'web'}"},
		{"global()", "{namespaceSelector: global()}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := "apiVersion: projectcalico.org/v3\nkind: NetworkPolicy\nmetadata: {name: p, namespace: beta}\n" +
				"spec: {selector: all(), types: [Ingress], ingress: [{action: Allow, source: " + tc.source + "}]}\n"
			var errs diag.List
			m := intent.ReadManifests("p.yaml", []byte(doc), &errs)
			prog, findings := compiler.Compile(&m, nil, func(string) diag.Severity { return diag.Info })
			if errs.HasErrors() || findings.HasErrors() {
				t.Fatal(errs, findings)
			}
			a1 := &acl.Pod{Namespace: "alpha", Name: "a1", IP: netip.MustParseAddr("192.168.0.10"), Labels: map[string]string{"app": "web"}}
			b1 := &acl.Pod{Namespace: "beta", Name: "b1", IP: netip.MustParseAddr("192.168.0.74"), Labels: map[string]string{"app": "web"}}
			b2 := &acl.Pod{Namespace: "beta", Name: "b2", IP: netip.MustParseAddr("192.168.0.11"), Labels: map[string]string{"app": "db"}}
			l1 := &acl.Pod{Namespace: "beta", Name: "l1", IP: netip.MustParseAddr("192.168.1.3"), Labels: map[string]string{"app": "web"}}
			world := acl.NewWorld([]*acl.Pod{a1, b1, b2, l1}, nil, nil)
			r := acl.NewRenderer(prog, world)
			win := func(p *acl.Pod, node string) *reach.Endpoint {
				in, out, err := r.Render(p)
				if err != nil {
					t.Fatal(err)
				}
				l, err := sim.Compile(append(in, out...))
				if err != nil {
					t.Fatal(err)
				}
				return &reach.Endpoint{Pod: p, Node: node, OS: reach.OSWindows, ACL: l}
			}
			src := win(a1, "win-1")
			d := reach.NewDecider(prog, world)
			for _, dst := range []*reach.Endpoint{win(b1, "win-2"), win(b2, "win-1"), {Pod: l1, Node: "lin-1", OS: reach.OSLinux}} {
				v, err := d.Decide(src, dst, 6, 80)
				if err != nil {
					t.Fatal(err)
				}
				if v.Allowed || v.DecidedBy() != dst.OS || !v.Egress.Allowed {
					t.Errorf("a1 -> %s: allowed %v decided by %q; want blocked by %s's ingress", dst.Key(), v.Allowed, v.DecidedBy(), dst.OS)
				}
			}
			// The other way, a1 has no policy: allowed, decided by both OSes.
			v, err := d.Decide(&reach.Endpoint{Pod: l1, Node: "lin-1", OS: reach.OSLinux}, src, 6, 80)
			if err != nil || !v.Allowed || v.DecidedBy() != "windows+linux" {
				t.Errorf("l1 -> a1: allowed %v decided by %q (%v); want allowed by windows+linux", v.Allowed, v.DecidedBy(), err)
			}
		})
	}
}
