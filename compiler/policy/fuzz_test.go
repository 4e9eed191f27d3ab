package policy_test

import (
	"net/netip"
	"testing"

	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/policy"
	"github.com/hnsplan/hnsplan/compiler/sim"
)

// FuzzPolicy decodes arbitrary YAML as policy manifests, compiles what
// decodes cleanly and renders it for a few pods: nothing may panic, and
// every rendered ACL must be one HNS would parse (sim.Compile checks the
// fields as HNS does). The seed corpus is in testdata/fuzz/FuzzPolicy.
func FuzzPolicy(f *testing.F) {
	f.Add([]byte("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: a, namespace: x}\nspec: {podSelector: {}, ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/8, except: [10.1.0.0/16]}}], ports: [{port: 80, endPort: 90}]}]}\n"))
	f.Add([]byte("apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\nmetadata: {name: g}\nspec: {selector: all(), egress: [{action: Pass}, {action: Deny, protocol: TCP, destination: {notNets: [10.0.0.0/8], notPorts: [22, '1000:2000']}}]}\n"))
	f.Add([]byte("apiVersion: projectcalico.org/v3\nkind: NetworkPolicy\nmetadata: {name: n, namespace: x}\nspec: {ingress: [{action: Allow, protocol: UDP, source: {notSelector: role == 'x'}, destination: {ports: [dns]}}]}\n"))
	pods := []*acl.Pod{
		{Namespace: "x", Name: "a", IP: netip.MustParseAddr("192.168.0.5"), Labels: map[string]string{"role": "x"}, Ports: []acl.NamedPort{{Name: "dns", Protocol: 17, Port: 53}}},
		{Namespace: "y", Name: "b", IP: netip.MustParseAddr("192.168.0.6"), Labels: map[string]string{"role": "y"}},
	}
	world := acl.NewWorld(pods, map[string]map[string]string{"x": {"team": "a"}, "y": nil}, []netip.Addr{netip.MustParseAddr("10.0.0.1")})
	f.Fuzz(func(t *testing.T, data []byte) {
		var errs diag.List
		m := intent.ReadManifests("p.yaml", data, &errs)
		if errs.HasErrors() {
			return
		}
		prog, findings := policy.Compile(&m, nil, func(string) diag.Severity { return diag.Warning })
		_ = findings
		r := acl.NewRenderer(prog, world)
		for _, p := range pods {
			in, out, err := r.Render(p)
			if err != nil {
				return // e.g. a selector the loader accepted as a string but does not parse
			}
			if _, err := sim.Compile(append(in, out...)); err != nil {
				t.Fatalf("rendered ACLs HNS would reject: %v", err)
			}
		}
	})
}
