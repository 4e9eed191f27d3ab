package policy

import (
	"cmp"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// DefaultTier is the tier of Kubernetes policies and of Calico policies
// that name none; its order is Calico's.
const (
	DefaultTier      = "default"
	defaultTierOrder = 1_000_000
	k8sPolicyOrder   = 1000
)

// RuleHostEndpoint is reported for what Calico applies to host endpoints
// only (HostEndpoints, doNotTrack and preDNAT policies): it never reaches
// a pod, and hnsplan leaves it out.
const RuleHostEndpoint = "policy-host-endpoint"

// Severities gives a rule id's severity (from the catalog).
type Severities func(rule string) diag.Severity

// Compile compiles the manifests' policies. Services are needed to resolve
// Calico `services` matches.
func Compile(m *intent.Manifests, services []intent.Service, sev Severities) (*plan.Program, diag.List) {
	c := &compiler{sev: sev, services: services, heps: m.HostEndpoints}
	type entry struct {
		tier    string
		tierPos diag.Pos // where the tier is named, if it is
		order   float64
		pol     plan.NetworkPolicy
	}
	var entries []entry
	for i := range m.NetworkPolicies {
		np := &m.NetworkPolicies[i]
		if p, ok := c.kubernetes(np); ok {
			entries = append(entries, entry{DefaultTier, np.Source.Pos, k8sPolicyOrder, p})
		}
	}
	for i := range m.CalicoPolicies {
		cp := &m.CalicoPolicies[i]
		if p, ok := c.calico(cp); ok {
			tier := cmp.Or(cp.Spec.Tier, DefaultTier)
			order := math.Inf(1)
			if cp.Spec.Order != nil {
				order = *cp.Spec.Order
			}
			entries = append(entries, entry{tier, cp.Source.PosOf("spec", "tier"), order, p})
		}
	}
	for _, h := range m.HostEndpoints {
		c.report(RuleHostEndpoint, h.Source.Pos, "", "HostEndpoint %s (node %s) polices a host interface, not a pod: Calico for Windows supports no host endpoints, and hnsplan enforces policy on pods only; it is left out", h.Name, h.Spec.Node)
	}
	// Tiers: the default one and every declared one, by order (none last),
	// then name.
	type tierInfo struct {
		order  float64
		action string
	}
	tiers := map[string]tierInfo{DefaultTier: {defaultTierOrder, "Deny"}}
	for _, t := range m.Tiers {
		order := math.Inf(1)
		if t.Spec.Order != nil {
			order = *t.Spec.Order
		}
		tiers[t.Name] = tierInfo{order, cmp.Or(t.Spec.DefaultAction, "Deny")}
	}
	prog := &plan.Program{}
	names := make([]string, 0, len(tiers))
	for n := range tiers {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(tiers[a].order, tiers[b].order), strings.Compare(a, b))
	})
	for _, name := range names {
		t := plan.Tier{Name: name, DefaultAction: tiers[name].action}
		var in []entry
		for _, e := range entries {
			if e.tier == name {
				in = append(in, e)
			}
		}
		slices.SortStableFunc(in, func(a, b entry) int {
			return cmp.Or(cmp.Compare(a.order, b.order), strings.Compare(a.pol.ID, b.pol.ID))
		})
		for _, e := range in {
			t.Policies = append(t.Policies, e.pol)
		}
		if len(t.Policies) > 0 {
			prog.Tiers = append(prog.Tiers, t)
		}
	}
	for _, e := range entries {
		if _, ok := tiers[e.tier]; !ok {
			c.findings.Add(diag.Finding{Rule: "schema", Severity: diag.Error, Pos: e.tierPos, Path: "spec.tier",
				Message: fmt.Sprintf("policy %s is in tier %q, which no Tier manifest declares; it is left out: add a projectcalico.org/v3 Tier named %q to the intent (as the cluster has it), or move the policy to a declared tier", e.pol.ID, e.tier, e.tier)})
		}
	}
	return prog, c.findings
}

type compiler struct {
	sev      Severities
	services []intent.Service
	// heps are the intent's HostEndpoints: rule selectors may reach
	// them in Calico (see hostEndpointPeers).
	heps     []intent.HostEndpoint
	findings diag.List
}

func parsePos(s string) diag.Pos {
	// "file:line:col" as Pos.String writes it.
	var p diag.Pos
	parts := strings.Split(s, ":")
	if len(parts) >= 3 {
		fmt.Sscanf(parts[len(parts)-2], "%d", &p.Line)
		fmt.Sscanf(parts[len(parts)-1], "%d", &p.Col)
		p.File = strings.Join(parts[:len(parts)-2], ":")
	} else {
		p.File = s
	}
	return p
}

func (c *compiler) report(rule string, pos diag.Pos, path, format string, args ...any) {
	c.reportRel(rule, pos, path, nil, format, args...)
}

// reportRel is report for a finding about two places: related are the
// other's positions.
func (c *compiler) reportRel(rule string, pos diag.Pos, path string, related []diag.Related, format string, args ...any) {
	c.findings.Add(diag.Finding{Rule: rule, Severity: c.sev(rule), Pos: pos, Path: path, Message: fmt.Sprintf(format, args...)}.Relate(related...))
}

func (c *compiler) errorf(rule, pos string, format string, args ...any) {
	c.findings.Add(diag.Finding{Rule: rule, Severity: diag.Error, Pos: parsePos(pos), Message: fmt.Sprintf(format, args...)})
}

func namespaceOf(ns string) string { return cmp.Or(ns, "default") }

// kubernetes converts a networking.k8s.io/v1 NetworkPolicy.
func (c *compiler) kubernetes(np *intent.NetworkPolicy) (plan.NetworkPolicy, bool) {
	ns := namespaceOf(np.Namespace)
	id := "knp." + ns + "." + np.Name
	src := np.Source.Pos.String()
	podSel, err := labelSelector(&np.Spec.PodSelector)
	if err != nil {
		c.report("manifest", np.Source.PosOf("spec", "podSelector"), "spec.podSelector", "%v", err)
		return plan.NetworkPolicy{}, false
	}
	p := plan.NetworkPolicy{ID: id, Source: src, Namespace: ns,
		Selector: and(fmt.Sprintf("%s == %q", plan.LabelNamespace, ns), podSel)}
	if len(np.Spec.PolicyTypes) == 0 {
		p.Ingress, p.Egress = true, len(np.Spec.Egress) > 0
	}
	for _, t := range np.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			p.Ingress = true
		case networkingv1.PolicyTypeEgress:
			p.Egress = true
		}
	}
	ok := true
	for i, r := range np.Spec.Ingress {
		rules, good := c.kubernetesRule(np, ns, id, i, true, r.From, r.Ports)
		ok = ok && good
		p.IngressRules = append(p.IngressRules, rules...)
	}
	for i, r := range np.Spec.Egress {
		rules, good := c.kubernetesRule(np, ns, id, i, false, r.To, r.Ports)
		ok = ok && good
		p.EgressRules = append(p.EgressRules, rules...)
	}
	return p, ok
}

// kubernetesRule converts one ingress or egress rule: one Allow per peer
// and protocol (a Calico rule has one protocol).
func (c *compiler) kubernetesRule(np *intent.NetworkPolicy, ns, id string, i int, ingress bool,
	peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) ([]plan.PolicyRule, bool) {
	dir, peerField := "out", "to"
	if !ingress {
		dir, peerField = "out", "to"
	} else {
		dir, peerField = "in", "from"
	}
	field := map[bool]string{true: "ingress", false: "egress"}[ingress]
	rulePos := np.Source.PosOf("spec", field, i)

	// Ports by protocol, in a fixed order.
	type protoPorts struct {
		proto int
		any   bool
		nums  []plan.PortRange
		named []string
	}
	var groups []*protoPorts
	group := func(proto int) *protoPorts {
		for _, g := range groups {
			if g.proto == proto {
				return g
			}
		}
		g := &protoPorts{proto: proto}
		groups = append(groups, g)
		return g
	}
	for j, pp := range ports {
		protoName := corev1.ProtocolTCP
		if pp.Protocol != nil {
			protoName = *pp.Protocol
		}
		num, ok := protocolNumber(string(protoName))
		if !ok {
			c.report("policy-unknown-protocol", np.Source.PosOf("spec", field, i, "ports", j, "protocol"),
				fmt.Sprintf("spec.%s[%d].ports[%d].protocol", field, i, j), "protocol %q is not TCP, UDP or SCTP", protoName)
			return nil, false
		}
		g := group(num)
		switch {
		case pp.Port == nil:
			g.any = true
		case pp.Port.Type == 1: // a named port
			g.named = append(g.named, pp.Port.StrVal)
			c.report("policy-named-port", np.Source.PosOf("spec", field, i, "ports", j, "port"), fmt.Sprintf("spec.%s[%d].ports[%d].port", field, i, j),
				"named port %q is resolved per endpoint from the pods' container ports", pp.Port.StrVal)
		default:
			last := pp.Port.IntVal
			if pp.EndPort != nil {
				last = *pp.EndPort
			}
			if last < pp.Port.IntVal || last > 65535 || pp.Port.IntVal < 0 {
				c.report("manifest", np.Source.PosOf("spec", field, i, "ports", j), fmt.Sprintf("spec.%s[%d].ports[%d]", field, i, j),
					"port range %d-%d is not a range of ports", pp.Port.IntVal, last)
				return nil, false
			}
			g.nums = append(g.nums, plan.PortRange{First: uint16(pp.Port.IntVal), Last: uint16(last)})
		}
	}
	if len(ports) == 0 {
		groups = []*protoPorts{{proto: 0, any: true}}
	}
	if len(peers) == 0 {
		peers = []networkingv1.NetworkPolicyPeer{{}} // any peer
	}
	var out []plan.PolicyRule
	part := 0
	for j, peer := range peers {
		remote := plan.Match{}
		switch {
		case peer.IPBlock != nil:
			cidr, _ := netip.ParsePrefix(peer.IPBlock.CIDR) // the loader checked it
			var holes []netip.Prefix
			for _, e := range peer.IPBlock.Except {
				h, _ := netip.ParsePrefix(e)
				holes = append(holes, h.Masked())
			}
			remote.Nets = []netip.Prefix{cidr.Masked()}
			if len(holes) > 0 {
				remote.Nets = acl.Subtract(remote.Nets, holes)
				c.report("policy-negated-match", np.Source.PosOf("spec", field, i, peerField, j, "ipBlock", "except"),
					fmt.Sprintf("spec.%s[%d].%s[%d].ipBlock.except", field, i, peerField, j),
					"ipBlock %s except %s is rendered as the positive list %s", cidr.Masked(), prefixList(holes), prefixList(remote.Nets))
			}
			if remote.Nets == nil {
				remote.Nets = []netip.Prefix{} // nothing left: matches no address
			}
		case peer.PodSelector != nil || peer.NamespaceSelector != nil:
			if peer.NamespaceSelector != nil {
				nsSel, err := labelSelector(peer.NamespaceSelector)
				if err != nil {
					c.report("manifest", rulePos, "", "%v", err)
					return nil, false
				}
				remote.NamespaceSelector = nsSel
			} else {
				remote.Namespace = ns
			}
			podSel := "all()"
			if peer.PodSelector != nil {
				s, err := labelSelector(peer.PodSelector)
				if err != nil {
					c.report("manifest", rulePos, "", "%v", err)
					return nil, false
				}
				podSel = s
			}
			remote.Selector = podSel
		}
		for _, g := range groups {
			r := plan.PolicyRule{ID: fmt.Sprintf("%s-%s%d.%d", id, dir, i, part), Action: "Allow", Protocol: g.proto,
				Remote: remote, Source: rulePos.String()}
			part++
			if !g.any {
				ports := plan.Match{Ports: g.nums, NamedPorts: g.named}
				if ingress {
					r.Local.Ports, r.Local.NamedPorts = ports.Ports, ports.NamedPorts
				} else {
					r.Remote.Ports, r.Remote.NamedPorts = ports.Ports, ports.NamedPorts
				}
			}
			out = append(out, r)
		}
	}
	return out, true
}

// protocolNumber maps the protocol names Calico knows to IANA numbers.
func protocolNumber(name string) (int, bool) {
	switch strings.ToUpper(name) {
	case "TCP":
		return 6, true
	case "UDP":
		return 17, true
	case "ICMP":
		return 1, true
	case "ICMPV6":
		return 58, true
	case "SCTP":
		return 132, true
	case "UDPLITE":
		return 136, true
	}
	return 0, false
}

func prefixList(ps []netip.Prefix) string {
	if len(ps) == 0 {
		return "(nothing)"
	}
	s := make([]string, 0, min(len(ps), 8))
	for i, p := range ps {
		if i == 8 {
			s = append(s, fmt.Sprintf("and %d more", len(ps)-8))
			break
		}
		s = append(s, p.String())
	}
	return strings.Join(s, ", ")
}
