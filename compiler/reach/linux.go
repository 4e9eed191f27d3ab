package reach

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/selector"
	"github.com/hnsplan/hnsplan/compiler/sim"
)

// Linux decides packets at pods on Linux nodes the way Calico's Felix does
// there: straight from the policy program, with tiers, Pass, negated
// selectors and named ports evaluated natively (no flattening, no address
// lists). It reads the same plan.Match fields as the ACL renderer, so
// scoping is the compiler's (see package policy) and never decided twice.
//
// Semantics (https://docs.tigera.io/calico/latest/network-policy/policy-tiers/tiered-policy,
// "how policy is evaluated"): tiers in order; a tier is skipped when none of
// its policies applies to the endpoint in the packet's direction; in a tier
// that applies, the rules of its applying policies are tried in order and
// the first Allow or Deny decides, a Pass goes on to the next tier; no rule
// matched: the tier's default action (Deny, or Pass). No tier applies, or
// every tier passed: the namespace's profile, which allows.
type Linux struct {
	prog  *plan.Program
	world *acl.World
	byIP  map[netip.Addr]*acl.Pod

	mu   sync.Mutex
	sels map[string]selector.Selector
	// applying memoizes, per endpoint and direction, the policies that
	// apply to it, tier by tier: an endpoint is decided many times (a
	// matrix row, an access delta) and its labels do not change.
	applying map[applyKey][]tierPolicies
}

type applyKey struct {
	pod     *acl.Pod
	ingress bool
}

// tierPolicies are the policies of one tier that apply to an endpoint.
type tierPolicies struct {
	tier     *plan.Tier
	policies []*plan.NetworkPolicy
}

// NewLinux returns an evaluator of prog over world. prog may be nil (no
// policy: every packet allowed).
func NewLinux(prog *plan.Program, world *acl.World) *Linux {
	l := &Linux{prog: prog, world: world, byIP: map[netip.Addr]*acl.Pod{}, sels: map[string]selector.Selector{},
		applying: map[applyKey][]tierPolicies{}}
	for _, p := range world.Pods {
		l.byIP[p.IP] = p
	}
	return l
}

// Decision is how a Linux endpoint decided a packet.
type Decision struct {
	Allowed bool
	// Rule and Policy are the deciding rule and its policy; nil when a
	// tier's end or the profile decided.
	Rule   *plan.PolicyRule
	Policy *plan.NetworkPolicy
	// Tier is the tier whose rule or default action decided ("" for the
	// profile).
	Tier string
	// Why is "rule", "tier-end" (the tier's default Deny), "no-policy" (no
	// tier applies) or "profile" (every applying tier passed).
	Why string
}

// Evaluate decides p at ep, in direction "In" or "Out" (p seen from ep, as
// for sim.List.Evaluate).
func (l *Linux) Evaluate(ep *acl.Pod, direction string, p sim.Packet) (Decision, error) {
	ingress := direction == "In"
	if l.prog == nil {
		return Decision{Allowed: true, Why: "no-policy"}, nil
	}
	tiers, err := l.applyingTo(ep, ingress)
	if err != nil {
		return Decision{}, err
	}
	for _, tp := range tiers {
		t := tp.tier
		passed := false
	policies:
		for _, pol := range tp.policies {
			rules := pol.EgressRules
			if ingress {
				rules = pol.IngressRules
			}
			for ri := range rules {
				r := &rules[ri]
				m, err := l.ruleMatches(r, ep, p)
				if err != nil {
					return Decision{}, fmt.Errorf("rule %s: %w", r.ID, err)
				}
				if !m {
					continue
				}
				switch r.Action {
				case "Allow", "Deny":
					return Decision{Allowed: r.Action == "Allow", Rule: r, Policy: pol, Tier: t.Name, Why: "rule"}, nil
				case "Pass":
					passed = true
					break policies
				}
			}
		}
		if !passed && t.DefaultAction != "Pass" {
			return Decision{Allowed: false, Tier: t.Name, Why: "tier-end"}, nil
		}
	}
	if len(tiers) == 0 {
		return Decision{Allowed: true, Why: "no-policy"}, nil
	}
	return Decision{Allowed: true, Why: "profile"}, nil
}

// Applying returns the policies that apply to ep in a direction, in
// evaluation order.
func (l *Linux) Applying(ep *acl.Pod, ingress bool) ([]*plan.NetworkPolicy, error) {
	if l.prog == nil {
		return nil, nil
	}
	tiers, err := l.applyingTo(ep, ingress)
	var out []*plan.NetworkPolicy
	for _, t := range tiers {
		out = append(out, t.policies...)
	}
	return out, err
}

// applyingTo returns the tiers that apply to ep in a direction, each with
// its policies that apply, in evaluation order (memoized).
func (l *Linux) applyingTo(ep *acl.Pod, ingress bool) ([]tierPolicies, error) {
	key := applyKey{ep, ingress}
	l.mu.Lock()
	tiers, ok := l.applying[key]
	l.mu.Unlock()
	if ok {
		return tiers, nil
	}
	for ti := range l.prog.Tiers {
		t := &l.prog.Tiers[ti]
		var pols []*plan.NetworkPolicy
		for pi := range t.Policies {
			pol := &t.Policies[pi]
			ok, err := l.Applies(pol, ep, ingress)
			if err != nil {
				return nil, fmt.Errorf("policy %s: %w", pol.ID, err)
			}
			if ok {
				pols = append(pols, pol)
			}
		}
		if len(pols) > 0 {
			tiers = append(tiers, tierPolicies{tier: t, policies: pols})
		}
	}
	l.mu.Lock()
	l.applying[key] = tiers
	l.mu.Unlock()
	return tiers, nil
}

// Applies reports whether pol applies to the endpoint ep in a direction:
// its type, namespace and selectors.
func (l *Linux) Applies(pol *plan.NetworkPolicy, ep *acl.Pod, ingress bool) (bool, error) {
	if ingress && !pol.Ingress || !ingress && !pol.Egress || pol.Namespace != "" && pol.Namespace != ep.Namespace {
		return false, nil
	}
	ok, err := l.eval(pol.Selector, l.world.EndpointLabels(ep))
	if err == nil && ok && pol.NamespaceSelector != "" {
		ok, err = l.eval(pol.NamespaceSelector, l.world.NamespaceLabels(ep.Namespace))
	}
	return ok, err
}

func (l *Linux) ruleMatches(r *plan.PolicyRule, ep *acl.Pod, p sim.Packet) (bool, error) {
	if r.Protocol != 0 && p.Protocol != r.Protocol || slices.Contains(r.NotProtocols, p.Protocol) {
		return false, nil
	}
	ok, err := l.side(&r.Local, ep.IP, ep, p.LocalPort, p.Protocol)
	if err != nil || !ok {
		return false, err
	}
	return l.side(&r.Remote, p.Remote, l.byIP[p.Remote], p.RemotePort, p.Protocol)
}

// MatchesPeer reports whether a rule's side m matches the pod, its ports
// aside: whether the rule can match traffic with that pod at all.
func (l *Linux) MatchesPeer(m *plan.Match, pod *acl.Pod) (bool, error) {
	mm := *m
	mm.Ports, mm.NamedPorts = nil, nil
	return l.side(&mm, pod.IP, pod, 0, 0)
}

// side reports whether one side of a rule matches address a (the pod at a,
// or nil for an address no pod has) on port.
func (l *Linux) side(m *plan.Match, a netip.Addr, pod *acl.Pod, port uint16, proto int) (bool, error) {
	if m.Nets != nil && !slices.ContainsFunc(m.Nets, func(p netip.Prefix) bool { return p.Contains(a) }) {
		return false, nil
	}
	if m.Selector != "" || m.Namespace != "" || m.NamespaceSelector != "" {
		if pod == nil || m.Namespace != "" && pod.Namespace != m.Namespace {
			return false, nil
		}
		if m.NamespaceSelector != "" {
			if ok, err := l.eval(m.NamespaceSelector, l.world.NamespaceLabels(pod.Namespace)); err != nil || !ok {
				return false, err
			}
		}
		if m.Selector != "" {
			if ok, err := l.eval(m.Selector, l.world.EndpointLabels(pod)); err != nil || !ok {
				return false, err
			}
		}
	}
	if m.NotSelector != "" && pod != nil {
		if ok, err := l.eval(m.NotSelector, l.world.EndpointLabels(pod)); err != nil || ok {
			return false, err
		}
	}
	if m.Ports == nil && m.NamedPorts == nil {
		return true, nil
	}
	for _, r := range m.Ports {
		if r.First <= port && port <= r.Last {
			return true, nil
		}
	}
	if pod != nil {
		for _, name := range m.NamedPorts {
			for _, np := range pod.Ports {
				if np.Name == name && np.Protocol == proto && np.Port == port {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

func (l *Linux) eval(sel string, labels map[string]string) (bool, error) {
	l.mu.Lock()
	s, ok := l.sels[sel]
	l.mu.Unlock()
	if !ok {
		var err error
		if s, err = selector.Parse(sel); err != nil {
			return false, err
		}
		l.mu.Lock()
		l.sels[sel] = s
		l.mu.Unlock()
	}
	return s.Evaluate(labels), nil
}
