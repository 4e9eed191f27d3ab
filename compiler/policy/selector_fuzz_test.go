package policy_test

import (
	"fmt"
	"net/netip"
	"strconv"
	"testing"

	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/policy"
	"github.com/hnsplan/hnsplan/compiler/selector"
	"github.com/hnsplan/hnsplan/compiler/sim"
)

// FuzzSelectorACL takes two Calico selectors through the whole path a
// policy's selectors take: a GlobalNetworkPolicy that applies to the
// endpoints `applies` selects and allows ingress only from those `from`
// selects, compiled (compiler/policy), rendered to HNS ACLs
// (compiler/acl) and evaluated as HNS would (compiler/sim). The verdict
// for every pair of pods must be what the selectors themselves say
// (compiler/selector): a pod the policy applies to admits exactly the
// pods `from` selects; any other pod admits everyone.
func FuzzSelectorACL(f *testing.F) {
	f.Add("role == 'db'", "role == 'web'")
	f.Add("all()", "has(team) && team in {'a', 'b'}")
	f.Add("!has(role)", "role != 'web' || env == \"prod\"")
	f.Add("role starts with 'd'", "role ends with 'b' && !(team contains 'x')")
	pods := []*acl.Pod{
		{Namespace: "x", Name: "db", IP: netip.MustParseAddr("192.168.0.5"), Labels: map[string]string{"role": "db", "team": "a"}},
		{Namespace: "x", Name: "web", IP: netip.MustParseAddr("192.168.0.6"), Labels: map[string]string{"role": "web", "env": "prod"}},
		{Namespace: "y", Name: "bare", IP: netip.MustParseAddr("192.168.0.7")},
		{Namespace: "y", Name: "odd", IP: netip.MustParseAddr("192.168.0.8"), Labels: map[string]string{"team": "b", "role": "dab"}},
	}
	world := acl.NewWorld(pods, map[string]map[string]string{"x": {"team": "a"}, "y": nil}, nil)
	f.Fuzz(func(t *testing.T, applies, from string) {
		as, err1 := selector.Parse(applies)
		fs, err2 := selector.Parse(from)
		if err1 != nil || err2 != nil {
			return
		}
		// Go's ASCII quoting uses only escapes YAML's double-quoted
		// strings have (\x7f, \u00e9, \n), and YAML allows no raw
		// control character (DEL included) in a stream.
		quote := strconv.QuoteToASCII
		doc := fmt.Sprintf("apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\nmetadata: {name: g}\nspec:\n  selector: %s\n  types: [Ingress]\n  ingress:\n  - action: Allow\n    source: {selector: %s}\n", quote(applies), quote(from))
		var errs diag.List
		m := intent.ReadManifests("p.yaml", []byte(doc), &errs)
		if errs.HasErrors() {
			t.Fatalf("selectors that parse make a manifest that does not load: %v\n%s", errs, doc)
		}
		prog, _ := policy.Compile(&m, nil, func(string) diag.Severity { return diag.Warning })
		r := acl.NewRenderer(prog, world)
		for _, dst := range pods {
			in, out, err := r.Render(dst)
			if err != nil {
				t.Fatalf("render %s: %v", dst.Key(), err)
			}
			list, err := sim.Compile(append(in, out...))
			if err != nil {
				t.Fatalf("rendered ACLs HNS would reject: %v", err)
			}
			for _, src := range pods {
				if src == dst {
					continue
				}
				got := list.Evaluate("In", sim.Packet{Protocol: 6, Remote: src.IP, LocalPort: 80, RemotePort: 49152}).Allowed
				want := !as.Evaluate(dst.Labels) || fs.Evaluate(src.Labels)
				if got != want {
					t.Fatalf("%s -> %s: allowed %v, want %v (applies %q selects the destination: %v; from %q selects the source: %v)",
						src.Key(), dst.Key(), got, want, applies, as.Evaluate(dst.Labels), from, fs.Evaluate(src.Labels))
				}
			}
		}
	})
}
