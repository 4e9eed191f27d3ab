package policy

import (
	"fmt"
	"net/netip"

	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/selector"
)

// Context is what the program-wide findings need beyond the manifests.
type Context struct {
	// ClusterCIDRs are the pools and service CIDRs: ICMP inside them stays
	// on the cluster network.
	ClusterCIDRs []netip.Prefix
	// World, when an inventory is given, are the pods and namespaces.
	World *acl.World
}

// Analyse reports the findings that look at the program as a whole:
// ICMP egress leaving the cluster (policy-windows-icmp-egress), SCTP rules
// (policy-sctp), and, with an inventory, rules whose local selector makes
// the naive per-policy rendering wasteful (policy-src-dst-selectors).
func Analyse(prog *plan.Program, ctx Context, sev Severities) diag.List {
	c := &compiler{sev: sev}
	for _, t := range prog.Tiers {
		for _, p := range t.Policies {
			for _, r := range p.EgressRules {
				if r.Action == "Allow" && r.Protocol == 1 && leavesCluster(r.Remote, ctx.ClusterCIDRs) {
					c.report("policy-windows-icmp-egress", parsePos(r.Source), "",
						"rule %s allows ICMP to destinations outside the cluster: Windows cannot NAT ICMP, so their replies never reach the pod", r.ID)
				}
			}
			for _, r := range append(append([]plan.PolicyRule(nil), p.IngressRules...), p.EgressRules...) {
				if r.Protocol == 132 {
					c.report("policy-sctp", parsePos(r.Source), "",
						"rule %s is rendered as HNS protocol 132 (SCTP), as Calico for Windows does; that HNS enforces it is not shown by any public source", r.ID)
				}
			}
			if ctx.World != nil {
				c.specialisation(&p, ctx.World)
			}
		}
	}
	return c.findings
}

// leavesCluster reports whether m can match an address outside cidrs.
func leavesCluster(m plan.Match, cidrs []netip.Prefix) bool {
	if m.Selector != "" || m.Namespace != "" || m.NamespaceSelector != "" {
		return false // pods only
	}
	if m.Nets == nil {
		return true
	}
	return len(acl.Subtract(m.Nets, cidrs)) > 0
}

// specialisation counts, for each rule with a local-side selector, the
// endpoints its policy selects against those the rule can apply to: Felix
// puts the rule on every endpoint of the policy, hnsplan only where its
// local side can match.
func (c *compiler) specialisation(p *plan.NetworkPolicy, w *acl.World) {
	polSel, err := selector.Parse(p.Selector)
	if err != nil {
		return
	}
	var nsSel selector.Selector
	if p.NamespaceSelector != "" {
		if nsSel, err = selector.Parse(p.NamespaceSelector); err != nil {
			return
		}
	}
	var selected []*acl.Pod
	for _, pod := range w.Selected(polSel) {
		if p.NamespaceSelector == "" || nsSel.Evaluate(w.NamespaceLabels(pod.Namespace)) {
			selected = append(selected, pod)
		}
	}
	check := func(r plan.PolicyRule, ingress bool) {
		local := r.Local
		if local.Selector == "" && local.NamespaceSelector == "" && local.Namespace == "" {
			return
		}
		sel, err := selector.Parse(local.Selector)
		if local.Selector == "" {
			sel, err = selector.Parse("all()")
		}
		if err != nil {
			return
		}
		var lns selector.Selector
		if local.NamespaceSelector != "" {
			if lns, err = selector.Parse(local.NamespaceSelector); err != nil {
				return
			}
		}
		applies := 0
		for _, pod := range selected {
			if (local.Namespace == "" || pod.Namespace == local.Namespace) &&
				(local.NamespaceSelector == "" || lns.Evaluate(w.NamespaceLabels(pod.Namespace))) &&
				sel.Evaluate(w.EndpointLabels(pod)) {
				applies++
			}
		}
		if applies < len(selected) {
			side := map[bool]string{true: "destination", false: "source"}[ingress]
			c.reportRel("policy-src-dst-selectors", parsePos(r.Source), "",
				[]diag.Related{diag.At(parsePos(p.Source), "policy %s selects %d endpoints", p.ID, len(selected))},
				"rule %s: the policy selects %d endpoints, but the rule's %s selector only %d of them; a naive rendering (Felix's) puts the rule's ACLs on all %d, with the %s set as LocalAddresses; hnsplan renders it on the %d where it can match, without LocalAddresses (%s)",
				r.ID, len(selected), side, applies, len(selected), side, applies, savings(len(selected), applies))
		}
	}
	for _, r := range p.IngressRules {
		check(r, true)
	}
	for _, r := range p.EgressRules {
		check(r, false)
	}
}

func savings(naive, ours int) string {
	if ours == 0 {
		return "no ACL at all"
	}
	return fmt.Sprintf("%.1f× fewer ACL entries", float64(naive)/float64(ours))
}
