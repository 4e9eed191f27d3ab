package access

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/reach"
)

// Verdicts as a delta writes them.
const (
	Allowed = "allowed"
	Denied  = "denied"
)

// Change is one connection whose verdict differs between two
// compilations.
type Change struct {
	From     string `json:"from"`
	To       string `json:"to"`
	Protocol string `json:"protocol"`
	Port     uint16 `json:"port"`
	Before   string `json:"before"` // Allowed or Denied
	After    string `json:"after"`
	// DecidedBy names, on each side, the end whose decision made the
	// verdict: the one that denies, or for an allowed connection the one
	// that denies on the other side.
	DecidedBy Deciders `json:"decidedBy"`
}

// Deciders are the deciding end before and after.
type Deciders struct {
	Before Decider `json:"before"`
	After  Decider `json:"after"`
}

// Decider is one end's decision: the source's egress or the destination's
// ingress.
type Decider struct {
	Direction string `json:"direction"` // "egress" (of From) or "ingress" (of To)
	Explanation
}

// Delta is what a change does to access.
type Delta struct {
	// Changes: newly denied first, then newly allowed; each by from, to,
	// protocol and port.
	Changes []Change `json:"changes"`
	// Endpoints is how many endpoints changed (their ACL lists, or the
	// policies that decide them on Linux) and were evaluated against every
	// other; Pods is how many pods both sides have.
	Endpoints int `json:"endpointsEvaluated"`
	Pods      int `json:"pods"`
	// Ports says which ports were probed.
	Ports string `json:"ports"`
}

// Diff computes the connections whose verdict differs from base to head.
//
// Only pairs with a changed end are decided: a Windows endpoint whose ACL
// list changed, a Linux endpoint that a changed policy applies to on
// either side (every Linux endpoint when pod or namespace labels
// changed). Pods on one side only are left out. Each pair is probed on TCP
// and UDP at every port the policies of either side name, 80, and every
// container port (SCTP where a rule names it): the ports matrix probes,
// and those pods listen on.
//
// The cost follows the change: the changed end is decided first, once per
// class of peers it cannot tell apart (same namespace, labels and ports;
// same address where its rules match addresses) and of ports its rules
// cannot tell apart; the other end only where the changed end's decision
// differs.
func Diff(base, head *Model) (*Delta, error) {
	changed, byPolicy := changedEndpoints(base, head)
	probes := probeSet(base, head)
	var keys, changedKeys []string
	for _, k := range head.Keys {
		if base.Endpoints[k] != nil {
			keys = append(keys, k)
			if changed[k] {
				changedKeys = append(changedKeys, k)
			}
		}
	}
	d := &Delta{Changes: []Change{}, Pods: len(keys), Endpoints: len(changedKeys),
		Ports: fmt.Sprintf("TCP and UDP on %s: every port the policies name, 80, and every container port", plural(len(probes.ports), "port"))}
	e := &evaluator{base: base, head: head, changed: changed, byPolicy: byPolicy, pols: changedPolicies(base.Program, head.Program)}
	// Both ends changed: each pair in full.
	for _, from := range changedKeys {
		for _, to := range changedKeys {
			if from == to {
				continue
			}
			for _, pr := range probes.all {
				c, ok, err := e.pair(from, to, pr.proto, pr.port)
				if err != nil {
					return nil, err
				}
				if ok {
					d.Changes = append(d.Changes, c)
				}
			}
		}
	}
	// One end changed: by classes.
	for _, c := range changedKeys {
		for _, egress := range []bool{true, false} {
			more, err := e.oneChanged(c, egress, keys, probes)
			if err != nil {
				return nil, err
			}
			d.Changes = append(d.Changes, more...)
		}
	}
	slices.SortFunc(d.Changes, func(x, y Change) int {
		return cmp.Or(-cmp.Compare(x.After, y.After), // "denied" first
			cmp.Compare(x.From, y.From), cmp.Compare(x.To, y.To), cmp.Compare(x.Protocol, y.Protocol), cmp.Compare(x.Port, y.Port))
	})
	return d, nil
}

type evaluator struct {
	base, head *Model
	changed    map[string]bool
	byPolicy   map[string]bool // changed by the changed policies alone
	pols       changedSets
	groups     [][]string // unchanged endpoints by labels (labelGroups)
	named      map[string]map[uint16]bool
}

// oneChanged finds the changes of the pairs of the changed endpoint ck
// with every unchanged one, ck being the source (egress) or the
// destination.
func (e *evaluator) oneChanged(ck string, egress bool, keys []string, probes *probes) ([]Change, error) {
	bC, hC := e.base.Endpoints[ck], e.head.Endpoints[ck]
	skip, all, only, changedRules, err := e.policyPorts(ck, egress)
	if err != nil || skip {
		return nil, err
	}
	bounds, nets, err := e.boundaries(ck, egress)
	if err != nil {
		return nil, err
	}
	// Classes of ports: the probes that fall in the same ranges of ck's rules.
	type class struct{ probes []probe }
	var classes []*class
	byPortSig := map[string]*class{}
	for _, pr := range probes.all {
		if !all && !only[pr.port] {
			continue
		}
		sig := bounds.signature(pr)
		c := byPortSig[sig]
		if c == nil {
			c = &class{}
			byPortSig[sig] = c
			classes = append(classes, c)
		}
		c.probes = append(c.probes, pr)
	}
	// Classes of peers: the unchanged peers with the same labels (see
	// labelGroups), split by the address lists of ck's rules they are in;
	// on Windows, where an ACL matches addresses, each peer alone. Where
	// only the changed rules can decide differently (policyPorts), a class
	// none of them matches is left out.
	windows := bC.OS == "windows" || hC.OS == "windows"
	var groups [][]string
	for _, lg := range e.labelGroups(keys) {
		if !all && !netsIn(changedRules) {
			m, err := e.matchesAny(changedRules, lg[0])
			if err != nil {
				return nil, err
			}
			if !m {
				continue
			}
		}
		if windows {
			for _, x := range lg {
				groups = append(groups, []string{x})
			}
			continue
		}
		sub := map[string]int{}
		first := len(groups)
		for _, x := range lg {
			sig := netsSignature(nets, e.head.Endpoints[x].Pod.IP)
			i, ok := sub[sig]
			if !ok {
				i = len(groups)
				sub[sig] = i
				groups = append(groups, nil)
			}
			groups[i] = append(groups[i], x)
		}
		if !all && netsIn(changedRules) {
			kept := groups[:first]
			for _, g := range groups[first:] {
				m, err := e.matchesAny(changedRules, g[0])
				if err != nil {
					return nil, err
				}
				if m {
					kept = append(kept, g)
				}
			}
			groups = kept
		}
	}
	var out []Change
	for _, g := range groups {
		x0 := g[0]
		if x0 == ck {
			continue
		}
		for _, cl := range classes {
			rep := cl.probes[0]
			dB, err := e.base.Decider.Direction(bC, e.base.Endpoints[x0], egress, rep.proto, rep.port)
			if err != nil {
				return nil, err
			}
			dH, err := e.head.Decider.Direction(hC, e.head.Endpoints[x0], egress, rep.proto, rep.port)
			if err != nil {
				return nil, err
			}
			if dB.Allowed == dH.Allowed {
				continue
			}
			// ck's end decides differently: the connection changes where
			// the peer's end (the same on both sides) allows.
			dir := "ingress"
			if egress {
				dir = "egress"
			}
			for _, x := range g {
				hX := e.head.Endpoints[x]
				for _, pr := range cl.probes {
					other, err := e.head.Decider.Direction(hX, hC, !egress, pr.proto, pr.port)
					if err != nil {
						return nil, err
					}
					if !other.Allowed {
						continue
					}
					from, to := ck, x
					if !egress {
						from, to = x, ck
					}
					// The explanation is the representative's: ck's rules
					// cannot tell this peer and port from it.
					bs, hs := dB, dH
					bs.Endpoint, hs.Endpoint = bC, hC
					out = append(out, Change{From: from, To: to, Protocol: protocolName(pr.proto), Port: pr.port,
						Before: verdict(dB.Allowed), After: verdict(dH.Allowed),
						DecidedBy: Deciders{Before: Decider{dir, Explain(bs, e.base.Origins)}, After: Decider{dir, Explain(hs, e.head.Origins)}}})
				}
			}
		}
	}
	return out, nil
}

// labelGroups groups the unchanged endpoints by what a Linux rule can
// read of them besides their address: namespace, labels, namespace labels
// and container ports, on both sides (computed once).
func (e *evaluator) labelGroups(keys []string) [][]string {
	if e.groups != nil {
		return e.groups
	}
	byKey := map[string]int{}
	for _, x := range keys {
		if e.changed[x] {
			continue
		}
		k := peerLabels(e.base.World, e.base.Endpoints[x].Pod) + "|" + peerLabels(e.head.World, e.head.Endpoints[x].Pod)
		i, ok := byKey[k]
		if !ok {
			i = len(e.groups)
			byKey[k] = i
			e.groups = append(e.groups, nil)
		}
		e.groups[i] = append(e.groups[i], x)
	}
	return e.groups
}

// netsSignature says which of the address lists hold a.
func netsSignature(nets [][]netip.Prefix, a netip.Addr) string {
	sig := make([]byte, len(nets))
	for i, n := range nets {
		sig[i] = '0'
		if slices.ContainsFunc(n, func(p netip.Prefix) bool { return p.Contains(a) }) {
			sig[i] = '1'
		}
	}
	return string(sig)
}

// netsIn reports whether any of the rules matches peers by address.
func netsIn(rules [2][]*plan.PolicyRule) bool {
	for _, rs := range rules {
		for _, r := range rs {
			if r.Remote.Nets != nil {
				return true
			}
		}
	}
	return false
}

func peerLabels(w *acl.World, p *acl.Pod) string {
	var b strings.Builder
	writeString(&b, p.Namespace)
	writeLabels(&b, w.EndpointLabels(p))
	writeLabels(&b, w.NamespaceLabels(p.Namespace))
	for _, np := range p.Ports {
		writeString(&b, np.Name)
		fmt.Fprintf(&b, "%d/%d,", np.Protocol, np.Port)
	}
	return b.String()
}

// writeLabels writes l in key order, its size first: with writeString's
// length prefixes no two label maps write the same bytes, whatever they
// hold.
func writeLabels(b *strings.Builder, l map[string]string) {
	fmt.Fprintf(b, "%d{", len(l))
	for _, k := range slices.Sorted(maps.Keys(l)) {
		writeString(b, k)
		writeString(b, l[k])
	}
}

// writeString writes s with its length before it.
func writeString(b *strings.Builder, s string) {
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteByte(':')
	b.WriteString(s)
}

// portBounds are the port ranges an endpoint's rules or ACLs test: ports
// inside the same ones decide alike.
type portBounds struct {
	ranges []plan.PortRange
	// named: the rules name ports, which resolve to container ports; each
	// container port number is then a class of its own.
	named          bool
	containerPorts map[uint16]bool
}

func (b *portBounds) signature(pr probe) string {
	sig := make([]byte, 0, len(b.ranges)+8)
	sig = append(sig, byte(pr.proto))
	for _, r := range b.ranges {
		if r.First <= pr.port && pr.port <= r.Last {
			sig = append(sig, '1')
		} else {
			sig = append(sig, '0')
		}
	}
	if b.named && b.containerPorts[pr.port] {
		sig = fmt.Appendf(sig, "#%d", pr.port)
	}
	return string(sig)
}

// boundaries collects the port ranges ck's decisions in a direction can
// depend on, on both sides, and the address lists its rules match (Linux).
func (e *evaluator) boundaries(ck string, egress bool) (*portBounds, [][]netip.Prefix, error) {
	b := &portBounds{containerPorts: map[uint16]bool{}}
	var nets [][]netip.Prefix
	for _, m := range []*Model{e.base, e.head} {
		ep := m.Endpoints[ck]
		for _, p := range m.World.Pods {
			for _, np := range p.Ports {
				b.containerPorts[np.Port] = true
			}
		}
		if ep.OS == "windows" {
			for _, a := range m.acls[ck] {
				for _, s := range []string{a.LocalPorts, a.RemotePorts} {
					rs, err := parsePorts(s)
					if err != nil {
						return nil, nil, fmt.Errorf("pod %s: ACL %s: %v", ck, a.Id, err)
					}
					b.ranges = append(b.ranges, rs...)
				}
			}
			continue
		}
		pols, err := m.Decider.Linux().Applying(ep.Pod, !egress)
		if err != nil {
			return nil, nil, fmt.Errorf("pod %s: %v", ck, err)
		}
		for _, pol := range pols {
			rules := pol.EgressRules
			if !egress {
				rules = pol.IngressRules
			}
			for _, r := range rules {
				for _, mt := range []*plan.Match{&r.Local, &r.Remote} {
					b.ranges = append(b.ranges, mt.Ports...)
					b.named = b.named || len(mt.NamedPorts) > 0
					if mt.Nets != nil {
						nets = append(nets, mt.Nets)
					}
				}
			}
		}
	}
	slices.SortFunc(b.ranges, func(x, y plan.PortRange) int {
		return cmp.Or(cmp.Compare(x.First, y.First), cmp.Compare(x.Last, y.Last))
	})
	b.ranges = slices.Compact(b.ranges)
	return b, nets, nil
}

// parsePorts reads an ACL's port list: "80", "80,443", "1000-2000".
func parsePorts(s string) ([]plan.PortRange, error) {
	if s == "" {
		return nil, nil
	}
	var out []plan.PortRange
	for _, f := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(f), "-")
		a, err := strconv.ParseUint(lo, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("port list %q: %v", s, err)
		}
		z := a
		if isRange {
			if z, err = strconv.ParseUint(hi, 10, 16); err != nil {
				return nil, fmt.Errorf("port list %q: %v", s, err)
			}
		}
		out = append(out, plan.PortRange{First: uint16(a), Last: uint16(z)})
	}
	return out, nil
}

// pair decides from -> to on both sides, in full.
func (e *evaluator) pair(from, to string, proto int, port uint16) (Change, bool, error) {
	bSrc, bDst := e.base.Endpoints[from], e.base.Endpoints[to]
	hSrc, hDst := e.head.Endpoints[from], e.head.Endpoints[to]
	bv, err := e.base.Decider.Decide(bSrc, bDst, proto, port)
	if err != nil {
		return Change{}, false, err
	}
	hv, err := e.head.Decider.Decide(hSrc, hDst, proto, port)
	if err != nil {
		return Change{}, false, err
	}
	if bv.Allowed == hv.Allowed {
		return Change{}, false, nil
	}
	// The deciding end: the one that denies; for the allowed side, the
	// one that denies on the other.
	pick := func(own, other reach.Verdict, origins map[string]Origin) Decider {
		switch {
		case !own.Egress.Allowed:
			return Decider{"egress", Explain(own.Egress, origins)}
		case !own.Ingress.Allowed:
			return Decider{"ingress", Explain(own.Ingress, origins)}
		case !other.Egress.Allowed:
			return Decider{"egress", Explain(own.Egress, origins)}
		}
		return Decider{"ingress", Explain(own.Ingress, origins)}
	}
	return Change{From: from, To: to, Protocol: protocolName(proto), Port: port,
		Before: verdict(bv.Allowed), After: verdict(hv.Allowed),
		DecidedBy: Deciders{Before: pick(bv, hv, e.base.Origins), After: pick(hv, bv, e.head.Origins)}}, true, nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func verdict(allowed bool) string {
	if allowed {
		return Allowed
	}
	return Denied
}

func protocolName(p int) string {
	switch p {
	case 6:
		return "TCP"
	case 17:
		return "UDP"
	case 132:
		return "SCTP"
	}
	return fmt.Sprint(p)
}

// changedEndpoints finds the endpoints whose decisions may differ: on
// Windows, an ACL list that changed; on Linux, a changed policy that
// applies on either side; anywhere, a pod whose node, OS, address, labels
// or ports changed. A change of any pod's or namespace's labels can change
// what Linux rules match, so it makes every Linux endpoint changed.
//
// byPolicy holds the Linux endpoints changed by the changed policies alone
// (no pod or label changed), whose decisions can differ only where those
// policies' rules match (see policyPorts).
func changedEndpoints(base, head *Model) (changed, byPolicy map[string]bool) {
	changed, byPolicy = map[string]bool{}, map[string]bool{}
	worldChanged := false
	for _, k := range head.Keys {
		b, h := base.Endpoints[k], head.Endpoints[k]
		if b == nil {
			continue
		}
		if b.OS != h.OS || b.Node != h.Node || !samePod(base.World, b.Pod, head.World, h.Pod) {
			changed[k] = true
			worldChanged = true
			continue
		}
		if h.OS == reach.OSWindows && base.aclKeys[k] != head.aclKeys[k] {
			changed[k] = true
		}
	}
	if !worldChanged {
		worldChanged = !sameWorld(base.World, head.World)
	}
	pols := changedPolicies(base.Program, head.Program)
	for _, k := range head.Keys {
		b, h := base.Endpoints[k], head.Endpoints[k]
		if b == nil || h.OS != reach.OSLinux || changed[k] {
			continue
		}
		if worldChanged {
			changed[k] = true
		} else if appliesAny(base, b.Pod, pols.base) || appliesAny(head, h.Pod, pols.head) {
			changed[k], byPolicy[k] = true, true
		}
	}
	return changed, byPolicy
}

// policyPorts says at which destination ports the decision of ck, changed
// by policies alone, can differ in a direction. A policy whose rules do
// not match a packet decides nothing, so where every changed policy that
// applies to ck applies on both sides, in the same tier, and each of its
// rules (both versions) names its destination ports, only those ports
// can change: skip when no changed policy applies in this direction, all
// when one applies on one side only, moves tier, or has a rule on any
// port.
//
// rules are the changed rules that apply, by side: a peer that none of
// them matches is decided alike on both sides.
func (e *evaluator) policyPorts(ck string, egress bool) (skip, all bool, ports map[uint16]bool, rules [2][]*plan.PolicyRule, err error) {
	if !e.byPolicy[ck] {
		return false, true, nil, rules, nil
	}
	type applying struct{ b, h string } // the tier on each side, "" if it does not apply
	seen := map[string]*applying{}
	for si, side := range []struct {
		m    *Model
		pols []*plan.NetworkPolicy
		head bool
	}{{e.base, e.pols.base, false}, {e.head, e.pols.head, true}} {
		l, pod, tiers := side.m.Decider.Linux(), side.m.Endpoints[ck].Pod, tierOf(side.m.Program)
		for _, pol := range side.pols {
			ok, err := l.Applies(pol, pod, !egress)
			if err != nil {
				return false, false, nil, rules, fmt.Errorf("pod %s: policy %s: %v", ck, pol.ID, err)
			}
			if !ok {
				continue
			}
			a := seen[pol.ID]
			if a == nil {
				a = &applying{}
				seen[pol.ID] = a
			}
			if side.head {
				a.h = tiers[pol.ID]
			} else {
				a.b = tiers[pol.ID]
			}
			rs := pol.IngressRules
			if egress {
				rs = pol.EgressRules
			}
			for i := range rs {
				rules[si] = append(rules[si], &rs[i])
			}
		}
	}
	if len(seen) == 0 {
		return true, false, nil, rules, nil
	}
	for _, a := range seen {
		if a.b == "" || a.b != a.h {
			return false, true, nil, rules, nil
		}
	}
	ports = map[uint16]bool{}
	for _, r := range append(slices.Clone(rules[0]), rules[1]...) {
		m := &r.Local // an ingress rule's destination is the endpoint
		if egress {
			m = &r.Remote
		}
		if m.Ports == nil && m.NamedPorts == nil {
			return false, true, nil, rules, nil
		}
		for _, pr := range m.Ports {
			if pr.Last-pr.First > 256 {
				return false, true, nil, rules, nil
			}
			for p := int(pr.First); p <= int(pr.Last); p++ {
				ports[uint16(p)] = true
			}
		}
		for _, name := range m.NamedPorts {
			for p := range e.namedPorts()[name] {
				ports[p] = true
			}
		}
	}
	return false, false, ports, rules, nil
}

// matchesAny reports whether any of the changed rules can match traffic
// with peer x, on its side.
func (e *evaluator) matchesAny(rules [2][]*plan.PolicyRule, x string) (bool, error) {
	for si, m := range []*Model{e.base, e.head} {
		l, pod := m.Decider.Linux(), m.Endpoints[x].Pod
		for _, r := range rules[si] {
			ok, err := l.MatchesPeer(&r.Remote, pod)
			if ok || err != nil {
				return true, err
			}
		}
	}
	return false, nil
}

// namedPorts maps container port names to their numbers, on both sides.
func (e *evaluator) namedPorts() map[string]map[uint16]bool {
	if e.named == nil {
		e.named = map[string]map[uint16]bool{}
		for _, m := range []*Model{e.base, e.head} {
			for _, p := range m.World.Pods {
				for _, np := range p.Ports {
					if e.named[np.Name] == nil {
						e.named[np.Name] = map[uint16]bool{}
					}
					e.named[np.Name][np.Port] = true
				}
			}
		}
	}
	return e.named
}

// tierOf maps each policy of a program to its tier.
func tierOf(p *plan.Program) map[string]string {
	m := map[string]string{}
	if p != nil {
		for _, t := range p.Tiers {
			for _, pol := range t.Policies {
				m[pol.ID] = t.Name
			}
		}
	}
	return m
}

func appliesAny(m *Model, pod *acl.Pod, pols []*plan.NetworkPolicy) bool {
	l := m.Decider.Linux()
	for _, p := range pols {
		for _, ingress := range []bool{true, false} {
			// A selector that does not parse decides nothing: the compile
			// reported it.
			if ok, err := l.Applies(p, pod, ingress); ok || err != nil {
				return true
			}
		}
	}
	return false
}

// samePod reports whether what a decision reads of a pod — its address,
// labels, namespace labels and container ports — is the same in two worlds.
func samePod(aw *acl.World, a *acl.Pod, bw *acl.World, b *acl.Pod) bool {
	return a.IP == b.IP && slices.Equal(a.Ports, b.Ports) &&
		maps.Equal(aw.EndpointLabels(a), bw.EndpointLabels(b)) &&
		maps.Equal(aw.NamespaceLabels(a.Namespace), bw.NamespaceLabels(b.Namespace))
}

// sameWorld reports whether two worlds hold the same pods with the same
// labels, namespace labels and ports, to tell whether a Linux rule's
// selectors may match other peers.
func sameWorld(a, b *acl.World) bool {
	if len(a.Pods) != len(b.Pods) {
		return false
	}
	for i, p := range a.Pods {
		q := b.Pods[i]
		if p.Namespace != q.Namespace || p.Name != q.Name || !samePod(a, p, b, q) {
			return false
		}
	}
	return true
}

// changedSets are the changed policies, as each program has them.
type changedSets struct {
	base, head []*plan.NetworkPolicy
}

// changedPolicies lists the policies that differ: added, removed, changed
// in content, or in a tier whose default action, place or policy order
// changed.
func changedPolicies(b, h *plan.Program) changedSets {
	bc, hc := policyContexts(b), policyContexts(h)
	var out changedSets
	for id, c := range bc {
		if o, ok := hc[id]; !ok || o.key != c.key {
			out.base = append(out.base, c.pol)
		}
	}
	for id, c := range hc {
		if o, ok := bc[id]; !ok || o.key != c.key {
			out.head = append(out.head, c.pol)
		}
	}
	return out
}

type policyContext struct {
	pol *plan.NetworkPolicy
	key string
}

// policyContexts keys each policy by its content and its tier's: name,
// default action, place among the tiers and the order of its policies.
// Source positions are left out.
func policyContexts(p *plan.Program) map[string]policyContext {
	m := map[string]policyContext{}
	if p == nil {
		return m
	}
	var tierNames []string
	for _, t := range p.Tiers {
		tierNames = append(tierNames, t.Name)
	}
	for ti := range p.Tiers {
		t := &p.Tiers[ti]
		var ids []string
		for _, pol := range t.Policies {
			ids = append(ids, pol.ID)
		}
		tierKey := fmt.Sprintf("%s|%s|%d|%s|%s", t.Name, t.DefaultAction, ti, strings.Join(tierNames, ","), strings.Join(ids, ","))
		for pi := range t.Policies {
			pol := &t.Policies[pi]
			c := *pol
			c.Source = ""
			c.IngressRules, c.EgressRules = noSources(pol.IngressRules), noSources(pol.EgressRules)
			js, _ := json.Marshal(c)
			m[pol.ID] = policyContext{pol: pol, key: tierKey + "|" + string(js)}
		}
	}
	return m
}

func noSources(rs []plan.PolicyRule) []plan.PolicyRule {
	out := slices.Clone(rs)
	for i := range out {
		out[i].Source = ""
	}
	return out
}

// probe is one protocol and destination port.
type probe struct {
	proto int
	port  uint16
}

// probes are the protocols and ports every pair is probed on.
type probes struct {
	all   []probe // sorted by protocol, then port
	ports []uint16
}

// probeSet is TCP and UDP at every port the rules of either program name
// (a range at its ends and, when short, every port in it), 80 (as matrix
// probes), and every container port of either side's pods; SCTP at the
// ports SCTP rules name and SCTP container ports.
func probeSet(base, head *Model) *probes {
	set := map[probe]bool{}
	ports := map[uint16]bool{80: true}
	add := func(proto int, port uint16) {
		if proto == 132 {
			set[probe{132, port}] = true
		}
		ports[port] = true
	}
	for _, m := range []*Model{base, head} {
		if m.Program != nil {
			for _, t := range m.Program.Tiers {
				for _, pol := range t.Policies {
					for _, r := range append(slices.Clone(pol.IngressRules), pol.EgressRules...) {
						for _, pr := range append(slices.Clone(r.Local.Ports), r.Remote.Ports...) {
							add(r.Protocol, pr.First)
							add(r.Protocol, pr.Last)
							if pr.Last-pr.First < 16 {
								for p := int(pr.First); p <= int(pr.Last); p++ {
									add(r.Protocol, uint16(p))
								}
							}
						}
					}
				}
			}
		}
		for _, p := range m.World.Pods {
			for _, np := range p.Ports {
				if np.Port != 0 {
					add(np.Protocol, np.Port)
				}
			}
		}
	}
	out := &probes{ports: slices.Sorted(maps.Keys(ports))}
	for _, p := range out.ports {
		set[probe{6, p}] = true
		set[probe{17, p}] = true
	}
	out.all = slices.Collect(maps.Keys(set))
	slices.SortFunc(out.all, func(x, y probe) int { return cmp.Or(cmp.Compare(x.proto, y.proto), cmp.Compare(x.port, y.port)) })
	return out
}
