package reach_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
)

// gen draws a random world from a seed.
type gen struct{ r *rand.Rand }

func (g gen) chance(p float64) bool { return g.r.Float64() < p }

func pick[T any](g gen, xs ...T) T { return xs[g.r.IntN(len(xs))] }

var nodes = []string{"win-1", "win-2", "lin-1"}

// nodeSubnet is where a node's pods get their addresses.
func nodeSubnet(node string) netip.Prefix {
	return netip.MustParsePrefix(map[string]string{"win-1": "10.0.1.0/24", "win-2": "10.0.2.0/24", "lin-1": "10.0.3.0/24"}[node])
}

// external is an address no pod has, in the matrix as a reminder only:
// connections are pod to pod.
var external = netip.MustParsePrefix("203.0.113.0/24")

func (g gen) podSel() *sel {
	return pick(g,
		&sel{op: "all"},
		&sel{op: "eq", k: "app", v: "web"},
		&sel{op: "eq", k: "app", v: "db"},
		&sel{op: "ne", k: "app", v: "web"},
		&sel{op: "has", k: "app"},
		&sel{op: "nothas", k: "role"},
		&sel{op: "in", k: "app", vs: []string{"api", "web"}},
		&sel{op: "or", kids: []*sel{{op: "eq", k: "role", v: "fe"}, {op: "eq", k: "app", v: "db"}}},
	)
}

func (g gen) nsSel() *sel {
	return pick(g,
		&sel{op: "eq", k: "env", v: "prod"},
		&sel{op: "ne", k: "env", v: "prod"},
		&sel{op: "has", k: "env"},
		&sel{op: "all"},
		&sel{op: "global"},
		&sel{op: "global"},
		&sel{op: "or", kids: []*sel{{op: "global"}, {op: "eq", k: "env", v: "prod"}}},
		&sel{op: "eq", k: "projectcalico.org/name", v: "beta"},
		&sel{op: "eq", k: "kubernetes.io/metadata.name", v: "alpha"},
	)
}

func (g gen) world() *world {
	w := &world{}
	for _, name := range []string{"alpha", "beta", "gamma"} {
		labels := map[string]string{}
		if g.chance(0.7) {
			labels["env"] = pick(g, "prod", "dev")
		}
		w.namespaces = append(w.namespaces, namespace{name, labels})
	}
	n := 4 + g.r.IntN(4)
	for i := range n {
		p := &pod{ns: pick(g, "alpha", "beta", "gamma"), name: fmt.Sprintf("p%d", i+1), labels: map[string]string{},
			sa: pick(g, "default", "default", "sa1"), node: pick(g, nodes...)}
		if g.chance(0.8) {
			p.labels["app"] = pick(g, "web", "db", "api")
		}
		if g.chance(0.4) {
			p.labels["role"] = pick(g, "fe", "be")
		}
		if g.chance(0.6) {
			p.ports = append(p.ports, namedPort{"http", pick(g, "TCP", "TCP", "UDP"), pick[uint16](g, 80, 8080, 8050)})
		}
		s := nodeSubnet(p.node).Addr().As4()
		s[3] = byte(10 + i)
		p.ip = netip.AddrFrom4(s)
		w.pods = append(w.pods, p)
	}
	orders := []*float64{nil, ptr(10), ptr(20), ptr(20)}
	for _, name := range []string{"t1", "t2"} {
		if g.chance(0.4) {
			w.tiers = append(w.tiers, tier{name: name, order: pick(g, orders...), defaultAction: pick(g, "Deny", "Pass")})
		}
	}
	tiers := []string{"default"}
	for _, t := range w.tiers {
		tiers = append(tiers, t.name)
	}
	np := 1 + g.r.IntN(5)
	for i := range np {
		p := &policy{kind: pick(g, "knp", "np", "np", "gnp"), ns: pick(g, "alpha", "beta", "gamma"), name: fmt.Sprintf("pol%d", i+1)}
		if p.kind == "knp" {
			g.k8sPolicy(p)
		} else {
			g.calicoPolicy(p, tiers)
		}
		if p.kind == "gnp" {
			p.ns = ""
		}
		w.policies = append(w.policies, p)
	}
	w.untie()
	return w
}

func ptr(f float64) *float64 { return &f }

func (g gen) calicoPolicy(p *policy, tiers []string) {
	p.tier = pick(g, tiers...)
	p.order = pick(g, nil, ptr(50), ptr(100), ptr(100), ptr(1000))
	p.selector = g.podSel()
	if p.kind == "gnp" && g.chance(0.3) {
		p.nsSelector = pick(g, &sel{op: "eq", k: "env", v: "prod"}, &sel{op: "all"}, &sel{op: "ne", k: "env", v: "dev"})
	}
	if g.chance(0.6) {
		p.types = pick(g, []string{"Ingress"}, []string{"Egress"}, []string{"Ingress", "Egress"})
	}
	for range g.r.IntN(4) {
		p.ingress = append(p.ingress, g.rule())
	}
	for range g.r.IntN(3) {
		p.egress = append(p.egress, g.rule())
	}
}

func (g gen) rule() rule {
	r := rule{action: pick(g, "Allow", "Allow", "Allow", "Deny", "Deny", "Pass", "Log")}
	r.protocol = pick(g, "", "TCP", "TCP", "UDP")
	if r.protocol == "" && g.chance(0.2) {
		r.notProtocol = pick(g, "TCP", "UDP")
	}
	r.src = g.entity(r.protocol != "", false)
	r.dst = g.entity(r.protocol != "", true)
	return r
}

func (g gen) entity(ports, dst bool) entity {
	var e entity
	if g.chance(0.35) {
		e.selector = g.podSel()
	}
	if g.chance(0.2) {
		e.notSelector = g.podSel()
	}
	if g.chance(0.25) {
		e.namespaceSelector = g.nsSel()
	}
	if g.chance(0.1) {
		e.serviceAccounts = []string{pick(g, "sa1", "default")}
	}
	netPool := func() netip.Prefix {
		return pick(g, netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("10.0.0.0/8"), nodeSubnet("win-1"),
			nodeSubnet("lin-1"), netip.MustParsePrefix("10.0.2.10/31"), netip.MustParsePrefix("10.0.3.12/32"), external)
	}
	if g.chance(0.15) {
		e.nets = []netip.Prefix{netPool()}
	}
	if g.chance(0.12) {
		e.notNets = []netip.Prefix{netPool()}
	}
	if ports && g.chance(map[bool]float64{true: 0.5, false: 0.1}[dst]) {
		if dst {
			e.ports = []port{pick(g, port{lo: 80, hi: 80}, port{lo: 81, hi: 81}, port{lo: 8000, hi: 8100}, port{name: "http"}, port{lo: 1, hi: 1024})}
			if g.chance(0.2) {
				e.ports = append(e.ports, port{name: "http"})
			}
		} else {
			e.ports = []port{pick(g, port{lo: 40000, hi: 50000}, port{lo: 1, hi: 1024})}
		}
	}
	if ports && g.chance(0.15) {
		e.notPorts = []port{pick(g, port{lo: 80, hi: 80}, port{lo: 8000, hi: 8100}, port{lo: 49152, hi: 49152})}
	}
	return e
}

func (g gen) labelSel() *labelSel {
	switch g.r.IntN(5) {
	case 0:
		return &labelSel{}
	case 1:
		return &labelSel{match: map[string]string{"app": pick(g, "web", "db")}}
	case 2:
		return &labelSel{exprs: []labelExpr{{key: "app", op: "NotIn", values: []string{"db"}}}}
	case 3:
		return &labelSel{exprs: []labelExpr{{key: "role", op: pick(g, "Exists", "DoesNotExist")}}}
	}
	return &labelSel{exprs: []labelExpr{{key: "app", op: "In", values: []string{"api", "web"}}}}
}

func (g gen) nsLabelSel() *labelSel {
	return pick(g, &labelSel{}, &labelSel{match: map[string]string{"env": "prod"}},
		&labelSel{match: map[string]string{"kubernetes.io/metadata.name": "beta"}},
		&labelSel{exprs: []labelExpr{{key: "env", op: "NotIn", values: []string{"prod"}}}})
}

func (g gen) k8sPolicy(p *policy) {
	p.tier = "default"
	p.order = ptr(1000)
	p.podSel = g.labelSel()
	if g.chance(0.6) {
		p.policyTypes = pick(g, []string{"Ingress"}, []string{"Egress"}, []string{"Ingress", "Egress"})
	}
	rules := func() ([]k8sRule, bool) {
		if g.chance(0.3) {
			return nil, false
		}
		var rs []k8sRule
		for range g.r.IntN(3) {
			var r k8sRule
			for range g.r.IntN(3) {
				var pe peer
				switch g.r.IntN(4) {
				case 0:
					pe.podSel = g.labelSel()
				case 1:
					pe.nsSel = g.nsLabelSel()
				case 2:
					pe.podSel, pe.nsSel = g.labelSel(), g.nsLabelSel()
				default:
					pe.cidr = pick(g, netip.MustParsePrefix("10.0.0.0/8"), nodeSubnet("win-2"), nodeSubnet("lin-1"))
					if g.chance(0.5) {
						pe.except = []netip.Prefix{pick(g, netip.MustParsePrefix("10.0.3.0/25"), netip.MustParsePrefix("10.0.2.12/31"), netip.MustParsePrefix("10.0.1.0/24"))}
						if !pe.cidr.Overlaps(pe.except[0]) || pe.except[0].Bits() <= pe.cidr.Bits() {
							pe.except = nil // Kubernetes rejects an except outside the cidr
						}
					}
				}
				r.peers = append(r.peers, pe)
			}
			for range g.r.IntN(3) {
				kp := k8sPort{proto: pick(g, "TCP", "TCP", "UDP")}
				switch g.r.IntN(4) {
				case 0:
					kp.anyPort = true
				case 1:
					kp.port = port{name: "http"}
				case 2:
					kp.port = port{lo: 8000, hi: 8100}
				default:
					kp.port = port{lo: 80, hi: 80}
				}
				r.ports = append(r.ports, kp)
			}
			rs = append(rs, r)
		}
		return rs, true
	}
	p.kIngress, p.kIngressSet = rules()
	p.kEgress, p.kEgrSet = rules()
}

// untie gives distinct orders to policies of one tier that share an order
// but differ in kind: Calico versions break such ties differently
// (felix/calc/policy_sorter.go PolKVLess: by the v1 key name up to 3.29,
// by name, namespace and kind since). Every version sorts policies of one
// kind by name, and namespaced policies of two namespaces never both apply
// to one pod, so those ties stay. Kubernetes policies keep their 1000.
func (w *world) untie() {
	key := func(p *policy) float64 {
		if p.order == nil {
			return math.Inf(1)
		}
		return *p.order
	}
	fresh := 0
	for changed := true; changed; {
		changed = false
		for i, p := range w.policies {
			for _, q := range w.policies[:i] {
				if q.tier != p.tier || key(q) != key(p) || q.kind == p.kind {
					continue
				}
				moved := p
				if p.kind == "knp" {
					moved = q
				}
				base := key(moved)
				if math.IsInf(base, 1) {
					base = 5000
				}
				fresh++
				moved.order = ptr(base + float64(fresh)/64)
				changed = true
			}
		}
	}
}
