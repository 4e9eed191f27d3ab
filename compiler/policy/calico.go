package policy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/selector"
)

// calico converts a projectcalico.org/v3 NetworkPolicy or GlobalNetworkPolicy.
func (c *compiler) calico(cp *intent.CalicoPolicy) (plan.NetworkPolicy, bool) {
	at := cp.Source.PosOf
	ns := ""
	id := "gnp." + cp.Name
	if !cp.Global {
		ns = namespaceOf(cp.Namespace)
		id = "np." + ns + "." + cp.Name
	}
	ok := true
	sel := cmp.Or(cp.Spec.Selector, "all()")
	if !c.validSelector(sel, at("spec", "selector"), "spec.selector") {
		return plan.NetworkPolicy{}, false
	}
	p := plan.NetworkPolicy{ID: id, Source: cp.Source.Pos.String(), Selector: sel, Namespace: ns}
	if ns != "" {
		p.Selector = and(fmt.Sprintf("%s == %q", plan.LabelNamespace, ns), sel)
	}
	if s := cp.Spec.NamespaceSelector; s != "" {
		if !c.validSelector(s, at("spec", "namespaceSelector"), "spec.namespaceSelector") {
			return plan.NetworkPolicy{}, false
		}
		if s != "global()" && s != "all()" {
			p.NamespaceSelector = s
		}
	}
	if cp.Spec.ServiceAccountSelector != "" {
		c.report("manifest", at("spec", "serviceAccountSelector"), "spec.serviceAccountSelector",
			"serviceAccountSelector needs ServiceAccount labels, which hnsplan does not read; select the pods by label, or by projectcalico.org/serviceaccount == \"<name>\"")
		return plan.NetworkPolicy{}, false
	}
	// Felix gives a workload endpoint only the policies that are neither
	// untracked nor pre-DNAT (felix/calc/event_sequencer.go,
	// tierInfoToProtoTierInfo); an applyOnForward policy reaches pods like
	// any other, and is compiled as one.
	if cp.Spec.DoNotTrack || cp.Spec.PreDNAT {
		field, what := "doNotTrack", "untracked (doNotTrack)"
		if cp.Spec.PreDNAT {
			field, what = "preDNAT", "pre-DNAT (preDNAT)"
		}
		c.report(RuleHostEndpoint, at("spec", field), "spec."+field,
			"GlobalNetworkPolicy %s is %s: Calico applies such a policy to host endpoints only, never to pods, and Windows nodes have no host endpoints; it is left out of every pod's ACLs (and of every tier it would otherwise open)", cp.Name, what)
		return plan.NetworkPolicy{}, false
	}
	if len(cp.Spec.Types) == 0 {
		p.Egress = len(cp.Spec.Egress) > 0
		p.Ingress = len(cp.Spec.Ingress) > 0 || !p.Egress
	}
	for _, t := range cp.Spec.Types {
		p.Ingress = p.Ingress || t == "Ingress"
		p.Egress = p.Egress || t == "Egress"
	}
	for i := range cp.Spec.Ingress {
		rules, good := c.calicoRule(cp, ns, id, i, true)
		ok = ok && good
		p.IngressRules = append(p.IngressRules, rules...)
	}
	for i := range cp.Spec.Egress {
		rules, good := c.calicoRule(cp, ns, id, i, false)
		ok = ok && good
		p.EgressRules = append(p.EgressRules, rules...)
	}
	return p, ok
}

func (c *compiler) validSelector(s string, pos diag.Pos, path string) bool {
	if _, err := selector.Parse(s); err != nil {
		c.report("manifest", pos, path, "%v", err)
		return false
	}
	return true
}

// calicoRule converts rule i of a direction. It returns no rule when the
// rule cannot be enforced on Windows and dropping it fails closed.
func (c *compiler) calicoRule(cp *intent.CalicoPolicy, ns, id string, i int, ingress bool) ([]plan.PolicyRule, bool) {
	field, dir := "egress", "out"
	rules := cp.Spec.Egress
	if ingress {
		field, dir, rules = "ingress", "in", cp.Spec.Ingress
	}
	r := rules[i]
	at := func(p ...any) diag.Pos { return cp.Source.PosOf(append([]any{"spec", field, i}, p...)...) }
	path := func(p string) string {
		if p == "" {
			return fmt.Sprintf("spec.%s[%d]", field, i)
		}
		return fmt.Sprintf("spec.%s[%d].%s", field, i, p)
	}
	allow := r.Action == "Allow"
	// widened is set when a match is made wider than written (failing
	// closed for a Deny). A wider Pass would not fail closed: it would skip
	// the tier's later rules for traffic Calico keeps in the tier, so such a
	// Pass is compiled as a Deny of its widened match instead.
	widened := false
	out := plan.PolicyRule{ID: fmt.Sprintf("%s-%s%d", id, dir, i), Action: r.Action, Source: at().String()}
	switch r.Action {
	case "Log":
		return nil, true // logs and goes on: no effect on the verdict
	case "Pass":
		c.report("policy-pass-action", at("action"), path("action"), "Pass is compiled exactly: the tiers are flattened into each endpoint's ACL list")
	}
	if r.IPVersion != nil && *r.IPVersion == 6 {
		c.report("policy-ipv6", at("ipVersion"), path("ipVersion"), "the rule matches IPv6 only, which Windows pod networking does not carry; nothing is rendered for it")
		return nil, true
	}
	// Protocol.
	if r.Protocol != nil {
		n, ok := c.protocol(*r.Protocol, at("protocol"), path("protocol"))
		if !ok {
			return nil, false
		}
		out.Protocol = n
	}
	if r.NotProtocol != nil {
		n, ok := c.protocol(*r.NotProtocol, at("notProtocol"), path("notProtocol"))
		if !ok {
			return nil, false
		}
		switch {
		case out.Protocol == n:
			return nil, true // protocol X and not X: matches nothing
		case out.Protocol == 0:
			out.NotProtocols = []int{n}
			c.report("policy-negated-match", at("notProtocol"), path("notProtocol"), "notProtocol %s is rendered as the list of every other protocol number", r.NotProtocol)
		}
	}
	// ICMP type and code: no exact form on Windows.
	if icmpTyped(r.ICMP) || icmpTyped(r.NotICMP) {
		what := "icmp"
		if !icmpTyped(r.ICMP) {
			what = "notICMP"
		}
		if allow {
			c.report("policy-icmp-type", at(what), path(what), "Windows ACLs cannot match an ICMP type or code: this Allow rule is dropped (fail closed)")
			return nil, true
		}
		c.report("policy-icmp-type", at(what), path(what), "Windows ACLs cannot match an ICMP type or code: this %s rule is widened to all ICMP (fail closed)", r.Action)
		widened = true
	}
	if r.HTTP != nil {
		if allow {
			c.report("policy-application-layer", at("http"), path("http"), "HTTP matches need an application-layer proxy, which Windows nodes lack: this Allow rule is dropped (fail closed)")
			return nil, true
		}
		c.report("policy-application-layer", at("http"), path("http"), "HTTP matches need an application-layer proxy, which Windows nodes lack: this %s rule is applied to all HTTP methods and paths (fail closed)", r.Action)
		widened = true
	}
	// A services match without a protocol matches each service port with
	// that port's own protocol (Calico's semantics): one rule per protocol.
	protos := []int{out.Protocol}
	if sv := r.Destination.Services; out.Protocol == 0 && r.NotProtocol == nil && sv != nil {
		if svc := c.service(sv.Namespace, sv.Name, ns); svc != nil && len(svc.Spec.Ports) > 0 {
			protos = nil
			for _, sp := range svc.Spec.Ports {
				n, _ := protocolNumber(string(cmp.Or(sp.Protocol, "TCP")))
				if !slices.Contains(protos, n) {
					protos = append(protos, n)
				}
			}
			slices.Sort(protos)
		}
	}
	var rulesOut []plan.PolicyRule
	for k, proto := range protos {
		o := out
		o.Protocol = proto
		if len(protos) > 1 {
			o.ID = fmt.Sprintf("%s.%d", out.ID, k)
		}
		src, srcOK, srcSkip := c.entity(cp, ns, &r.Source, proto, allow, &widened, "source", at, path)
		dst, dstOK, dstSkip := c.entity(cp, ns, &r.Destination, proto, allow, &widened, "destination", at, path)
		if !srcOK || !dstOK {
			return nil, false
		}
		if srcSkip || dstSkip {
			return nil, true
		}
		if ingress {
			o.Local, o.Remote = dst, src
		} else {
			o.Local, o.Remote = src, dst
		}
		rulesOut = append(rulesOut, o)
	}
	if widened && r.Action == "Pass" && len(rulesOut) > 0 {
		for k := range rulesOut {
			rulesOut[k].Action = "Deny"
		}
		c.report("policy-pass-action", at("action"), path("action"),
			"this Pass rule cannot be matched exactly on Windows, and a wider Pass would skip this tier's later rules for traffic Calico keeps here: it is compiled as a Deny of its widened match (fail closed)")
	}
	return rulesOut, true
}

// hostEndpointPeers handles a side whose selectors reach HostEndpoints of
// the intent. Calico resolves a rule's selector and notSelector to every
// endpoint they select, host endpoints included (a global policy's, or
// with namespaceSelector global()); hnsplan resolves them to pods only.
// An Allow is then narrower here (fail closed: an info); a Deny or Pass
// would miss the host's addresses (fail open): an error, and refused says
// so.
func (c *compiler) hostEndpointPeers(cp *intent.CalicoPolicy, e *intent.EntityRule, allow bool, pos diag.Pos, path string) (refused bool) {
	if len(c.heps) == 0 || e.Selector == "" && e.NotSelector == "" || e.ServiceAccounts != nil || e.Services != nil {
		return false // no endpoint selector, or one only pods satisfy
	}
	switch nsSel := strings.TrimSpace(e.NamespaceSelector); {
	case nsSel == "global()":
	case nsSel != "" || !cp.Global:
		return false // namespaced endpoints only
	}
	sel, err1 := selector.Parse(cmp.Or(e.Selector, "all()"))
	not, err2 := selector.Parse(cmp.Or(e.NotSelector, "!all()"))
	if err1 != nil || err2 != nil {
		return false // reported by the caller
	}
	var hit []diag.Related
	var names []string
	for _, h := range c.heps {
		if sel.Evaluate(h.Labels) && !not.Evaluate(h.Labels) {
			hit = append(hit, diag.At(h.Source.Pos, "HostEndpoint %s", h.Name))
			names = append(names, h.Name)
		}
	}
	if len(hit) == 0 {
		return false
	}
	if allow {
		c.reportRel(RuleHostEndpoint, pos, path, hit,
			"the rule's selectors also select HostEndpoint %s, whose addresses Calico allows here and hnsplan, which resolves selectors to pods, does not: this Allow is narrower on Windows (fail closed)", strings.Join(names, ", "))
		return false
	}
	c.findings.Add(diag.Finding{Rule: RuleHostEndpoint, Severity: diag.Error, Pos: pos, Path: path,
		Message: fmt.Sprintf("the rule's selectors also select HostEndpoint %s: Calico applies this Deny or Pass to the host's addresses too, and hnsplan, which resolves selectors to pods, would miss them (fail open); give the host's addresses as nets in a rule of their own, or narrow the selectors so they select no HostEndpoint", strings.Join(names, ", ")),
	}.Relate(hit...))
	return true
}

func icmpTyped(f *intent.ICMPFields) bool { return f != nil && (f.Type != nil || f.Code != nil) }

func (c *compiler) protocol(p intent.Protocol, pos diag.Pos, path string) (int, bool) {
	if p.Name == "" {
		return p.Num, true
	}
	if n, ok := protocolNumber(p.Name); ok {
		return n, true
	}
	c.report("policy-unknown-protocol", pos, path,
		"protocol %q is not TCP, UDP, ICMP, ICMPv6, SCTP, UDPLite or a number 1-255 (Calico for Windows would widen it to every protocol)", p.Name)
	return 0, false
}

// entity converts a source or destination. skip reports that the whole
// rule is dropped (failing closed); ok false is an error.
func (c *compiler) entity(cp *intent.CalicoPolicy, ns string, e *intent.EntityRule, proto int, allow bool, widened *bool, side string,
	at func(...any) diag.Pos, path func(string) string) (m plan.Match, ok, skip bool) {
	sidePath := func(f string) string { return path(side + "." + f) }
	// Addresses: nets minus notNets, IPv4 only.
	nets, v6 := splitV6(e.Nets)
	if len(e.Nets) > 0 {
		if len(nets) == 0 {
			c.report("policy-ipv6", at(side, "nets"), sidePath("nets"), "the rule's nets are IPv6 only, which Windows pod networking does not carry; nothing is rendered for it")
			return m, true, true
		}
		if v6 > 0 {
			c.report("policy-ipv6", at(side, "nets"), sidePath("nets"), "%d IPv6 nets are left out (Windows pod networking is IPv4)", v6)
		}
		m.Nets = nets
	}
	if len(e.NotNets) > 0 {
		notNets, _ := splitV6(e.NotNets)
		base := m.Nets
		if base == nil {
			base = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}
		}
		m.Nets = acl.Subtract(base, notNets)
		if m.Nets == nil {
			m.Nets = []netip.Prefix{}
		}
		c.report("policy-negated-match", at(side, "notNets"), sidePath("notNets"), "notNets %s is rendered as the positive list %s", prefixList(notNets), prefixList(m.Nets))
	}
	// Endpoints: selector, namespaceSelector, service accounts, services.
	var sels []string
	saScoped := false
	if e.Selector != "" {
		if !c.validSelector(e.Selector, at(side, "selector"), sidePath("selector")) {
			return m, false, false
		}
		sels = append(sels, e.Selector)
	}
	if sa := e.ServiceAccounts; sa != nil {
		if sa.Selector != "" {
			c.report("manifest", at(side, "serviceAccounts", "selector"), sidePath("serviceAccounts.selector"),
				"serviceAccounts.selector needs ServiceAccount labels, which hnsplan does not read; list the names instead")
			return m, false, false
		}
		if len(sa.Names) > 0 {
			names := slices.Clone(sa.Names)
			slices.Sort(names)
			quoted := make([]string, len(names))
			for i, n := range names {
				quoted[i] = strconv.Quote(n)
			}
			sels = append(sels, fmt.Sprintf("%s in {%s}", plan.LabelServiceAccount, strings.Join(quoted, ", ")))
			saScoped = true
		}
	}
	var svcPorts []plan.PortRange
	var svcNamed []string
	if sv := e.Services; sv != nil {
		svc := c.service(sv.Namespace, sv.Name, ns)
		if svc == nil || len(svc.Spec.Selector) == 0 {
			var known []diag.Related // the Service without a selector
			if svc != nil {
				known = []diag.Related{diag.At(svc.Source.Pos, "Service %s/%s, without a selector", namespaceOf(svc.Namespace), svc.Name)}
			}
			if allow {
				c.reportRel("policy-application-layer", at(side, "services"), sidePath("services"), known,
					"Service %s/%s is not known (or has no selector), so its endpoints cannot be listed: this Allow rule is dropped (fail closed)", cmp.Or(sv.Namespace, ns), sv.Name)
				return m, true, true
			}
			c.reportRel("policy-application-layer", at(side, "services"), sidePath("services"), known,
				"Service %s/%s is not known (or has no selector): this %s rule is widened to every endpoint (fail closed)", cmp.Or(sv.Namespace, ns), sv.Name, "Deny")
			*widened = true
		} else {
			keys := make([]string, 0, len(svc.Spec.Selector))
			for k := range svc.Spec.Selector {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			var terms []string
			for _, k := range keys {
				terms = append(terms, fmt.Sprintf("%s == %q", k, svc.Spec.Selector[k]))
			}
			terms = append(terms, fmt.Sprintf("%s == %q", plan.LabelNamespace, svc.Namespace))
			sels = append(sels, strings.Join(terms, " && "))
			if side == "destination" {
				for _, sp := range svc.Spec.Ports {
					if n, _ := protocolNumber(string(cmp.Or(sp.Protocol, "TCP"))); proto != 0 && n != proto {
						continue
					}
					tp := sp.TargetPort
					switch {
					case tp.Type == intstr.String:
						svcNamed = append(svcNamed, tp.StrVal)
					case tp.IntVal != 0:
						svcPorts = append(svcPorts, plan.PortRange{First: uint16(tp.IntVal), Last: uint16(tp.IntVal)})
					default:
						svcPorts = append(svcPorts, plan.PortRange{First: uint16(sp.Port), Last: uint16(sp.Port)})
					}
				}
			}
		}
	}
	// Scoping, as Calico's GetEntityRuleSelector does it (projectcalico/calico,
	// libcalico-go/lib/backend/syncersv1/updateprocessors/rules.go): a
	// namespaceSelector limits the side to pods of the namespaces it selects
	// (global() selects none: it means non-namespaced resources); without one,
	// a namespaced policy limits it to its own namespace as soon as any of
	// selector, serviceAccounts or notSelector is used. notSelector then
	// excludes the pods it selects, unscoped. A services match is the
	// service's own endpoints and does not scope. The table in doc.go.
	scoped := e.Selector != "" || saScoped || e.NotSelector != ""
	if len(sels) > 0 {
		m.Selector = and(sels...)
	}
	switch nsSel := e.NamespaceSelector; {
	case nsSel != "":
		if !c.validSelector(nsSel, at(side, "namespaceSelector"), sidePath("namespaceSelector")) {
			return m, false, false
		}
		parsed, _ := selector.Parse(nsSel)
		if rewritten, changed := parsed.ForRuleNamespaces(); changed {
			parsed, nsSel = rewritten, rewritten.String()
		}
		if !parsed.IsAll() {
			m.NamespaceSelector = nsSel
		}
		if m.Selector == "" {
			m.Selector = "all()" // pods only
		}
	case ns != "" && scoped:
		m.Namespace = ns // a namespaced policy's selectors stay in its namespace
		if m.Selector == "" {
			m.Selector = "all()"
		}
	}
	if e.NotSelector != "" {
		if !c.validSelector(e.NotSelector, at(side, "notSelector"), sidePath("notSelector")) {
			return m, false, false
		}
		m.NotSelector = e.NotSelector
		c.report("policy-negated-match", at(side, "notSelector"), sidePath("notSelector"),
			"notSelector is rendered per endpoint as the addresses of every pod it does not select")
	}
	selField := "selector"
	if e.Selector == "" {
		selField = "notSelector"
	}
	if refused := c.hostEndpointPeers(cp, e, allow, at(side, selField), sidePath(selField)); refused {
		return m, false, false
	}
	// Ports: numeric and named, minus notPorts.
	if len(e.Ports) > 0 || len(svcPorts) > 0 || len(svcNamed) > 0 {
		if proto != 6 && proto != 17 && proto != 132 && proto != 136 {
			c.report("manifest", at(side, "ports"), sidePath("ports"), "ports need protocol TCP, UDP, SCTP or UDPLite")
			return m, false, false
		}
		m.Ports, m.NamedPorts = append(m.Ports, svcPorts...), append(m.NamedPorts, svcNamed...)
		for _, p := range e.Ports {
			if p.Name != "" {
				m.NamedPorts = append(m.NamedPorts, p.Name)
				c.report("policy-named-port", at(side, "ports"), sidePath("ports"), "named port %q is resolved per endpoint from the pods' container ports", p.Name)
				continue
			}
			m.Ports = append(m.Ports, plan.PortRange{First: p.Min, Last: p.Max})
		}
	}
	if len(e.NotPorts) > 0 {
		if proto != 6 && proto != 17 && proto != 132 && proto != 136 {
			c.report("manifest", at(side, "notPorts"), sidePath("notPorts"), "notPorts need protocol TCP, UDP, SCTP or UDPLite")
			return m, false, false
		}
		var numeric []plan.PortRange
		named := false
		for _, p := range e.NotPorts {
			if p.Name != "" {
				named = true
				continue
			}
			numeric = append(numeric, plan.PortRange{First: p.Min, Last: p.Max})
		}
		if named {
			if allow {
				c.report("policy-negated-match", at(side, "notPorts"), sidePath("notPorts"), "a named port in notPorts has no positive form: this Allow rule is dropped (fail closed)")
				return m, true, true
			}
			c.report("policy-negated-match", at(side, "notPorts"), sidePath("notPorts"), "a named port in notPorts has no positive form: this %s rule ignores notPorts (widened, fail closed)", "Deny")
			*widened = true
		} else {
			comp := complement(numeric)
			if m.Ports != nil || m.NamedPorts != nil {
				if len(m.NamedPorts) > 0 && allow {
					c.report("policy-negated-match", at(side, "notPorts"), sidePath("notPorts"), "notPorts with named ports has no positive form: this Allow rule is dropped (fail closed)")
					return m, true, true
				}
				if len(m.NamedPorts) > 0 {
					// A named port's number is known per pod only: it cannot be
					// taken out of the list here, so the Deny keeps it.
					c.report("policy-negated-match", at(side, "notPorts"), sidePath("notPorts"),
						"notPorts with named ports has no positive form: this rule matches its named ports whatever their number (widened, fail closed)")
					*widened = true
				}
				m.Ports = intersectPorts(m.Ports, comp)
				if len(m.Ports) == 0 && len(m.NamedPorts) == 0 {
					return m, true, true // matches nothing
				}
			} else {
				m.Ports = comp
			}
			c.report("policy-negated-match", at(side, "notPorts"), sidePath("notPorts"), "notPorts is rendered as the complementary port ranges")
		}
	}
	return m, true, false
}

func splitV6(ps []netip.Prefix) (v4 []netip.Prefix, v6 int) {
	for _, p := range ps {
		if p.Addr().Is4() {
			v4 = append(v4, p)
		} else {
			v6++
		}
	}
	return v4, v6
}

func (c *compiler) service(ns, name, policyNS string) *intent.Service {
	ns = cmp.Or(ns, policyNS, "default")
	for i := range c.services {
		s := &c.services[i]
		if s.Name == name && namespaceOf(s.Namespace) == ns {
			return s
		}
	}
	return nil
}

// complement returns the ports outside rs.
func complement(rs []plan.PortRange) []plan.PortRange {
	slices.SortFunc(rs, func(a, b plan.PortRange) int { return int(a.First) - int(b.First) })
	var out []plan.PortRange
	next := 0
	for _, r := range rs {
		if int(r.First) > next {
			out = append(out, plan.PortRange{First: uint16(next), Last: r.First - 1})
		}
		next = max(next, int(r.Last)+1)
	}
	if next <= 65535 {
		out = append(out, plan.PortRange{First: uint16(next), Last: 65535})
	}
	return out
}

func intersectPorts(a, b []plan.PortRange) []plan.PortRange {
	var out []plan.PortRange
	for _, x := range a {
		for _, y := range b {
			lo, hi := max(x.First, y.First), min(x.Last, y.Last)
			if lo <= hi {
				out = append(out, plan.PortRange{First: lo, Last: hi})
			}
		}
	}
	return out
}
