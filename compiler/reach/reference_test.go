package reach_test

// The reference evaluator: Calico v3 policy semantics written from Calico's
// and Kubernetes' documentation, over the model (model_test.go) — never
// through package policy, the ACL renderer or the program. Sources:
//
//   - tiers and order: https://docs.tigera.io/calico/latest/network-policy/policy-tiers/tiered-policy
//     (tiers by order, a tier that has no policy for the endpoint is
//     skipped, Pass goes to the next tier, the end of a tier is its
//     defaultAction, Deny unless Pass; traffic past every tier meets the
//     namespace profile, which allows in Kubernetes);
//   - rules and entity rules: https://docs.tigera.io/calico/latest/reference/resources/networkpolicy
//     and .../globalnetworkpolicy (every criterion given must match; not*
//     negate; ports need a protocol; named ports are the endpoint's
//     container ports; types default to Ingress, plus Egress with egress
//     rules, Egress alone when there are only egress rules);
//   - selector scope: .../network-policy/get-started/calico-policy/calico-labels
//     ("default values for namespaceSelector for NetworkPolicy and
//     GlobalNetworkPolicy are different") and the entity rule's
//     namespaceSelector ("global() selects non-namespaced resources", so no
//     pod); a namespaced policy's selectors, notSelector included, match
//     its own namespace only;
//   - Kubernetes NetworkPolicy: https://kubernetes.io/docs/concepts/services-networking/network-policies/
//     (peers OR, ports OR, empty = all; podSelector alone is the policy's
//     namespace; policyTypes default Ingress, plus Egress with egress
//     rules), in Calico's default tier at order 1000.

import (
	"cmp"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
)

// conn is one connection attempt between two pods.
type conn struct {
	src, dst         *pod
	proto            string
	srcPort, dstPort uint16
}

const ephemeral = 49152

// decision is a reference verdict at one end, and the rule that made it.
type decision struct {
	allowed bool
	why     string
}

func (w *world) nsLabels(name string) map[string]string {
	out := map[string]string{"projectcalico.org/name": name, "kubernetes.io/metadata.name": name}
	for _, ns := range w.namespaces {
		if ns.name == name {
			for k, v := range ns.labels {
				out[k] = v
			}
		}
	}
	return out
}

// podLabels are a pod's labels plus those Calico adds (calico-labels doc).
func podLabels(p *pod) map[string]string {
	out := map[string]string{"projectcalico.org/namespace": p.ns, "projectcalico.org/orchestrator": "k8s",
		"projectcalico.org/serviceaccount": p.sa}
	for k, v := range p.labels {
		out[k] = v
	}
	return out
}

// decide is the reference verdict at ep's end of c: egress at the source,
// ingress at the destination.
func (w *world) decide(c conn, ingress bool) decision {
	ep := c.src
	if ingress {
		ep = c.dst
	}
	type tierRef struct {
		name   string
		order  float64
		action string
	}
	tiers := []tierRef{{"default", 1_000_000, "Deny"}}
	for _, t := range w.tiers {
		o := math.Inf(1)
		if t.order != nil {
			o = *t.order
		}
		tiers = append(tiers, tierRef{t.name, o, t.defaultAction})
	}
	slices.SortFunc(tiers, func(a, b tierRef) int { return cmp.Or(cmp.Compare(a.order, b.order), strings.Compare(a.name, b.name)) })
	anyTier := false
	for _, t := range tiers {
		var pols []*policy
		for _, p := range w.policies {
			if p.tier == t.name && w.appliesTo(p, ep, ingress) {
				pols = append(pols, p)
			}
		}
		if len(pols) == 0 {
			continue
		}
		anyTier = true
		slices.SortStableFunc(pols, func(a, b *policy) int {
			return cmp.Or(cmp.Compare(orderOf(a), orderOf(b)), strings.Compare(a.name, b.name))
		})
		passed := false
	tier:
		for _, p := range pols {
			switch p.kind {
			case "knp":
				rules := p.kEgress
				if ingress {
					rules = p.kIngress
				}
				for _, r := range rules {
					if w.k8sRuleMatches(p, r, c, ingress) {
						return decision{true, p.name + " (Kubernetes rule)"}
					}
				}
			default:
				rules := p.egress
				if ingress {
					rules = p.ingress
				}
				for i, r := range rules {
					if !w.ruleMatches(p, r, c) {
						continue
					}
					switch r.action {
					case "Allow", "Deny":
						return decision{r.action == "Allow", fmt.Sprintf("%s rule %d (%s)", p.name, i, r.action)}
					case "Pass":
						passed = true
						break tier
					} // Log: on to the next rule
				}
			}
		}
		if !passed && t.action != "Pass" {
			return decision{false, "end of tier " + t.name}
		}
	}
	if !anyTier {
		return decision{true, "no policy"}
	}
	return decision{true, "profile after passing"}
}

func orderOf(p *policy) float64 {
	if p.order == nil {
		return math.Inf(1)
	}
	return *p.order
}

func (w *world) appliesTo(p *policy, ep *pod, ingress bool) bool {
	if p.kind != "gnp" && p.ns != ep.ns {
		return false
	}
	if p.kind == "knp" {
		types := p.policyTypes
		if types == nil {
			types = []string{"Ingress"}
			if p.kEgrSet && len(p.kEgress) > 0 {
				types = append(types, "Egress")
			}
		}
		return slices.Contains(types, map[bool]string{true: "Ingress", false: "Egress"}[ingress]) && k8sSelects(p.podSel, ep.labels)
	}
	types := p.types
	if types == nil {
		switch {
		case len(p.egress) == 0:
			types = []string{"Ingress"}
		case len(p.ingress) == 0:
			types = []string{"Egress"}
		default:
			types = []string{"Ingress", "Egress"}
		}
	}
	if !slices.Contains(types, map[bool]string{true: "Ingress", false: "Egress"}[ingress]) {
		return false
	}
	if !p.selector.eval(podLabels(ep), false) {
		return false
	}
	// A GlobalNetworkPolicy's own namespaceSelector (not generated with
	// global(), whose meaning there the docs leave open).
	return p.nsSelector == nil || p.nsSelector.eval(w.nsLabels(ep.ns), false)
}

func protoMatches(want, got string) bool { return want == "" || want == got }

func (w *world) ruleMatches(p *policy, r rule, c conn) bool {
	if !protoMatches(r.protocol, c.proto) || r.notProtocol != "" && r.notProtocol == c.proto {
		return false
	}
	return w.entityMatches(p, &r.src, c.src, c.srcPort, c.proto) && w.entityMatches(p, &r.dst, c.dst, c.dstPort, c.proto)
}

// entityMatches reports whether the pod at one end of the connection, on
// port, matches e of policy p.
func (w *world) entityMatches(p *policy, e *entity, at *pod, port uint16, proto string) bool {
	in := func(ps []netip.Prefix) bool {
		return slices.ContainsFunc(ps, func(n netip.Prefix) bool { return n.Contains(at.ip) })
	}
	if e.nets != nil && !in(e.nets) || in(e.notNets) {
		return false
	}
	usesSelector := e.selector != nil || e.notSelector != nil || e.namespaceSelector != nil || len(e.serviceAccounts) > 0
	if usesSelector {
		switch {
		case e.namespaceSelector != nil:
			// Pods of the namespaces it selects; global() is no pod.
			if !e.namespaceSelector.eval(w.nsLabels(at.ns), true) {
				return false
			}
		case p.kind == "np":
			if at.ns != p.ns {
				return false
			}
		}
		if e.selector != nil && !e.selector.eval(podLabels(at), false) {
			return false
		}
		if len(e.serviceAccounts) > 0 && !slices.Contains(e.serviceAccounts, at.sa) {
			return false
		}
		if e.notSelector != nil && e.notSelector.eval(podLabels(at), false) {
			return false
		}
	}
	if e.ports != nil && !portIn(e.ports, at, port, proto) {
		return false
	}
	return e.notPorts == nil || !portIn(e.notPorts, at, port, proto)
}

func portIn(ps []port, at *pod, port uint16, proto string) bool {
	for _, p := range ps {
		if p.name == "" && p.lo <= port && port <= p.hi {
			return true
		}
		if p.name != "" && slices.ContainsFunc(at.ports, func(np namedPort) bool {
			return np.name == p.name && np.proto == proto && np.port == port
		}) {
			return true
		}
	}
	return false
}

func k8sSelects(s *labelSel, labels map[string]string) bool {
	for k, v := range s.match {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	for _, e := range s.exprs {
		v, ok := labels[e.key]
		switch e.op {
		case "In":
			if !ok || !slices.Contains(e.values, v) {
				return false
			}
		case "NotIn":
			if ok && slices.Contains(e.values, v) {
				return false
			}
		case "Exists":
			if !ok {
				return false
			}
		case "DoesNotExist":
			if ok {
				return false
			}
		}
	}
	return true
}

func (w *world) k8sRuleMatches(p *policy, r k8sRule, c conn, ingress bool) bool {
	peerPod := c.dst
	if ingress {
		peerPod = c.src
	}
	peerOK := len(r.peers) == 0
	for _, pe := range r.peers {
		switch {
		case pe.cidr.IsValid():
			peerOK = peerOK || pe.cidr.Contains(peerPod.ip) && !slices.ContainsFunc(pe.except, func(e netip.Prefix) bool { return e.Contains(peerPod.ip) })
		default:
			nsOK := peerPod.ns == p.ns
			if pe.nsSel != nil {
				nsOK = k8sSelects(pe.nsSel, w.nsLabels(peerPod.ns))
			}
			podOK := pe.podSel == nil || k8sSelects(pe.podSel, peerPod.labels)
			peerOK = peerOK || nsOK && podOK
		}
	}
	if !peerOK {
		return false
	}
	if len(r.ports) == 0 {
		return true
	}
	for _, kp := range r.ports {
		if kp.proto != c.proto {
			continue
		}
		// Ports are the destination's, a named one resolved on the
		// destination pod.
		if kp.anyPort || portIn([]port{kp.port}, c.dst, c.dstPort, c.proto) {
			return true
		}
	}
	return false
}
