package acl

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// Optimising a flattened list.
//
// A flattened list is first-match: the first rule whose protocol, remote
// address and ports match a packet decides it, and the last rule matches
// everything (a tier's end or the profile). optimise rewrites such a list
// into one that decides every IPv4 packet the same way (Windows pod
// networking is IPv4: the renderer already drops IPv6 prefixes) with fewer
// rules and fewer remote addresses. Every step is exact:
//
//   - Shadow: the addresses of a rule that earlier rules covering its
//     whole header (protocols and ports) already decide never reach it.
//   - Redundancy: the addresses of a rule for which every packet of its
//     header that falls through would get the same verdict from the rules
//     after it anyway need not be in it. A rule left with no address that
//     matters is dropped (a Block of the metadata address before a tier
//     end that blocks it too).
//   - Cover: between the addresses it must keep and the addresses it must
//     not take (where the rules after it decide otherwise), a rule's
//     address set is replaced by the fewest prefixes in between: a
//     complement full of holes the rest blocks anyway becomes 0.0.0.0/0.
//   - Block before Allow: where the holes a rule must not take are decided
//     by the rest with the other action, one rule of that action over the
//     holes, then the rule over every address, replace a long complement.
//   - Merge: rules of one action that differ in one dimension only
//     (addresses, local ports, remote ports or protocols) become one where
//     bringing them together changes no packet's first match.

// orule is a rule being optimised: its IPv4 addresses as ranges
// (all of them for "any"), and as the prefixes it will be written with.
type orule struct {
	c     concrete
	addrs ranges
	ps    []netip.Prefix
}

// headerIntersects reports whether some packet matches both a's and b's
// protocols and ports; headerCovers, whether every packet of b's does a's.
func headerIntersects(a, b *concrete) bool {
	return !a.proto.intersect(b.proto).empty() && !a.localPorts.intersect(b.localPorts).empty() &&
		!a.remotePorts.intersect(b.remotePorts).empty()
}

func headerCovers(a, b *concrete) bool {
	return protoCovers(a.proto, b.proto) && portsCover(a.localPorts, b.localPorts) && portsCover(a.remotePorts, b.remotePorts)
}

func protoCovers(a, b protoSet) bool {
	if a.any {
		return true
	}
	if b.any {
		return false
	}
	for _, n := range b.nums {
		if !slices.Contains(a.nums, n) {
			return false
		}
	}
	return true
}

func portsCover(a, b portSet) bool {
	if a.any {
		return true
	}
	if b.any {
		return false
	}
	for _, r := range b.ranges {
		if !slices.ContainsFunc(a.ranges, func(x plan.PortRange) bool { return x.First <= r.First && r.Last <= x.Last }) {
			return false
		}
	}
	return true
}

// optimise returns list rewritten as described above. A list that does
// not end with a rule matching everything is returned as it is.
//
// The work grows with the square of the list's length: a list longer than
// maxOptimise rules, or past maxWork, is returned as it is (exact, only
// longer).
func optimise(list []concrete) []concrete {
	if len(list) == 0 || len(list) > maxOptimise || !list[len(list)-1].catchAll() {
		return list
	}
	rules := make([]orule, 0, len(list))
	work := 0 // address ranges, all rules
	for _, c := range list {
		r := orule{c: c, addrs: allAddrs, ps: []netip.Prefix{v4All}}
		if !c.remote.any {
			r.ps = c.remote.ps
			if slices.ContainsFunc(r.ps, func(p netip.Prefix) bool { return !p.Addr().Is4() }) {
				r.ps = ipv4Only(r.ps)
			}
			r.addrs = rangesOf(r.ps)
		}
		if len(r.addrs) == 0 {
			continue // matches no IPv4 packet
		}
		rules = append(rules, r)
		work += len(r.addrs)
	}
	if work*len(rules) > maxWork {
		return list
	}
	// First without widening any rule: a widened rule that a rule before
	// it only partly overlaps keeps that rule (decided is conservative
	// there), and keeps rules from merging. Then with.
	rules = reduce(rules, false)
	rules = merge(rules)
	rules = reduce(rules, true)
	out := make([]concrete, len(rules))
	for i, r := range rules {
		c := r.c
		switch {
		case len(r.ps) == 1 && r.ps[0] == v4All:
			if !c.remote.any {
				c.remote, c.remoteChunks = anyAddr, nil
			}
		case c.remote.any || !slices.Equal(r.ps, c.remote.ps):
			c.remote, c.remoteChunks = prefixSet{ps: r.ps}, nil
		}
		out[i] = c
	}
	return out
}

// reduce applies shadow and redundancy, and with widen cover and
// block-before-allow, to each rule but the last, from the end: each rule
// is judged against the rules after it as they already are, and the
// rules before it as they were.
func reduce(rules []orule, widen bool) []orule {
	for i := len(rules) - 2; i >= 0; i-- {
		r := &rules[i]
		var shadow ranges
		for j := range i {
			if headerCovers(&rules[j].c, &r.c) {
				shadow = shadow.union(rules[j].addrs)
			}
		}
		live := r.addrs.minus(shadow)
		needed, differ := decided(rules[i+1:], &r.c)
		must := live.intersect(needed)
		if len(must) == 0 {
			rules = slices.Delete(rules, i, i+1)
			continue
		}
		forbidden := needed.minus(r.addrs).minus(shadow)
		cover := r.ps
		if !widen {
			// Keep the addresses that matter, exactly.
			if !slices.Equal(must, r.addrs) {
				cover = nil
				for _, x := range must {
					cover = appendPrefixes(cover, x.lo, x.hi)
				}
				r.addrs, r.ps = must, cover
			}
			continue
		}
		if same := slices.Equal(must, r.addrs); !same || must.size()+forbidden.size() < 1<<32 {
			free := allAddrs.minus(must).minus(forbidden)
			if !same || countIn(0, 0, must, forbidden, free, r.ps) < len(r.ps) {
				cover = coverIn(0, 0, must, forbidden, free, make([]netip.Prefix, 0, len(must)))
			}
		}
		// Block before Allow: the holes (forbidden) in a rule of the other
		// action, where the rest decides them with that action anyway:
		// outside r's live addresses where no packet of r's header is
		// decided with r's action, or where r is shadowed.
		if len(forbidden) > 0 && separated(forbidden, live)+2 < len(cover) {
			room := allAddrs.minus(live).minus(differ).union(shadow)
			if len(forbidden.minus(room)) == 0 && holesAtLeast(room, forbidden)+2 < len(cover) &&
				countCover(forbidden, allAddrs.minus(room))+2 < len(cover) {
				holes := minCover(forbidden, allAddrs.minus(room))
				hole := orule{c: r.c, addrs: rangesOf(holes), ps: holes}
				hole.c.action = opposite(r.c.action)
				hole.c.remoteChunks = nil
				// Named after the rule that decided the holes (the tier's
				// end, mostly): an explanation of a verdict names it.
				hole.c.id = decider(rules[i+1:], &hole)
				r.addrs, r.ps = allAddrs, []netip.Prefix{v4All}
				rules = slices.Insert(rules, i, hole)
				continue
			}
		}
		if !slices.Equal(cover, r.ps) {
			r.addrs, r.ps = rangesOf(cover), cover
		}
	}
	return rules
}

// decider returns the id of the first of rules with h's action that
// takes some of h's packets: the rule that decided them before h.
func decider(rules []orule, h *orule) string {
	for k := range rules {
		s := &rules[k]
		if s.c.action == h.c.action && headerIntersects(&s.c, &h.c) && len(s.addrs.intersect(h.addrs)) > 0 {
			return s.c.id
		}
	}
	return h.c.id
}

func opposite(action string) string {
	if action == "Allow" {
		return "Deny"
	}
	return "Allow"
}

// decided follows the packets of c's header through rules (a suffix of
// the list, ending with a rule matching everything) and returns the
// addresses for which some packet is decided with an action other than
// c's (needed: a rule of c's action must keep them to keep their verdict),
// and those for which some packet is decided with c's action (differ: a
// rule of the other action must not take them).
func decided(rules []orule, c *concrete) (needed, differ ranges) {
	undecided := allAddrs
	for k := range rules {
		s := &rules[k]
		if !headerIntersects(&s.c, c) {
			continue
		}
		x := undecided.intersect(s.addrs)
		if s.c.action != c.action {
			needed = needed.union(x)
		} else {
			differ = differ.union(x)
		}
		if headerCovers(&s.c, c) {
			undecided = undecided.minus(s.addrs)
			if len(undecided) == 0 {
				break
			}
		}
	}
	return needed, differ
}

// merge joins rules of one action that differ in one dimension, where
// moving the later one up to the earlier changes no first match: every
// rule in between has the same action, or matches none of its packets.
// The last rule (matching everything) stays where it is.
func merge(rules []orule) []orule {
	for i := 0; i < len(rules); i++ {
		for j := i + 1; j < len(rules)-1; j++ {
			a, b := &rules[i], &rules[j]
			if a.c.action != b.c.action || ruleOf(a.c.id) != ruleOf(b.c.id) {
				continue
			}
			m, ok := joined(a, b)
			if !ok || !movable(rules[i+1:j], b) {
				continue
			}
			rules[i] = m
			rules = slices.Delete(rules, j, j+1)
			j = i // look again from i: the merged rule may join more
		}
	}
	return rules
}

// ruleOf is the rule part of a rule id ("<policy id>-<in|out><i>" without
// a ".<part>"), or the id itself (a tier's end, the profile). Only parts
// of one rule are merged: the merged ACL's Id names the first, and an
// explanation of a verdict names the ACL's rule, policy and source — which
// must be the rule that allows or denies the traffic.
func ruleOf(id string) string {
	if i := strings.LastIndexByte(id, '-'); i > 0 && (strings.HasPrefix(id[i:], "-in") || strings.HasPrefix(id[i:], "-out")) {
		if j := strings.IndexByte(id[i:], '.'); j > 0 {
			return id[:i+j]
		}
	}
	return id
}

// movable reports whether r can move up over between.
func movable(between []orule, r *orule) bool {
	for k := range between {
		s := &between[k]
		if s.c.action != r.c.action && headerIntersects(&s.c, &r.c) && len(s.addrs.intersect(r.addrs)) > 0 {
			return false
		}
	}
	return true
}

// joined returns the union of a and b when it is one rule: they differ in
// one dimension at most.
func joined(a, b *orule) (orule, bool) {
	m := *a
	sameAddrs := slices.Equal(a.addrs, b.addrs)
	sameProto := protoCovers(a.c.proto, b.c.proto) && protoCovers(b.c.proto, a.c.proto)
	sameLocal := portsCover(a.c.localPorts, b.c.localPorts) && portsCover(b.c.localPorts, a.c.localPorts)
	sameRemote := portsCover(a.c.remotePorts, b.c.remotePorts) && portsCover(b.c.remotePorts, a.c.remotePorts)
	switch {
	case sameProto && sameLocal && sameRemote:
		if !sameAddrs {
			m.addrs = a.addrs.union(b.addrs)
			m.ps = normalize(append(slices.Clone(a.ps), b.ps...))
		}
	case sameAddrs && sameProto && sameRemote:
		m.c.localPorts = unionPorts(a.c.localPorts, b.c.localPorts)
	case sameAddrs && sameProto && sameLocal:
		m.c.remotePorts = unionPorts(a.c.remotePorts, b.c.remotePorts)
	case sameAddrs && sameLocal && sameRemote && !a.c.proto.any && !b.c.proto.any:
		nums := slices.Clone(a.c.proto.nums)
		for _, n := range b.c.proto.nums {
			if !slices.Contains(nums, n) {
				nums = append(nums, n)
			}
		}
		slices.Sort(nums)
		if !(a.c.localPorts.any && a.c.remotePorts.any) && slices.ContainsFunc(nums, func(n int) bool { return n != 6 && n != 17 }) {
			return m, false // ports go with TCP and UDP only
		}
		m.c.proto = protoSet{nums: nums}
	default:
		return m, false
	}
	return m, true
}

func unionPorts(a, b portSet) portSet {
	if a.any || b.any {
		return anyPort
	}
	return portsOf(append(slices.Clone(a.ranges), b.ranges...))
}

// maxOptimise is the longest list optimise rewrites, and maxWork bounds
// its work (rules × address ranges of all rules: each rule is judged
// against the others' sets): a large cluster's node takes about 30,000 a
// list; a hostile list past the bound is left as it is.
const (
	maxOptimise = 1000
	maxWork     = 1 << 26
)
