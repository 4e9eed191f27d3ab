package diff

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// PolicyChange is one network policy that differs between the two policy
// programs: created, deleted, or updated field by field.
type PolicyChange struct {
	ID     string `json:"id"`
	Action Action `json:"action"` // create, update or delete
	// Source is where the policy is written (head's file:line:col; base's
	// for a deleted policy), relative to the working directory when the
	// diff was given the intent directories (Options).
	Source string `json:"source,omitempty"`
	// Fields are the differences: a field path with its values, such as
	// "ingress[0].destination.ports: 80 -> 8080". A rule added or removed
	// is a field with an empty Before or After.
	Fields []Detail `json:"fields,omitempty"`
}

func joinSource(dir, src string) string {
	if dir == "" || src == "" {
		return src
	}
	return path.Join(filepathToSlash(dir), src)
}

func filepathToSlash(s string) string { return strings.ReplaceAll(s, "\\", "/") }

// placed is a policy with its tier and its rank among the policies both
// programs have in that tier.
type placed struct {
	pol  *plan.NetworkPolicy
	tier string
	key  string // the policy as compared: its JSON without source positions
}

func placedPolicies(p *plan.Program) map[string]placed {
	m := map[string]placed{}
	if p == nil {
		return m
	}
	for ti := range p.Tiers {
		t := &p.Tiers[ti]
		for pi := range t.Policies {
			pol := &t.Policies[pi]
			m[pol.ID] = placed{pol: pol, tier: t.Name, key: policyKey(pol)}
		}
	}
	return m
}

// policyKey is a policy's content without where it is written: moving a
// policy within its file is no change.
func policyKey(pol *plan.NetworkPolicy) string {
	c := *pol
	c.Source = ""
	c.IngressRules = stripRules(pol.IngressRules)
	c.EgressRules = stripRules(pol.EgressRules)
	b, _ := json.Marshal(c)
	return string(b)
}

func stripRules(rs []plan.PolicyRule) []plan.PolicyRule {
	out := slices.Clone(rs)
	for i := range out {
		out[i].Source = ""
	}
	return out
}

// programDiff compares two policy programs: the policies created, deleted
// and changed (field by field), and the tiers whose default action
// changed. Reordered but equal input compiles to the same program, so it
// shows nothing.
func programDiff(b, h *plan.Program, opt Options) (pols []PolicyChange, tiers []Detail) {
	bp, hp := placedPolicies(b), placedPolicies(h)
	ids := make([]string, 0, len(bp)+len(hp))
	for id := range bp {
		ids = append(ids, id)
	}
	for id := range hp {
		if _, ok := bp[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	bRank, hRank := commonRanks(b, bp, hp), commonRanks(h, hp, bp)
	for _, id := range ids {
		before, inB := bp[id]
		after, inH := hp[id]
		switch {
		case !inB:
			pols = append(pols, PolicyChange{ID: id, Action: Create, Source: joinSource(opt.HeadDir, after.pol.Source),
				Fields: ruleList(after.pol, false)})
		case !inH:
			pols = append(pols, PolicyChange{ID: id, Action: Delete, Source: joinSource(opt.BaseDir, before.pol.Source),
				Fields: ruleList(before.pol, true)})
		default:
			var f []Detail
			if before.tier != after.tier {
				f = append(f, Detail{Path: "tier", Before: before.tier, After: after.tier})
			} else if bRank[id] != hRank[id] {
				f = append(f, Detail{Path: "order", Before: ordinal(bRank[id]), After: ordinal(hRank[id])})
			}
			if before.key != after.key {
				f = append(f, policyFields(before.pol, after.pol)...)
			}
			if len(f) > 0 {
				pols = append(pols, PolicyChange{ID: id, Action: Update, Source: joinSource(opt.HeadDir, after.pol.Source), Fields: f})
			}
		}
	}
	bt, ht := tierActions(b), tierActions(h)
	for _, name := range sortedKeys(ht) {
		if a, ok := bt[name]; ok && a != ht[name] {
			tiers = append(tiers, Detail{Path: fmt.Sprintf("tier %s defaultAction", name), Before: a, After: ht[name]})
		}
	}
	return pols, tiers
}

func tierActions(p *plan.Program) map[string]string {
	m := map[string]string{}
	if p != nil {
		for _, t := range p.Tiers {
			m[t.Name] = t.DefaultAction
		}
	}
	return m
}

// commonRanks numbers, tier by tier, the policies that the other program
// has in the same tier too: a policy added or removed beside them does not
// move them, a change of their order (Calico's order field) does.
func commonRanks(p *plan.Program, own, other map[string]placed) map[string]int {
	r := map[string]int{}
	if p == nil {
		return r
	}
	for _, t := range p.Tiers {
		n := 0
		for _, pol := range t.Policies {
			if o, ok := other[pol.ID]; ok && o.tier == own[pol.ID].tier {
				n++
				r[pol.ID] = n
			}
		}
	}
	return r
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s in its tier", n, suffix)
}

// ruleList lists a created or deleted policy's rules, one field each.
func ruleList(pol *plan.NetworkPolicy, deleted bool) []Detail {
	var out []Detail
	for _, dir := range []string{"ingress", "egress"} {
		rules := pol.IngressRules
		if dir == "egress" {
			rules = pol.EgressRules
		}
		for _, r := range rules {
			d := Detail{Path: rulePath(dir, r.ID)}
			if deleted {
				d.Before = ruleText(dir, &r)
			} else {
				d.After = ruleText(dir, &r)
			}
			out = append(out, d)
		}
	}
	return out
}

// policyFields compares two versions of one policy.
func policyFields(b, h *plan.NetworkPolicy) []Detail {
	var out []Detail
	field := func(path, before, after string) {
		if before != after {
			out = append(out, Detail{Path: path, Before: before, After: after})
		}
	}
	field("namespace", b.Namespace, h.Namespace)
	field("selector", b.Selector, h.Selector)
	field("namespaceSelector", b.NamespaceSelector, h.NamespaceSelector)
	field("types", types(b), types(h))
	out = append(out, rulesDiff("ingress", b.IngressRules, h.IngressRules)...)
	out = append(out, rulesDiff("egress", b.EgressRules, h.EgressRules)...)
	return out
}

func types(p *plan.NetworkPolicy) string {
	var t []string
	if p.Ingress {
		t = append(t, "Ingress")
	}
	if p.Egress {
		t = append(t, "Egress")
	}
	return strings.Join(t, ", ")
}

// rulesDiff compares one direction's rules. Rules equal in content are
// matched in order (a longest common subsequence), so that a rule inserted
// before others shows as one rule added; the rest pair up by their place
// in the manifest (the rule id) and show field by field, or are added or
// removed.
func rulesDiff(dir string, b, h []plan.PolicyRule) []Detail {
	bk, hk := make([]string, len(b)), make([]string, len(h))
	for i := range b {
		bk[i] = ruleKey(&b[i])
	}
	for i := range h {
		hk[i] = ruleKey(&h[i])
	}
	bm, hm := lcs(bk, hk)
	var out []Detail
	hByPath := map[string]int{}
	for j := range h {
		if !hm[j] {
			hByPath[rulePath(dir, h[j].ID)] = j
		}
	}
	paired := map[int]bool{}
	for i := range b {
		if bm[i] {
			continue
		}
		p := rulePath(dir, b[i].ID)
		if j, ok := hByPath[p]; ok {
			paired[j] = true
			out = append(out, ruleFields(dir, p, &b[i], &h[j])...)
			continue
		}
		out = append(out, Detail{Path: p, Before: ruleText(dir, &b[i])})
	}
	for j := range h {
		if !hm[j] && !paired[j] {
			out = append(out, Detail{Path: rulePath(dir, h[j].ID), After: ruleText(dir, &h[j])})
		}
	}
	slices.SortStableFunc(out, func(x, y Detail) int { return comparePaths(x.Path, y.Path) })
	return out
}

// comparePaths orders "ingress[2]..." before "ingress[10]...".
func comparePaths(a, b string) int {
	ai, bi := pathIndex(a), pathIndex(b)
	if ai != bi {
		return ai - bi
	}
	return strings.Compare(a, b)
}

func pathIndex(p string) int {
	_, rest, ok := strings.Cut(p, "[")
	if !ok {
		return -1
	}
	num, _, _ := strings.Cut(rest, "]")
	n, _ := strconv.Atoi(num)
	return n
}

func ruleKey(r *plan.PolicyRule) string {
	c := *r
	c.ID, c.Source = "", ""
	b, _ := json.Marshal(c)
	return string(b)
}

// lcs marks the elements of a and b that a longest common subsequence
// keeps.
func lcs(a, b []string) (am, bm []bool) {
	n, m := len(a), len(b)
	t := make([][]int, n+1)
	for i := range t {
		t[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				t[i][j] = t[i+1][j+1] + 1
			} else {
				t[i][j] = max(t[i+1][j], t[i][j+1])
			}
		}
	}
	am, bm = make([]bool, n), make([]bool, m)
	for i, j := 0, 0; i < n && j < m; {
		switch {
		case a[i] == b[j]:
			am[i], bm[j] = true, true
			i++
			j++
		case t[i+1][j] >= t[i][j+1]:
			i++
		default:
			j++
		}
	}
	return am, bm
}

// rulePath names a rule by its place in the manifest, from its id
// ("<policy>-in0.1": ingress rule 0, its second compiled part): "ingress[0]",
// or "ingress[0]/1" for a part after the first (one part per peer and
// protocol of a Kubernetes rule).
func rulePath(dir, id string) string {
	i := strings.LastIndexByte(id, '-')
	if i < 0 {
		return dir + "[?]"
	}
	suffix := strings.TrimLeft(id[i+1:], "inout")
	idx, part, _ := strings.Cut(suffix, ".")
	if part != "" && part != "0" {
		return fmt.Sprintf("%s[%s]/%s", dir, idx, part)
	}
	return fmt.Sprintf("%s[%s]", dir, idx)
}

// sides returns a rule's source and destination: for ingress the remote
// end is the source, for egress the local one.
func sides(dir string, r *plan.PolicyRule) (src, dst *plan.Match) {
	if dir == "ingress" {
		return &r.Remote, &r.Local
	}
	return &r.Local, &r.Remote
}

func ruleFields(dir, p string, b, h *plan.PolicyRule) []Detail {
	var out []Detail
	field := func(path, before, after string) {
		if before != after {
			out = append(out, Detail{Path: p + "." + path, Before: before, After: after})
		}
	}
	field("action", b.Action, h.Action)
	field("protocol", ProtocolName(b.Protocol), ProtocolName(h.Protocol))
	field("notProtocols", protocols(b.NotProtocols), protocols(h.NotProtocols))
	bs, bd := sides(dir, b)
	hs, hd := sides(dir, h)
	for _, s := range []struct {
		name string
		b, h *plan.Match
	}{{"source", bs, hs}, {"destination", bd, hd}} {
		field(s.name+".nets", nets(s.b.Nets), nets(s.h.Nets))
		field(s.name+".selector", s.b.Selector, s.h.Selector)
		field(s.name+".namespace", s.b.Namespace, s.h.Namespace)
		field(s.name+".namespaceSelector", s.b.NamespaceSelector, s.h.NamespaceSelector)
		field(s.name+".notSelector", s.b.NotSelector, s.h.NotSelector)
		field(s.name+".ports", ports(s.b), ports(s.h))
	}
	return out
}

// ProtocolName names an IANA protocol number as Calico does ("" for any).
func ProtocolName(p int) string {
	switch p {
	case 0:
		return ""
	case 1:
		return "ICMP"
	case 6:
		return "TCP"
	case 17:
		return "UDP"
	case 58:
		return "ICMPv6"
	case 132:
		return "SCTP"
	case 136:
		return "UDPLite"
	}
	return strconv.Itoa(p)
}

func protocols(ps []int) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = ProtocolName(p)
	}
	return strings.Join(s, ", ")
}

// nets lists prefixes, at most 8 of them.
func nets(ps []netip.Prefix) string {
	if ps == nil {
		return ""
	}
	if len(ps) == 0 {
		return "(no address)"
	}
	s := make([]string, 0, min(len(ps), 9))
	for i, p := range ps {
		if i == 8 {
			s = append(s, fmt.Sprintf("and %d more", len(ps)-8))
			break
		}
		s = append(s, p.String())
	}
	return strings.Join(s, ", ")
}

func ports(m *plan.Match) string {
	var s []string
	for _, r := range m.Ports {
		if r.First == r.Last {
			s = append(s, strconv.Itoa(int(r.First)))
		} else {
			s = append(s, fmt.Sprintf("%d-%d", r.First, r.Last))
		}
	}
	return strings.Join(append(s, m.NamedPorts...), ", ")
}

// matchText describes one side of a rule: "any" or its constraints.
func matchText(m *plan.Match) string {
	var s []string
	if m.Namespace != "" {
		s = append(s, "namespace "+m.Namespace)
	}
	if m.NamespaceSelector != "" {
		s = append(s, "namespaceSelector "+m.NamespaceSelector)
	}
	if m.Selector != "" {
		s = append(s, "selector "+m.Selector)
	}
	if m.NotSelector != "" {
		s = append(s, "notSelector "+m.NotSelector)
	}
	if m.Nets != nil {
		s = append(s, "nets "+nets(m.Nets))
	}
	if p := ports(m); p != "" {
		s = append(s, "ports "+p)
	}
	if len(s) == 0 {
		return "any"
	}
	return strings.Join(s, ", ")
}

// ruleText describes a rule in one line: "Allow TCP from selector app ==
// 'x' to ports 80".
func ruleText(dir string, r *plan.PolicyRule) string {
	src, dst := sides(dir, r)
	s := r.Action
	if p := ProtocolName(r.Protocol); p != "" {
		s += " " + p
	}
	if n := protocols(r.NotProtocols); n != "" {
		s += " not " + n
	}
	return fmt.Sprintf("%s from %s to %s", s, matchText(src), matchText(dst))
}
