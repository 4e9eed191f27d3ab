package reach_test

// The differential test's model of a cluster: namespaces, pods, tiers and
// policies as plain values the reference evaluator reads directly, and
// which are written out as the YAML manifests the compiler reads. Nothing
// here goes through package policy.

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// sel is a Calico selector, as a tree the reference evaluates itself.
type sel struct {
	op   string // all, global, eq, ne, has, nothas, in, and, or
	k, v string
	vs   []string
	kids []*sel
}

func (s *sel) String() string {
	switch s.op {
	case "all":
		return "all()"
	case "global":
		return "global()"
	case "eq":
		return fmt.Sprintf("%s == '%s'", s.k, s.v)
	case "ne":
		return fmt.Sprintf("%s != '%s'", s.k, s.v)
	case "has":
		return "has(" + s.k + ")"
	case "nothas":
		return "!has(" + s.k + ")"
	case "in":
		q := make([]string, len(s.vs))
		for i, v := range s.vs {
			q[i] = "'" + v + "'"
		}
		return fmt.Sprintf("%s in {%s}", s.k, strings.Join(q, ", "))
	}
	parts := make([]string, len(s.kids))
	for i, k := range s.kids {
		parts[i] = "(" + k.String() + ")"
	}
	return strings.Join(parts, map[string]string{"and": " && ", "or": " || "}[s.op])
}

// eval evaluates s over labels (Calico's selector docs: != matches an
// absent label; every other comparison needs the label). global(), as a
// plain selector, matches like all(); in a rule's namespaceSelector it
// means non-namespaced resources only (globalIsFalse).
func (s *sel) eval(labels map[string]string, globalIsFalse bool) bool {
	v, ok := labels[s.k]
	switch s.op {
	case "all":
		return true
	case "global":
		return !globalIsFalse
	case "eq":
		return ok && v == s.v
	case "ne":
		return !ok || v != s.v
	case "has":
		return ok
	case "nothas":
		return !ok
	case "in":
		return ok && slices.Contains(s.vs, v)
	case "and":
		for _, k := range s.kids {
			if !k.eval(labels, globalIsFalse) {
				return false
			}
		}
		return true
	case "or":
		for _, k := range s.kids {
			if k.eval(labels, globalIsFalse) {
				return true
			}
		}
		return false
	}
	panic("sel op " + s.op)
}

type namespace struct {
	name   string
	labels map[string]string
}

type namedPort struct {
	name  string
	proto string // TCP or UDP
	port  uint16
}

type pod struct {
	ns, name string
	labels   map[string]string
	sa       string
	node     string // win-1, win-2 or lin-1
	ip       netip.Addr
	ports    []namedPort
}

func (p *pod) key() string { return p.ns + "/" + p.name }

type tier struct {
	name          string
	order         *float64
	defaultAction string // Deny or Pass
}

// port is a Calico port: a number, a range or a name.
type port struct {
	lo, hi uint16
	name   string
}

func (p port) yaml() any {
	switch {
	case p.name != "":
		return p.name
	case p.lo == p.hi:
		return int(p.lo)
	}
	return fmt.Sprintf("%d:%d", p.lo, p.hi)
}

// entity is a Calico rule's source or destination.
type entity struct {
	selector, notSelector, namespaceSelector *sel
	serviceAccounts                          []string
	nets, notNets                            []netip.Prefix
	ports, notPorts                          []port
}

type rule struct {
	action      string // Allow, Deny, Pass, Log
	protocol    string // "" any, TCP, UDP
	notProtocol string
	src, dst    entity
}

// labelSel is a Kubernetes LabelSelector: matchLabels and expressions.
type labelSel struct {
	match map[string]string
	exprs []labelExpr
}

type labelExpr struct {
	key, op string // In, NotIn, Exists, DoesNotExist
	values  []string
}

type peer struct {
	podSel, nsSel *labelSel
	cidr          netip.Prefix // ipBlock when valid
	except        []netip.Prefix
}

type k8sPort struct {
	proto   string // TCP or UDP
	port    port   // name, or lo..hi (endPort)
	anyPort bool
}

type k8sRule struct {
	peers []peer
	ports []k8sPort
}

// policy is a Kubernetes NetworkPolicy (kind knp), a Calico NetworkPolicy
// (np) or GlobalNetworkPolicy (gnp).
type policy struct {
	kind, ns, name string
	tier           string
	order          *float64
	// Calico
	selector, nsSelector *sel
	types                []string // nil: defaulted
	ingress, egress      []rule
	// Kubernetes
	podSel               *labelSel
	policyTypes          []string
	kIngress, kEgress    []k8sRule
	kIngressSet, kEgrSet bool
}

type world struct {
	namespaces []namespace
	pods       []*pod
	tiers      []tier
	policies   []*policy
}

// manifests writes the tiers and policies as YAML documents.
func (w *world) manifests() string {
	var docs []string
	add := func(v any) {
		b, err := yaml.Marshal(v)
		if err != nil {
			panic(err)
		}
		docs = append(docs, string(b))
	}
	for _, t := range w.tiers {
		spec := map[string]any{"defaultAction": t.defaultAction}
		if t.order != nil {
			spec["order"] = *t.order
		}
		add(map[string]any{"apiVersion": "projectcalico.org/v3", "kind": "Tier", "metadata": map[string]any{"name": t.name}, "spec": spec})
	}
	for _, p := range w.policies {
		add(p.yaml())
	}
	return strings.Join(docs, "---\n")
}

func (p *policy) yaml() map[string]any {
	if p.kind == "knp" {
		spec := map[string]any{"podSelector": p.podSel.yaml()}
		if p.policyTypes != nil {
			spec["policyTypes"] = p.policyTypes
		}
		k8sRules := func(rs []k8sRule, peerField string) []any {
			out := []any{}
			for _, r := range rs {
				m := map[string]any{}
				if r.peers != nil {
					var ps []any
					for _, pe := range r.peers {
						ps = append(ps, pe.yaml())
					}
					m[peerField] = ps
				}
				if r.ports != nil {
					var ps []any
					for _, kp := range r.ports {
						pm := map[string]any{"protocol": kp.proto}
						if !kp.anyPort {
							pm["port"] = kp.port.yaml()
							if kp.port.name == "" && kp.port.hi != kp.port.lo {
								pm["port"], pm["endPort"] = int(kp.port.lo), int(kp.port.hi)
							}
						}
						ps = append(ps, pm)
					}
					m["ports"] = ps
				}
				out = append(out, m)
			}
			return out
		}
		if p.kIngressSet {
			spec["ingress"] = k8sRules(p.kIngress, "from")
		}
		if p.kEgrSet {
			spec["egress"] = k8sRules(p.kEgress, "to")
		}
		return map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
			"metadata": map[string]any{"name": p.name, "namespace": p.ns}, "spec": spec}
	}
	spec := map[string]any{"selector": p.selector.String()}
	if p.tier != "default" {
		spec["tier"] = p.tier
	}
	if p.order != nil {
		spec["order"] = *p.order
	}
	if p.nsSelector != nil {
		spec["namespaceSelector"] = p.nsSelector.String()
	}
	if p.types != nil {
		spec["types"] = p.types
	}
	rules := func(rs []rule) []any {
		var out []any
		for _, r := range rs {
			m := map[string]any{"action": r.action}
			if r.protocol != "" {
				m["protocol"] = r.protocol
			}
			if r.notProtocol != "" {
				m["notProtocol"] = r.notProtocol
			}
			if e := r.src.yaml(); len(e) > 0 {
				m["source"] = e
			}
			if e := r.dst.yaml(); len(e) > 0 {
				m["destination"] = e
			}
			out = append(out, m)
		}
		return out
	}
	if len(p.ingress) > 0 {
		spec["ingress"] = rules(p.ingress)
	}
	if len(p.egress) > 0 {
		spec["egress"] = rules(p.egress)
	}
	md := map[string]any{"name": p.name}
	kind := "GlobalNetworkPolicy"
	if p.kind == "np" {
		md["namespace"], kind = p.ns, "NetworkPolicy"
	}
	return map[string]any{"apiVersion": "projectcalico.org/v3", "kind": kind, "metadata": md, "spec": spec}
}

func (e *entity) yaml() map[string]any {
	m := map[string]any{}
	if e.selector != nil {
		m["selector"] = e.selector.String()
	}
	if e.notSelector != nil {
		m["notSelector"] = e.notSelector.String()
	}
	if e.namespaceSelector != nil {
		m["namespaceSelector"] = e.namespaceSelector.String()
	}
	if e.serviceAccounts != nil {
		m["serviceAccounts"] = map[string]any{"names": e.serviceAccounts}
	}
	prefixes := func(ps []netip.Prefix) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = p.String()
		}
		return out
	}
	if e.nets != nil {
		m["nets"] = prefixes(e.nets)
	}
	if e.notNets != nil {
		m["notNets"] = prefixes(e.notNets)
	}
	ports := func(ps []port) []any {
		out := make([]any, len(ps))
		for i, p := range ps {
			out[i] = p.yaml()
		}
		return out
	}
	if e.ports != nil {
		m["ports"] = ports(e.ports)
	}
	if e.notPorts != nil {
		m["notPorts"] = ports(e.notPorts)
	}
	return m
}

func (s *labelSel) yaml() map[string]any {
	m := map[string]any{}
	if len(s.match) > 0 {
		m["matchLabels"] = s.match
	}
	if len(s.exprs) > 0 {
		var es []any
		for _, e := range s.exprs {
			em := map[string]any{"key": e.key, "operator": e.op}
			if e.values != nil {
				em["values"] = e.values
			}
			es = append(es, em)
		}
		m["matchExpressions"] = es
	}
	return m
}

func (pe *peer) yaml() map[string]any {
	m := map[string]any{}
	if pe.cidr.IsValid() {
		b := map[string]any{"cidr": pe.cidr.String()}
		if pe.except != nil {
			var ex []string
			for _, e := range pe.except {
				ex = append(ex, e.String())
			}
			b["except"] = ex
		}
		m["ipBlock"] = b
		return m
	}
	if pe.podSel != nil {
		m["podSelector"] = pe.podSel.yaml()
	}
	if pe.nsSel != nil {
		m["namespaceSelector"] = pe.nsSel.yaml()
	}
	return m
}

// describe lists the namespaces and pods, for a reproduction.
func (w *world) describe() string {
	var b strings.Builder
	for _, ns := range w.namespaces {
		fmt.Fprintf(&b, "namespace %s %v\n", ns.name, ns.labels)
	}
	for _, p := range w.pods {
		fmt.Fprintf(&b, "pod %s on %s at %s labels %v serviceAccount %s ports %v\n", p.key(), p.node, p.ip, p.labels, p.sa, p.ports)
	}
	return b.String()
}
