package policy_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/sim"
)

// The "inefficient policy" of reference/000 (Network policy efficiency),
// as written there: it applies to all workloads and allows traffic from
// clients to webservers with a source and a destination selector.
const inefficientPolicyYAML = `
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: calico-dest-selector
spec:
  selector: all()
  order: 500
  ingress:
  - action: Allow
    destination:
      selector: role == "webserver"
    source:
      selector: role == "client"
`

// Its hand-optimised rewrite, from the same section: the destination
// selector moved into the policy selector.
const efficientPolicyYAML = `
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: calico-dest-selector
spec:
  selector: role == "webserver"
  order: 500
  ingress:
  - action: Allow
    source:
      selector: role == "client"
`

// A default deny of all ingress, after both (order 1000): the baseline
// under which the two forms allow the same traffic (see
// TestInefficientPolicySpecialised).
const defaultDenyYAML = `
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: default-deny
spec:
  selector: all()
  order: 1000
  types:
  - Ingress
`

func programOf(tb testing.TB, docs ...string) *plan.Program {
	tb.Helper()
	var m intent.Manifests
	for _, d := range docs {
		m.CalicoPolicies = append(m.CalicoPolicies, calicoFromYAML(tb, d))
	}
	return compileOK(tb, &m)
}

func inefficientProgram(tb testing.TB) *plan.Program { return programOf(tb, inefficientPolicyYAML) }

// specialiseWorld is a small cluster: webservers, clients and others in
// three namespaces, with near misses of the two roles.
func specialiseWorld() *acl.World {
	web := []acl.NamedPort{{Name: "http", Protocol: tcp, Port: 80}, {Name: "https", Protocol: tcp, Port: 443}}
	type spec struct {
		ns, name string
		labels   map[string]string
	}
	specs := []spec{
		{"shop", "web-0", map[string]string{"role": "webserver", "app": "shop"}},
		{"shop", "web-1", map[string]string{"role": "webserver", "app": "shop"}},
		{"shop", "client-0", map[string]string{"role": "client", "app": "cart"}},
		{"shop", "db-0", map[string]string{"role": "db", "app": "postgres"}},
		{"blog", "web-0", map[string]string{"role": "webserver", "app": "blog"}},
		{"blog", "client-0", map[string]string{"role": "client"}},
		{"blog", "unlabelled", nil},
		{"blog", "near-web", map[string]string{"role": "webservers"}},
		{"blog", "near-client", map[string]string{"role": "Client"}},
		{"ops", "client-0", map[string]string{"role": "client", "team": "ops"}},
		{"ops", "client-1", map[string]string{"role": "client", "team": "ops"}},
		{"ops", "batch-0", map[string]string{"app": "batch", "webserver": "true"}},
		{"ops", "web-0", map[string]string{"role": "webserver", "team": "ops"}},
	}
	var pods []*acl.Pod
	for i, s := range specs {
		pods = append(pods, &acl.Pod{Namespace: s.ns, Name: s.name, Labels: s.labels,
			IP: netip.AddrFrom4([4]byte{10, 128, byte(i / 4), byte(2 + i%4*60)}), Ports: web})
	}
	namespaces := map[string]map[string]string{"shop": {"team": "shop"}, "blog": {"team": "blog"}, "ops": {"team": "ops"}}
	return acl.NewWorld(pods, namespaces, []netip.Addr{netip.MustParseAddr("10.240.0.10")})
}

// normaliseIDs replaces the policy ids in ACL Ids, so that two forms of
// one policy compare equal whatever they are called.
func normaliseIDs(acls []plan.ACL, prog *plan.Program) []plan.ACL {
	out := slices.Clone(acls)
	for i := range out {
		for _, t := range prog.Tiers {
			for _, p := range t.Policies {
				if rest, ok := strings.CutPrefix(out[i].Id, p.ID+"-"); ok {
					out[i].Id = "<policy>-" + rest
				}
			}
		}
	}
	return out
}

type rendered struct {
	in, out []plan.ACL
	list    *sim.List
}

func renderWorld(t *testing.T, prog *plan.Program, world *acl.World) map[string]rendered {
	t.Helper()
	r := acl.NewRenderer(prog, world)
	res := map[string]rendered{}
	for _, p := range world.Pods {
		in, out, err := r.Render(p)
		if err != nil {
			t.Fatalf("%s: %v", p.Key(), err)
		}
		l, err := sim.Compile(append(slices.Clone(in), out...))
		if err != nil {
			t.Fatalf("%s: the rendered ACLs do not parse: %v", p.Key(), err)
		}
		res[p.Key()] = rendered{normaliseIDs(in, prog), normaliseIDs(out, prog), l}
	}
	return res
}

// probes are the packets of the reachability matrix.
var probes = []struct {
	proto int
	port  uint16
}{{tcp, 80}, {tcp, 443}, {tcp, 8080}, {udp, 53}, {1, 0}}

// matrix decides every probe from every pod to every pod (and from the
// node's host address) with the rendered lists: the source's egress list,
// then the destination's ingress list.
func matrix(world *acl.World, lists map[string]rendered) map[string]bool {
	m := map[string]bool{}
	host := world.HostAddrs[0]
	for _, dst := range world.Pods {
		for _, pr := range probes {
			in := lists[dst.Key()].list.Evaluate("In", sim.Packet{Protocol: pr.proto, Remote: host, LocalPort: pr.port, RemotePort: 40000})
			m[fmt.Sprintf("host -> %s %d/%d", dst.Key(), pr.proto, pr.port)] = in.Allowed
			for _, src := range world.Pods {
				out := lists[src.Key()].list.Evaluate("Out", sim.Packet{Protocol: pr.proto, Remote: dst.IP, LocalPort: 40000, RemotePort: pr.port})
				in := lists[dst.Key()].list.Evaluate("In", sim.Packet{Protocol: pr.proto, Remote: src.IP, LocalPort: pr.port, RemotePort: 40000})
				m[fmt.Sprintf("%s -> %s %d/%d", src.Key(), dst.Key(), pr.proto, pr.port)] = out.Allowed && in.Allowed
			}
		}
	}
	return m
}

// wantMatrix is the reachability the policies mean: the host reaches
// every pod; a pod reaches an isolated pod only if it is a client and the
// destination a webserver.
func wantMatrix(world *acl.World, isolated func(*acl.Pod) bool) map[string]bool {
	m := map[string]bool{}
	for _, dst := range world.Pods {
		for _, pr := range probes {
			m[fmt.Sprintf("host -> %s %d/%d", dst.Key(), pr.proto, pr.port)] = true
			for _, src := range world.Pods {
				m[fmt.Sprintf("%s -> %s %d/%d", src.Key(), dst.Key(), pr.proto, pr.port)] =
					!isolated(dst) || src.Labels["role"] == "client" && dst.Labels["role"] == "webserver"
			}
		}
	}
	return m
}

func diffMatrix(got, want map[string]bool) []string {
	var bad []string
	for k, w := range want {
		if got[k] != w {
			bad = append(bad, fmt.Sprintf("%s: allowed=%v, want %v", k, got[k], w))
		}
	}
	slices.Sort(bad)
	if len(bad) > 10 {
		bad = append(bad[:10], fmt.Sprintf("… %d more", len(bad)-10))
	}
	return bad
}

// TestInefficientPolicySpecialised compiles the reference's inefficient
// policy and its hand-optimised rewrite and renders every endpoint of a
// small cluster with both.
//
// The two are not the same policy on their own: the inefficient one
// selects all() and so isolates every endpoint for ingress (Calico: a
// policy that applies and matches nothing denies), while the rewrite
// selects webservers only and leaves the others open. So:
//
//   - "alone": the ACL lists of the webservers, and every egress list, are
//     identical; a non-webserver's ingress list is one Block (the tier's
//     end) under the inefficient form and the allow-all under the rewrite;
//     the matrices are each what its policy means.
//   - "with default deny": under an ingress default deny (the baseline in
//     which the reference's "allows the same traffic" holds), every list of
//     every endpoint is identical ACL for ACL, and so are the matrices.
func TestInefficientPolicySpecialised(t *testing.T) {
	world := specialiseWorld()
	webserver := func(p *acl.Pod) bool { return p.Labels["role"] == "webserver" }
	all := func(*acl.Pod) bool { return true }

	t.Run("alone", func(t *testing.T) {
		ineff, eff := programOf(t, inefficientPolicyYAML), programOf(t, efficientPolicyYAML)
		a, b := renderWorld(t, ineff, world), renderWorld(t, eff, world)
		for _, p := range world.Pods {
			ra, rb := a[p.Key()], b[p.Key()]
			if d := cmp.Diff(rb.out, ra.out); d != "" {
				t.Errorf("%s: egress lists differ (-rewrite +inefficient):\n%s", p.Key(), d)
			}
			if webserver(p) {
				if d := cmp.Diff(rb.in, ra.in); d != "" {
					t.Errorf("%s: ingress lists differ (-rewrite +inefficient):\n%s", p.Key(), d)
				}
				continue
			}
			// Not a webserver: the inefficient form's rule is specialised
			// away, leaving the tier's end.
			var sw []plan.ACL
			for _, x := range ra.in {
				if x.RuleType == "Switch" && x.Id != "allow-host-to-endpoint" {
					sw = append(sw, x)
				}
			}
			if len(sw) != 1 || sw[0].Action != "Block" || sw[0].RemoteAddresses != "" || sw[0].LocalAddresses != "" {
				t.Errorf("%s is no webserver: the inefficient form's ingress should be one Block of everything, got %+v", p.Key(), sw)
			}
		}
		for name, c := range map[string]struct {
			lists    map[string]rendered
			isolated func(*acl.Pod) bool
		}{"inefficient": {a, all}, "rewrite": {b, webserver}} {
			if bad := diffMatrix(matrix(world, c.lists), wantMatrix(world, c.isolated)); len(bad) > 0 {
				t.Errorf("%s: reachability:\n%s", name, strings.Join(bad, "\n"))
			}
		}
	})

	t.Run("with default deny", func(t *testing.T) {
		ineff := programOf(t, inefficientPolicyYAML, defaultDenyYAML)
		eff := programOf(t, efficientPolicyYAML, defaultDenyYAML)
		a, b := renderWorld(t, ineff, world), renderWorld(t, eff, world)
		acls := 0
		for _, p := range world.Pods {
			ra, rb := a[p.Key()], b[p.Key()]
			acls += len(ra.in) + len(ra.out)
			if d := cmp.Diff(rb.in, ra.in); d != "" {
				t.Errorf("%s: ingress lists differ (-rewrite +inefficient):\n%s", p.Key(), d)
			}
			if d := cmp.Diff(rb.out, ra.out); d != "" {
				t.Errorf("%s: egress lists differ (-rewrite +inefficient):\n%s", p.Key(), d)
			}
			for _, x := range append(slices.Clone(ra.in), ra.out...) {
				if x.LocalAddresses != "" {
					t.Errorf("%s: ACL %s has LocalAddresses %q", p.Key(), x.Id, x.LocalAddresses)
				}
			}
		}
		ma, mb := matrix(world, a), matrix(world, b)
		if d := cmp.Diff(mb, ma); d != "" {
			t.Errorf("reachability differs (-rewrite +inefficient):\n%s", d)
		}
		if bad := diffMatrix(ma, wantMatrix(world, all)); len(bad) > 0 {
			t.Errorf("reachability:\n%s", strings.Join(bad, "\n"))
		}
		t.Logf("%d endpoints, %d ACLs, %d matrix cells identical", len(world.Pods), acls, len(ma))
	})
}

// TestInefficientPolicySavings renders the reference's inefficient policy
// alone over the 1,000 endpoints of smallWorkload and requires the
// renderer to emit at least 10× fewer ACL entries than the naive rendering
// (naiveCounter). An entry is an address HNS must program into an
// endpoint's ACLs: the naive form lists every webserver as LocalAddresses
// and every client as RemoteAddresses on every endpoint; the specialised
// form lists the clients on webservers only. ACL records are counted and
// logged too, but they cannot reach 10×: the policy selects all(), so every
// endpoint keeps its tier-end Block in both forms (3n/(2n+w) < 1.5), and
// the rule's own records fall by n/w, the share of webservers.
func TestInefficientPolicySavings(t *testing.T) {
	w := generateWorkload(smallWorkload)
	world := acl.NewWorld(w.pods, w.namespaces, w.hostAddrs)
	var webservers, clients int
	for _, p := range world.Pods {
		switch p.Labels["role"] {
		case "webserver":
			webservers++
		case "client":
			clients++
		}
	}
	ours, naive := savings(t, inefficientProgram(t), world)
	n := len(world.Pods)
	t.Logf("%d endpoints, %d webservers, %d clients", n, webservers, clients)
	t.Logf("ACL records:      naive %7d  ours %7d  ratio %.2f", naive.records, ours.records, ratio(naive.records, ours.records))
	t.Logf("rule ACL records: naive %7d  ours %7d  ratio %.2f", naive.ruleRecords, ours.ruleRecords, ratio(naive.ruleRecords, ours.ruleRecords))
	t.Logf("address entries:  naive %7d  ours %7d  ratio %.2f", naive.addrEntries, ours.addrEntries, ratio(naive.addrEntries, ours.addrEntries))

	// The counts are known in closed form; check them first, so that a
	// ratio below 10 is about the requirement, not the counting.
	// (Ours lists the clients as prefixes, merging neighbours: at most one
	// entry a client.)
	wantNaive := aclCount{records: 3 * n, ruleRecords: n, addrEntries: n * (webservers + clients)}
	wantOurs := aclCount{records: 2*n + webservers, ruleRecords: webservers, addrEntries: ours.addrEntries}
	if naive != wantNaive || ours != wantOurs || ours.addrEntries > webservers*clients {
		t.Fatalf("counts: naive %+v, want %+v; ours %+v, want %+v (addrEntries ≤ %d)", naive, wantNaive, ours, wantOurs, webservers*clients)
	}

	t.Run("address entries", func(t *testing.T) {
		if r := ratio(naive.addrEntries, ours.addrEntries); r < 10 {
			t.Errorf("naive/ours address entries = %d/%d = %.2f, want ≥ 10 (the ratio is n/w + n/c = %d/%d + %d/%d)",
				naive.addrEntries, ours.addrEntries, r, n, webservers, n, clients)
		}
	})
}
