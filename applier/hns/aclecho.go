package hns

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// EquivalentACLs reports whether read is what HNS may echo for the ACL
// list sent: the same rules, in any order, up to what real HNS is seen to
// change on the way back (the documents in hnswin/testdata/real):
//
//   - an Id read back empty matches any Id (HNS may drop it);
//   - any protocol is "256", "" or "any", however spelled;
//   - a Priority sent as 0 (omitted on the wire: the plan's host rules)
//     matches any priority read back (HNS fills in its default);
//   - fields HNS adds (Scope, ...) are dropped by the codec already.
//
// Everything else must be equal: an ACL whose match or action differs is
// not an echo.
func EquivalentACLs(sent, read []plan.ACL) bool {
	_, _, ok := unechoedACL(sent, read)
	return ok
}

// aclKey is an ACL without what HNS may change on the way back.
type aclKey struct {
	protocols, action, direction, local, remote, lports, rports, ruleType string
}

func keyOf(a *plan.ACL) aclKey {
	return aclKey{anyProtocol(a.Protocols), a.Action, a.Direction, a.LocalAddresses, a.RemoteAddresses, a.LocalPorts, a.RemotePorts, a.RuleType}
}

// anyProtocol spells "any protocol" one way ("").
func anyProtocol(p string) string {
	if p == strconv.Itoa(plan.ProtocolAny) || strings.EqualFold(p, "any") {
		return ""
	}
	return p
}

// unechoedACL returns the first ACL of sent that read does not echo (or
// the lengths, when they differ), or ok.
func unechoedACL(sent, read []plan.ACL) (s, r string, ok bool) {
	if len(sent) != len(read) {
		return fmt.Sprintf("%d ACLs", len(sent)), fmt.Sprintf("%d ACLs", len(read)), false
	}
	cs, cr := CanonicalACLs(sent), CanonicalACLs(read)
	if slices.Equal(cs, cr) {
		return "", "", true
	}
	// In canonical order, an echo pairs up rule by rule, unless HNS
	// changed a priority (one sent as 0) or dropped Ids among rules of
	// one priority: only then can the order differ, and a match is
	// searched for (below). Otherwise the first pair that is no echo
	// decides, without the search's cost.
	reorder := false
	for i := range cs {
		if cs[i].Priority == 0 || i > 0 && cs[i].Priority == cs[i-1].Priority && cs[i].Direction == cs[i-1].Direction && cs[i].RuleType == cs[i-1].RuleType {
			reorder = true
			break
		}
	}
	if !reorder {
		for i := range cs {
			a, b := &cs[i], &cr[i]
			if keyOf(a) != keyOf(b) || a.Priority != b.Priority || b.Id != "" && b.Id != a.Id {
				return describeACL(*a), describeACL(*b), false
			}
		}
		return "", "", true
	}
	buckets := make(map[aclKey][]int, len(read))
	for i := range read {
		k := keyOf(&read[i])
		buckets[k] = append(buckets[k], i)
	}
	used := make([]bool, len(read))
	// ACLs with a priority of their own first: a priority sent as 0 may
	// take any left over, so it must not take one another ACL needs.
	order := make([]int, 0, len(sent))
	for i := range sent {
		if sent[i].Priority != 0 {
			order = append(order, i)
		}
	}
	for i := range sent {
		if sent[i].Priority == 0 {
			order = append(order, i)
		}
	}
	for _, i := range order {
		a := &sent[i]
		found := false
		for _, j := range buckets[keyOf(a)] {
			b := &read[j]
			if used[j] || (a.Priority != 0 && a.Priority != b.Priority) || (b.Id != "" && b.Id != a.Id) {
				continue
			}
			used[j], found = true, true
			break
		}
		if !found {
			return describeACL(*a), "no such ACL", false
		}
	}
	return "", "", true
}
