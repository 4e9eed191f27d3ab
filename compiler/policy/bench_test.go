package policy_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/selector"
)

// BenchmarkRenderNode renders the ingress and egress ACL lists of one
// node's 110 endpoints from 2,000 policies over a 30,000-pod inventory
// (bigWorkload). An op is the 110 renders; the target is 100 ms.
//
//   - cold: a new Renderer each op, so every selector is parsed and every
//     IP set computed over the 30,000 pods again (a compile, or an agent
//     after a restart);
//   - warm: one Renderer, primed outside the timer (an agent re-rendering
//     its node after a change that leaves the sets alone).
func BenchmarkRenderNode(b *testing.B) {
	w := generateWorkload(bigWorkload)
	prog := compileOK(b, &w.manifests)
	if n := len(w.manifests.NetworkPolicies) + len(w.manifests.CalicoPolicies); n != 2000 {
		b.Fatalf("%d policies, want 2,000", n)
	}
	world := acl.NewWorld(w.pods, w.namespaces, w.hostAddrs)
	if len(world.Pods) != 30_000 || len(w.node) != 110 {
		b.Fatalf("%d pods, %d on the node; want 30,000 and 110", len(world.Pods), len(w.node))
	}
	report := func(b *testing.B, acls, most int) {
		b.ReportMetric(float64(acls), "acls/op")
		b.ReportMetric(float64(most), "max-acls/endpoint")
	}
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		var acls, most int
		for b.Loop() {
			acls, most = renderNode(b, acl.NewRenderer(prog, world), w.node)
		}
		report(b, acls, most)
	})
	b.Run("warm", func(b *testing.B) {
		b.ReportAllocs()
		r := acl.NewRenderer(prog, world)
		renderNode(b, r, w.node)
		var acls, most int
		for b.Loop() {
			acls, most = renderNode(b, r, w.node)
		}
		report(b, acls, most)
	})
}

// renderNode renders every endpoint of a node: the ACLs in all, and the
// most of one endpoint.
func renderNode(tb testing.TB, r *acl.Renderer, node []*acl.Pod) (acls, most int) {
	for _, p := range node {
		in, out, err := r.Render(p)
		if err != nil {
			tb.Fatalf("%s: %v", p.Key(), err)
		}
		acls += len(in) + len(out)
		most = max(most, len(in)+len(out))
	}
	return acls, most
}

// aclCount measures a rendering. Records are ACLs (Switch ACLs, but not
// allow-host-to-endpoint, which both forms carry alike); rule records are
// those made from a policy rule (not a tier's end, a profile or the
// allow-all of an endpoint no policy applies to); address entries are the
// addresses listed in LocalAddresses and RemoteAddresses.
type aclCount struct {
	records, ruleRecords, addrEntries int
}

func (c *aclCount) add(d aclCount) {
	c.records += d.records
	c.ruleRecords += d.ruleRecords
	c.addrEntries += d.addrEntries
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// countOurs counts what the renderer emitted for one endpoint.
func countOurs(acls []plan.ACL) aclCount {
	var c aclCount
	for _, a := range acls {
		if a.RuleType != "Switch" || a.Id == "allow-host-to-endpoint" {
			continue
		}
		c.records++
		if !strings.HasPrefix(a.Id, "tier-") && !strings.HasPrefix(a.Id, "no-policy-") && !strings.HasPrefix(a.Id, "profile-") {
			c.ruleRecords++
		}
		for _, s := range []string{a.LocalAddresses, a.RemoteAddresses} {
			if s != "" {
				c.addrEntries += strings.Count(s, ",") + 1
			}
		}
	}
	return c
}

// naiveCounter counts the ACLs of a naive rendering, as Felix for Windows
// does it: every endpoint a policy's selector selects gets every rule of
// the policy, in each tier that applies, followed by the tier's end; the
// rule's selectors are expanded into the full member lists of their IP
// sets on both sides (a destination selector of an ingress rule becomes
// LocalAddresses, whatever the endpoint), cut into chunks of 4,000
// addresses, one record per chunk of the cross product. A rule whose set
// is empty is dropped (Felix's ErrRuleIsNoOp). An endpoint no policy
// applies to in a direction gets one record.
//
// To keep the ratio a lower bound, the naive count is generous to the
// naive form: a Pass rule counts as one rule (Felix would expand it into
// the next tier), named ports as one port list, and profiles as one
// record.
type naiveCounter struct {
	prog    *plan.Program
	world   *acl.World
	sels    map[string]selector.Selector
	members map[string][]netip.Addr
}

func newNaiveCounter(prog *plan.Program, world *acl.World) *naiveCounter {
	return &naiveCounter{prog: prog, world: world, sels: map[string]selector.Selector{}, members: map[string][]netip.Addr{}}
}

func (n *naiveCounter) match(tb testing.TB, sel string, labels map[string]string) bool {
	s, ok := n.sels[sel]
	if !ok {
		var err error
		if s, err = selector.Parse(sel); err != nil {
			tb.Fatalf("selector %q: %v", sel, err)
		}
		n.sels[sel] = s
	}
	return s.Evaluate(labels)
}

// addrs returns the addresses of the pods m's endpoint constraints select.
func (n *naiveCounter) addrs(tb testing.TB, m *plan.Match) []netip.Addr {
	key := m.Namespace + "|" + m.Selector + "|" + m.NamespaceSelector + "|" + m.NotSelector
	if a, ok := n.members[key]; ok {
		return a
	}
	var out []netip.Addr
	for _, p := range n.world.Pods {
		if m.Namespace != "" && p.Namespace != m.Namespace {
			continue
		}
		if m.NamespaceSelector != "" && !n.match(tb, m.NamespaceSelector, n.world.NamespaceLabels(p.Namespace)) {
			continue
		}
		if m.Selector != "" && !n.match(tb, m.Selector, n.world.EndpointLabels(p)) {
			continue
		}
		if m.NotSelector != "" && n.match(tb, m.NotSelector, n.world.EndpointLabels(p)) {
			continue
		}
		out = append(out, p.IP)
	}
	n.members[key] = out
	return out
}

// side returns how many addresses a side lists, and whether it is any.
func (n *naiveCounter) side(tb testing.TB, m *plan.Match) (count int, any bool) {
	if m.Selector == "" && m.Namespace == "" && m.NamespaceSelector == "" && m.NotSelector == "" {
		if m.Nets == nil {
			return 0, true
		}
		return len(m.Nets), false
	}
	for _, a := range n.addrs(tb, m) {
		if m.Nets == nil || containsAddr(m.Nets, a) {
			count++
		}
	}
	return count, false
}

func containsAddr(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func chunks(count int, any bool) int {
	if any {
		return 1
	}
	return (count + acl.ChunkSize - 1) / acl.ChunkSize
}

func portChunks(m *plan.Match) int {
	if m.Ports == nil && m.NamedPorts == nil {
		return 1
	}
	return max(1, chunks(len(m.Ports)+len(m.NamedPorts), false))
}

// rule counts one rule's records and address entries on one endpoint.
func (n *naiveCounter) rule(tb testing.TB, r *plan.PolicyRule) aclCount {
	l, lAny := n.side(tb, &r.Local)
	rm, rAny := n.side(tb, &r.Remote)
	lc, rc := chunks(l, lAny), chunks(rm, rAny)
	ports := portChunks(&r.Local) * portChunks(&r.Remote)
	recs := lc * rc * ports
	return aclCount{records: recs, ruleRecords: recs, addrEntries: (l*rc + rm*lc) * ports}
}

// endpoint counts both directions of one endpoint.
func (n *naiveCounter) endpoint(tb testing.TB, ep *acl.Pod) aclCount {
	var c aclCount
	for _, ingress := range []bool{true, false} {
		applied := false
		for _, t := range n.prog.Tiers {
			tierApplies := false
			for i := range t.Policies {
				pol := &t.Policies[i]
				if ingress && !pol.Ingress || !ingress && !pol.Egress {
					continue
				}
				if !n.match(tb, pol.Selector, n.world.EndpointLabels(ep)) ||
					pol.NamespaceSelector != "" && !n.match(tb, pol.NamespaceSelector, n.world.NamespaceLabels(ep.Namespace)) {
					continue
				}
				tierApplies = true
				rules := pol.IngressRules
				if !ingress {
					rules = pol.EgressRules
				}
				for j := range rules {
					c.add(n.rule(tb, &rules[j]))
				}
			}
			if tierApplies {
				applied = true
				c.records++ // the tier's end
			}
		}
		if !applied {
			c.records++ // the profile
		}
	}
	return c
}

// savings renders every endpoint of world both ways.
func savings(tb testing.TB, prog *plan.Program, world *acl.World) (ours, naive aclCount) {
	r := acl.NewRenderer(prog, world)
	nc := newNaiveCounter(prog, world)
	for _, p := range world.Pods {
		in, out, err := r.Render(p)
		if err != nil {
			tb.Fatalf("%s: %v", p.Key(), err)
		}
		ours.add(countOurs(in))
		ours.add(countOurs(out))
		naive.add(nc.endpoint(tb, p))
	}
	return ours, naive
}

func reportSavings(b *testing.B, ours, naive aclCount) {
	b.ReportMetric(float64(ours.records), "ours-acls")
	b.ReportMetric(float64(naive.records), "naive-acls")
	b.ReportMetric(ratio(naive.records, ours.records), "naive/ours-acls")
	b.ReportMetric(ratio(naive.ruleRecords, ours.ruleRecords), "naive/ours-rule-acls")
	b.ReportMetric(ratio(naive.addrEntries, ours.addrEntries), "naive/ours-addrs")
}

// BenchmarkACLSavings counts, over the 1,000 endpoints of smallWorkload,
// the ACLs the renderer emits against the naive rendering (naiveCounter),
// for the policy mix and for the reference's inefficient policy alone. An
// op renders every endpoint once.
func BenchmarkACLSavings(b *testing.B) {
	w := generateWorkload(smallWorkload)
	world := acl.NewWorld(w.pods, w.namespaces, w.hostAddrs)
	for _, c := range []struct {
		name string
		m    func() *plan.Program
	}{
		{"mix", func() *plan.Program { return compileOK(b, &w.manifests) }},
		{"inefficient", func() *plan.Program { return inefficientProgram(b) }},
	} {
		prog := c.m()
		b.Run(c.name, func(b *testing.B) {
			var ours, naive aclCount
			for b.Loop() {
				ours, naive = savings(b, prog, world)
			}
			reportSavings(b, ours, naive)
		})
	}
}
