// Package sim evaluates HNS ACL lists the way HNS's switch (VFP) layer
// does, so that reachability is computed from the compiled ACLs and never
// from a second reading of the policies.
//
// Semantics, per direction: the Switch ACLs of the packet's direction are
// tried in ascending Priority; the first whose protocol, remote address and
// ports match decides (Allow or Block). Equal priorities keep list order
// here; hnsplan never emits two ACLs with one priority, because HNS's own
// tie-breaking is not documented. A packet no ACL matches is allowed (HNS's
// default without policy) and the verdict says so. Host ACLs (RuleType
// Host) program the host's firewall (WFP), not pod-to-pod traffic, and are
// skipped.
package sim

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// Packet is what an ACL is matched against, seen from the endpoint:
// Remote is the other end, LocalPort the endpoint's port.
type Packet struct {
	Protocol   int
	Remote     netip.Addr
	LocalPort  uint16
	RemotePort uint16
}

// Verdict is the outcome of evaluating a packet.
type Verdict struct {
	Allowed bool
	// ACL is the deciding ACL, nil when none matched (Default).
	ACL     *plan.ACL
	Default bool
}

// List is a parsed ACL list.
type List struct {
	in, out []rule
}

type rule struct {
	acl         *plan.ACL
	allow       bool
	anyProto    bool
	protos      []int
	remote      []netip.Prefix // nil: any
	localPorts  []portRange    // nil: any
	remotePorts []portRange
}

type portRange struct{ lo, hi uint16 }

// Compile parses acls. It rejects what HNS would: an unknown action,
// direction or rule type, or an address, port or protocol list that does
// not parse.
func Compile(acls []plan.ACL) (*List, error) {
	l := &List{}
	sorted := slices.Clone(acls)
	slices.SortStableFunc(sorted, func(a, b plan.ACL) int { return int(a.Priority) - int(b.Priority) })
	for i := range sorted {
		a := &sorted[i]
		r, err := parse(a)
		if err != nil {
			return nil, fmt.Errorf("ACL %q: %w", a.Id, err)
		}
		if a.RuleType == "Host" {
			continue
		}
		switch a.Direction {
		case "In":
			l.in = append(l.in, r)
		case "Out":
			l.out = append(l.out, r)
		}
	}
	return l, nil
}

func parse(a *plan.ACL) (rule, error) {
	r := rule{acl: a}
	switch a.Action {
	case "Allow":
		r.allow = true
	case "Block":
	default:
		return r, fmt.Errorf("action %q is not Allow or Block", a.Action)
	}
	if a.Direction != "In" && a.Direction != "Out" {
		return r, fmt.Errorf("direction %q is not In or Out", a.Direction)
	}
	if a.RuleType != "Switch" && a.RuleType != "Host" {
		return r, fmt.Errorf("rule type %q is not Switch or Host", a.RuleType)
	}
	if a.Protocols == "" || a.Protocols == strconv.Itoa(plan.ProtocolAny) {
		r.anyProto = true
	} else {
		for _, s := range strings.Split(a.Protocols, ",") {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 || n > 255 {
				return r, fmt.Errorf("protocol %q is not a number 0-255", s)
			}
			r.protos = append(r.protos, n)
		}
	}
	if a.LocalAddresses != "" {
		return r, fmt.Errorf("LocalAddresses are not supported by this evaluator (hnsplan specialises them away)")
	}
	if a.RemoteAddresses != "" {
		for _, s := range strings.Split(a.RemoteAddresses, ",") {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				ad, err2 := netip.ParseAddr(s)
				if err2 != nil {
					return r, fmt.Errorf("remote address %q: %v", s, err) // HNS: 0x803B000D, e.g. for "Any"
				}
				p = netip.PrefixFrom(ad, ad.BitLen())
			}
			r.remote = append(r.remote, p)
		}
	}
	var err error
	if r.localPorts, err = parsePorts(a.LocalPorts); err != nil {
		return r, err
	}
	r.remotePorts, err = parsePorts(a.RemotePorts)
	return r, err
}

func parsePorts(s string) ([]portRange, error) {
	if s == "" {
		return nil, nil
	}
	var out []portRange
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 16)
		b := a
		if err == nil && isRange {
			b, err = strconv.ParseUint(hi, 10, 16)
		}
		if err != nil || a > b {
			return nil, fmt.Errorf("port %q is not a port or range", part)
		}
		out = append(out, portRange{uint16(a), uint16(b)})
	}
	return out, nil
}

func inPorts(rs []portRange, p uint16) bool {
	if rs == nil {
		return true
	}
	for _, r := range rs {
		if r.lo <= p && p <= r.hi {
			return true
		}
	}
	return false
}

func (r *rule) matches(p Packet) bool {
	if !r.anyProto && !slices.Contains(r.protos, p.Protocol) {
		return false
	}
	if r.remote != nil && !slices.ContainsFunc(r.remote, func(pre netip.Prefix) bool { return pre.Contains(p.Remote) }) {
		return false
	}
	return inPorts(r.localPorts, p.LocalPort) && inPorts(r.remotePorts, p.RemotePort)
}

// Evaluate decides a packet in direction "In" or "Out".
func (l *List) Evaluate(direction string, p Packet) Verdict {
	rules := l.in
	if direction == "Out" {
		rules = l.out
	}
	for i := range rules {
		if rules[i].matches(p) {
			return Verdict{Allowed: rules[i].allow, ACL: rules[i].acl}
		}
	}
	return Verdict{Allowed: true, Default: true}
}
