package policy_test

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/policy"
	"github.com/hnsplan/hnsplan/compiler/reach"
	"github.com/hnsplan/hnsplan/compiler/sim"
)

// The scoping cases' world: beta/b2 is the endpoint the policy protects
// (ingress) or sends from (egress); the peers are pods of three
// namespaces and an address no pod has.
var scopingPods = []*acl.Pod{
	{Namespace: "alpha", Name: "a1", IP: netip.MustParseAddr("10.1.0.11"), Labels: map[string]string{"app": "web"}},
	{Namespace: "beta", Name: "b1", IP: netip.MustParseAddr("10.1.0.21"), Labels: map[string]string{"app": "web"}},
	{Namespace: "beta", Name: "b2", IP: netip.MustParseAddr("10.1.0.22"), Labels: map[string]string{"app": "db"}},
	{Namespace: "beta", Name: "b3", IP: netip.MustParseAddr("10.1.0.23"), Labels: map[string]string{"app": "db"}, ServiceAccount: "sa1"},
	{Namespace: "gamma", Name: "g1", IP: netip.MustParseAddr("10.1.0.31"), Labels: map[string]string{"app": "web"}, ServiceAccount: "sa1"},
}

var scopingNamespaces = map[string]map[string]string{
	"alpha": {"env": "prod"}, "beta": {"env": "dev"}, "gamma": {"env": "prod"},
}

const scopingExternal = "203.0.113.5"

const scopingService = `apiVersion: v1
kind: Service
metadata: {name: web, namespace: gamma}
spec:
  selector: {app: web}
  ports: [{port: 80, protocol: TCP}]
`

// TestSelectorScoping checks every row of the scoping table in doc.go:
// which peers a rule side matches, for ingress (source) and egress
// (destination), decided by the rendered HNS ACLs (Windows) and by the
// policy program read natively (Linux). Each case is an Allow of the peer
// in a policy that otherwise denies, so a peer matched wrongly is a
// connection allowed that Calico denies.
func TestSelectorScoping(t *testing.T) {
	const (
		np  = "kind: NetworkPolicy\nmetadata: {name: p, namespace: beta}\nspec:\n  selector: all()\n"
		gnp = "kind: GlobalNetworkPolicy\nmetadata: {name: p}\nspec:\n  selector: projectcalico.org/namespace == 'beta'\n"
		knp = "kind: NetworkPolicy\nmetadata: {name: p, namespace: beta}\nspec:\n  podSelector: {}\n"
	)
	ext := "ext"
	for _, tc := range []struct {
		name   string
		head   string // np, gnp or knp
		entity string // the peer, as a flow mapping
		want   []string
	}{
		{"np/any", np, `{}`, []string{"alpha/a1", "beta/b1", "beta/b3", "gamma/g1", ext}},
		{"np/selector", np, `{selector: app == 'web'}`, []string{"beta/b1"}},
		{"np/serviceAccounts", np, `{serviceAccounts: {names: [sa1]}}`, []string{"beta/b3"}},
		// issue 12, bug 1: notSelector alone is scoped to the namespace.
		{"np/notSelector", np, `{notSelector: app == 'db'}`, []string{"beta/b1"}},
		{"np/selector+notSelector", np, `{selector: has(app), notSelector: app == 'web'}`, []string{"beta/b3"}},
		// issue 12, bug 1: with namespaceSelector all(), every pod not selected.
		{"np/all()+notSelector", np, `{namespaceSelector: all(), notSelector: app == 'web'}`, []string{"beta/b3"}},
		{"np/namespaceSelector", np, `{namespaceSelector: env == 'prod'}`, []string{"alpha/a1", "gamma/g1"}},
		{"np/namespaceSelector+selector", np, `{namespaceSelector: env == 'dev', selector: app == 'db'}`, []string{"beta/b3"}},
		{"np/namespaceSelector all()", np, `{namespaceSelector: all()}`, []string{"alpha/a1", "beta/b1", "beta/b3", "gamma/g1"}},
		// issue 12, bug 2: global() selects no pod.
		{"np/global()", np, `{namespaceSelector: global()}`, nil},
		{"np/global()+selector", np, `{namespaceSelector: global(), selector: all()}`, nil},
		{"np/global() or", np, `{namespaceSelector: "global() || env == 'prod'"}`, []string{"alpha/a1", "gamma/g1"}},
		{"np/not global()", np, `{namespaceSelector: "!global()"}`, []string{"alpha/a1", "beta/b1", "beta/b3", "gamma/g1"}},
		{"np/nets", np, `{nets: [` + scopingExternal + `/32]}`, []string{ext}},
		{"np/nets+selector", np, `{nets: [0.0.0.0/0], selector: app == 'web'}`, []string{"beta/b1"}},
		{"np/notNets", np, `{notNets: [` + scopingExternal + `/32]}`, []string{"alpha/a1", "beta/b1", "beta/b3", "gamma/g1"}},
		{"gnp/selector", gnp, `{selector: app == 'web'}`, []string{"alpha/a1", "beta/b1", "gamma/g1"}},
		{"gnp/notSelector", gnp, `{notSelector: app == 'web'}`, []string{"beta/b3", ext}},
		{"gnp/serviceAccounts", gnp, `{serviceAccounts: {names: [sa1]}}`, []string{"beta/b3", "gamma/g1"}},
		{"gnp/namespaceSelector", gnp, `{namespaceSelector: env == 'prod'}`, []string{"alpha/a1", "gamma/g1"}},
		{"gnp/global()", gnp, `{namespaceSelector: global()}`, nil},
		{"gnp/global()+notSelector", gnp, `{namespaceSelector: global(), notSelector: app == 'db'}`, nil},
		{"knp/podSelector", knp, `{podSelector: {matchLabels: {app: web}}}`, []string{"beta/b1"}},
		{"knp/namespaceSelector {}", knp, `{namespaceSelector: {}}`, []string{"alpha/a1", "beta/b1", "beta/b3", "gamma/g1"}},
		{"knp/both", knp, `{namespaceSelector: {matchLabels: {env: prod}}, podSelector: {matchLabels: {app: web}}}`, []string{"alpha/a1", "gamma/g1"}},
		{"knp/ipBlock", knp, `{ipBlock: {cidr: ` + scopingExternal + `/32}}`, []string{ext}},
	} {
		for _, ingress := range []bool{true, false} {
			dir := map[bool]string{true: "ingress", false: "egress"}[ingress]
			t.Run(tc.name+"/"+dir, func(t *testing.T) {
				var doc string
				switch tc.head {
				case knp:
					peer := map[bool]string{true: "from", false: "to"}[ingress]
					doc = "apiVersion: networking.k8s.io/v1\n" + tc.head + "  policyTypes: [" + map[bool]string{true: "Ingress", false: "Egress"}[ingress] + "]\n" +
						"  " + dir + ": [{" + peer + ": [" + tc.entity + "]}]\n"
				default:
					side := map[bool]string{true: "source", false: "destination"}[ingress]
					doc = "apiVersion: projectcalico.org/v3\n" + tc.head + "  types: [" + map[bool]string{true: "Ingress", false: "Egress"}[ingress] + "]\n" +
						"  " + dir + ": [{action: Allow, " + side + ": " + tc.entity + "}]\n"
				}
				checkScoping(t, doc, ingress, tc.want)
			})
		}
	}
}

func TestServicesAreNotScoped(t *testing.T) {
	// A namespaced policy's services match names a Service of another
	// namespace: its pods, not the policy's namespace's.
	doc := "apiVersion: projectcalico.org/v3\nkind: NetworkPolicy\nmetadata: {name: p, namespace: beta}\nspec:\n  selector: all()\n  types: [Egress]\n" +
		"  egress: [{action: Allow, protocol: TCP, destination: {services: {name: web, namespace: gamma}}}]\n"
	checkScoping(t, doc, false, []string{"gamma/g1"})
}

// checkScoping compiles doc and checks which peers beta/b2 exchanges
// TCP/80 with, in the direction given, on Windows and on Linux.
func checkScoping(t *testing.T, doc string, ingress bool, want []string) {
	t.Helper()
	var errs diag.List
	m := intent.ReadManifests("p.yaml", []byte(doc), &errs)
	svcs := intent.ReadManifests("svc.yaml", []byte(scopingService), &errs)
	if errs.HasErrors() {
		t.Fatalf("manifests: %v\n%s", errs, doc)
	}
	prog, findings := policy.Compile(&m, svcs.Services, func(string) diag.Severity { return diag.Info })
	if findings.HasErrors() {
		t.Fatalf("compile: %v\n%s", findings, doc)
	}
	pods := make([]*acl.Pod, len(scopingPods))
	for i, p := range scopingPods {
		c := *p
		pods[i] = &c
	}
	world := acl.NewWorld(pods, scopingNamespaces, nil)
	var ep *acl.Pod
	peers := map[string]netip.Addr{"ext": netip.MustParseAddr(scopingExternal)}
	for _, p := range world.Pods {
		if p.Key() == "beta/b2" {
			ep = p
		} else {
			peers[p.Key()] = p.IP
		}
	}
	in, out, err := acl.NewRenderer(prog, world).Render(ep)
	if err != nil {
		t.Fatal(err)
	}
	list, err := sim.Compile(append(in, out...))
	if err != nil {
		t.Fatal(err)
	}
	linux := reach.NewLinux(prog, world)
	direction, localPort, remotePort := "Out", uint16(reach.EphemeralPort), uint16(80)
	if ingress {
		direction, localPort, remotePort = "In", 80, reach.EphemeralPort
	}
	var gotWin, gotLinux []string
	for _, k := range slices.Sorted(maps.Keys(peers)) {
		p := sim.Packet{Protocol: 6, Remote: peers[k], LocalPort: localPort, RemotePort: remotePort}
		if list.Evaluate(direction, p).Allowed {
			gotWin = append(gotWin, k)
		}
		d, err := linux.Evaluate(ep, direction, p)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			gotLinux = append(gotLinux, k)
		}
	}
	want = slices.Sorted(slices.Values(want))
	for os, got := range map[string][]string{"windows": gotWin, "linux": gotLinux} {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: beta/b2 exchanges TCP/80 with %v, want %v\n%s", os, got, want, strings.TrimSpace(doc))
		}
	}
}

// TestInexactPassFailsClosed: a Pass whose match Windows cannot express
// exactly (named ports less notPorts) must not be widened — a wider Pass
// skips the tier's later Deny for traffic Calico keeps in the tier. It is
// compiled as a Deny of the widened match instead.
func TestInexactPassFailsClosed(t *testing.T) {
	doc := `apiVersion: projectcalico.org/v3
kind: Tier
metadata: {name: first}
spec: {order: 10}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: first.pass-http}
spec:
  tier: first
  selector: projectcalico.org/namespace == 'beta'
  types: [Ingress]
  ingress:
  - action: Pass
    protocol: TCP
    destination: {ports: [http], notPorts: ["8000:8100"]}
  - action: Deny
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: allow-all}
spec:
  selector: all()
  types: [Ingress]
  ingress: [{action: Allow}]
`
	var errs diag.List
	m := intent.ReadManifests("p.yaml", []byte(doc), &errs)
	prog, findings := policy.Compile(&m, nil, func(string) diag.Severity { return diag.Info })
	if errs.HasErrors() || findings.HasErrors() {
		t.Fatalf("%v %v", errs, findings)
	}
	if !strings.Contains(fmt.Sprint(findings), "compiled as a Deny") {
		t.Errorf("no finding says the Pass became a Deny:\n%v", findings)
	}
	b2 := &acl.Pod{Namespace: "beta", Name: "b2", IP: netip.MustParseAddr("10.1.0.22"), Ports: []acl.NamedPort{{Name: "http", Protocol: 6, Port: 8050}}}
	a1 := &acl.Pod{Namespace: "alpha", Name: "a1", IP: netip.MustParseAddr("10.1.0.11")}
	world := acl.NewWorld([]*acl.Pod{a1, b2}, nil, nil)
	in, out, err := acl.NewRenderer(prog, world).Render(b2)
	if err != nil {
		t.Fatal(err)
	}
	list, err := sim.Compile(append(in, out...))
	if err != nil {
		t.Fatal(err)
	}
	// Calico: port 8050 is in notPorts, so the Pass does not match, and
	// the tier's Deny does.
	p := sim.Packet{Protocol: 6, Remote: a1.IP, LocalPort: 8050, RemotePort: reach.EphemeralPort}
	if v := list.Evaluate("In", p); v.Allowed {
		t.Errorf("windows: a1 -> b2 TCP/8050 allowed by %v; Calico denies it", v.ACL)
	}
	if d, err := reach.NewLinux(prog, world).Evaluate(b2, "In", p); err != nil || d.Allowed {
		t.Errorf("linux: a1 -> b2 TCP/8050 allowed (%+v, %v); Calico denies it", d, err)
	}
}
