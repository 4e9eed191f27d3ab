package acl

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/sim"
)

// The optimiser's property: the optimised list decides every probe — a
// protocol, a remote address, a local and a remote port — exactly as the
// flattened list it came from. Probes are taken at every boundary the two
// lists have (each prefix's first and last address and their neighbours,
// so the inside and the outside of every complement and hole; each port
// range's ends and their neighbours), at every pod and host address, and
// at random addresses.

// TestOptimiseKeepsVerdicts renders random programs over random pods
// with and without the optimiser and compares every endpoint's lists.
func TestOptimiseKeepsVerdicts(t *testing.T) {
	rules, probes := 0, 0
	saved := 0
	for seed := uint64(1); seed <= 300; seed++ {
		g := progGen{rand.New(rand.NewPCG(seed, 0x0971))}
		prog, world := g.program(), g.world()
		opt, plain := NewRenderer(prog, world), NewRenderer(prog, world)
		plain.unoptimised = true
		for _, p := range world.Pods {
			oin, oout, err := opt.Render(p)
			if err != nil {
				t.Fatalf("seed %d: %s: %v", seed, p.Key(), err)
			}
			pin, pout, err := plain.Render(p)
			if err != nil {
				t.Fatalf("seed %d: %s: %v", seed, p.Key(), err)
			}
			o, q := append(oin, oout...), append(pin, pout...)
			rules += len(q)
			saved += len(q) - len(o)
			n, bad := compareLists(t, o, q, world, g.r)
			probes += n
			if bad != "" {
				t.Fatalf("seed %d, endpoint %s: %s\nprogram:\n%s\nunoptimised:\n%s\noptimised:\n%s",
					seed, p.Key(), bad, describeProgram(prog), describeACLs(q), describeACLs(o))
			}
		}
	}
	t.Logf("%d ACLs unoptimised, %d fewer optimised, %d probes", rules, saved, probes)
}

// TestOptimiseRandomLists applies the optimiser to random flattened lists
// (overlapping prefixes, complements, port ranges, protocols, both
// actions, ending with a rule matching everything) and compares verdicts.
func TestOptimiseRandomLists(t *testing.T) {
	probes := 0
	r := &Renderer{}
	ep := &Pod{Namespace: "ns", Name: "p"}
	for seed := uint64(1); seed <= 2000; seed++ {
		g := progGen{rand.New(rand.NewPCG(seed, 0x11575))}
		list := g.list()
		plain, err := r.acls(list, ep, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		opt, err := r.acls(optimise(list), ep, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		n, bad := compareLists(t, opt, plain, nil, g.r)
		probes += n
		if bad != "" {
			t.Fatalf("seed %d: %s\nunoptimised:\n%s\noptimised:\n%s", seed, bad, describeACLs(plain), describeACLs(opt))
		}
	}
	t.Logf("%d probes", probes)
}

// compareLists evaluates probes against both ACL lists (each both
// directions) and returns how many, and the first disagreement.
func compareLists(t *testing.T, opt, plain []plan.ACL, world *World, r *rand.Rand) (int, string) {
	t.Helper()
	ol, err := sim.Compile(opt)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := sim.Compile(plain)
	if err != nil {
		t.Fatal(err)
	}
	addrs, ports := boundaries(append(slices.Clone(opt), plain...))
	if world != nil {
		for _, p := range world.Pods {
			addrs = append(addrs, p.IP)
		}
		addrs = append(addrs, world.HostAddrs...)
	}
	for range 8 {
		addrs = append(addrs, netip.AddrFrom4([4]byte{byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}))
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	slices.Sort(ports)
	ports = slices.Compact(ports)
	n := 0
	for _, dir := range []string{"In", "Out"} {
		for _, proto := range []int{6, 17, 1} {
			for _, a := range addrs {
				for _, lp := range ports {
					// Every local port with a few remote ports, and the
					// other way round: the lists' port sets are small.
					for _, rp := range []uint16{ports[r.IntN(len(ports))], ports[r.IntN(len(ports))], lp} {
						for _, pk := range []sim.Packet{{Protocol: proto, Remote: a, LocalPort: lp, RemotePort: rp}, {Protocol: proto, Remote: a, LocalPort: rp, RemotePort: lp}} {
							n++
							ov, pv := ol.Evaluate(dir, pk), pl.Evaluate(dir, pk)
							if ov.Allowed != pv.Allowed {
								return n, fmt.Sprintf("%s %+v: optimised %v (%s), unoptimised %v (%s)", dir, pk,
									ov.Allowed, aclName(ov.ACL), pv.Allowed, aclName(pv.ACL))
							}
						}
					}
				}
			}
		}
	}
	return n, ""
}

func aclName(a *plan.ACL) string {
	if a == nil {
		return "default"
	}
	return a.Id
}

// boundaries returns the addresses at and around every prefix's ends and
// the ports at and around every range's ends in acls.
func boundaries(acls []plan.ACL) ([]netip.Addr, []uint16) {
	var addrs []netip.Addr
	ports := []uint16{0, 1, 80, 443, 8080, 65535}
	for _, a := range acls {
		if a.RemoteAddresses != "" {
			for _, s := range strings.Split(a.RemoteAddresses, ",") {
				p := netip.MustParsePrefix(s)
				lo := p.Masked().Addr()
				hi := netip.AddrFrom4([4]byte(addrOf(u32(lo) | uint32(uint64(1)<<(32-p.Bits())-1)).AsSlice()))
				addrs = append(addrs, lo, hi)
				if lo.Prev().IsValid() {
					addrs = append(addrs, lo.Prev())
				}
				if hi.Next().IsValid() {
					addrs = append(addrs, hi.Next())
				}
			}
		}
		for _, s := range []string{a.LocalPorts, a.RemotePorts} {
			if s == "" {
				continue
			}
			for _, part := range strings.Split(s, ",") {
				lo, hi, _ := strings.Cut(part, "-")
				for _, v := range []string{lo, hi} {
					if v == "" {
						continue
					}
					n, _ := strconv.Atoi(v)
					ports = append(ports, uint16(n))
					if n > 0 {
						ports = append(ports, uint16(n-1))
					}
					if n < 65535 {
						ports = append(ports, uint16(n+1))
					}
				}
			}
		}
	}
	return addrs, ports
}

func describeACLs(acls []plan.ACL) string {
	var b strings.Builder
	for _, a := range acls {
		fmt.Fprintf(&b, "  %s %d %s %s proto=%s remote=%s lp=%s rp=%s\n", a.Direction, a.Priority, a.Id, a.Action, a.Protocols, a.RemoteAddresses, a.LocalPorts, a.RemotePorts)
	}
	return b.String()
}

func describeProgram(p *plan.Program) string {
	var b strings.Builder
	for _, t := range p.Tiers {
		fmt.Fprintf(&b, "tier %s (default %s)\n", t.Name, t.DefaultAction)
		for _, pol := range t.Policies {
			fmt.Fprintf(&b, "  policy %s sel=%q in=%v out=%v\n", pol.ID, pol.Selector, pol.Ingress, pol.Egress)
			for _, r := range append(slices.Clone(pol.IngressRules), pol.EgressRules...) {
				fmt.Fprintf(&b, "    %s %s proto=%d not=%v local=%+v remote=%+v\n", r.ID, r.Action, r.Protocol, r.NotProtocols, r.Local, r.Remote)
			}
		}
	}
	return b.String()
}

// progGen draws random programs, worlds and flattened lists.
type progGen struct{ r *rand.Rand }

func (g progGen) chance(p float64) bool { return g.r.Float64() < p }

var (
	genSelectors = []string{"all()", `app == "web"`, `app == "db"`, `has(role)`, `app != "web"`, `role == "fe" || app == "db"`}
	genApps      = []string{"web", "db", "api"}
	// genPrefixes overlap one another and the pods' addresses (10.0.0.0/24,
	// 10.0.1.0/24), with complements made of some of them.
	genPrefixes = []string{"0.0.0.0/0", "10.0.0.0/8", "10.0.0.0/24", "10.0.0.0/25", "10.0.0.128/26", "10.0.1.0/24",
		"10.0.0.10/32", "10.0.1.12/32", "10.0.0.0/23", "192.168.0.0/16", "172.16.0.0/12", "169.254.169.254/32",
		"203.0.113.0/24", "128.0.0.0/1", "10.0.0.16/28"}
)

func (g progGen) prefixes() []netip.Prefix {
	var ps []netip.Prefix
	for range 1 + g.r.IntN(3) {
		ps = append(ps, netip.MustParsePrefix(genPrefixes[g.r.IntN(len(genPrefixes))]))
	}
	if g.chance(0.4) { // notNets / ipBlock.except: a complement
		var holes []netip.Prefix
		for range 1 + g.r.IntN(3) {
			holes = append(holes, netip.MustParsePrefix(genPrefixes[g.r.IntN(len(genPrefixes))]))
		}
		ps = Subtract(ps, holes)
		if len(ps) == 0 {
			ps = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}
		}
	}
	return ps
}

func (g progGen) portRanges() []plan.PortRange {
	var out []plan.PortRange
	for range 1 + g.r.IntN(2) {
		switch g.r.IntN(4) {
		case 0:
			out = append(out, plan.PortRange{First: 80, Last: 80})
		case 1:
			out = append(out, plan.PortRange{First: 8000, Last: 8090})
		case 2:
			out = append(out, plan.PortRange{First: 443, Last: 443})
		default:
			out = append(out, plan.PortRange{First: 8080, Last: 8080})
		}
	}
	if g.chance(0.2) { // notPorts: a complement
		out = complementPorts(out)
	}
	return out
}

func (g progGen) world() *World {
	var pods []*Pod
	for i := range 3 + g.r.IntN(5) {
		labels := map[string]string{"app": genApps[g.r.IntN(len(genApps))]}
		if g.chance(0.4) {
			labels["role"] = "fe"
		}
		ns := []string{"a", "b"}[g.r.IntN(2)]
		p := &Pod{Namespace: ns, Name: fmt.Sprintf("p%d", i), Labels: labels,
			IP:    netip.AddrFrom4([4]byte{10, 0, byte(i % 2), byte(10 + i)}),
			Ports: []NamedPort{{Name: "http", Protocol: 6, Port: []uint16{80, 8080}[g.r.IntN(2)]}}}
		pods = append(pods, p)
	}
	return NewWorld(pods, map[string]map[string]string{"a": {"env": "prod"}, "b": {}}, []netip.Addr{netip.MustParseAddr("10.240.0.10")})
}

func (g progGen) program() *plan.Program {
	prog := &plan.Program{}
	for ti := range 1 + g.r.IntN(3) {
		t := plan.Tier{Name: fmt.Sprintf("t%d", ti), DefaultAction: []string{"Deny", "Pass"}[g.r.IntN(2)]}
		for pi := range 1 + g.r.IntN(3) {
			pol := plan.NetworkPolicy{ID: fmt.Sprintf("np.t%d-%d", ti, pi), Selector: genSelectors[g.r.IntN(len(genSelectors))],
				Ingress: g.chance(0.8), Egress: g.chance(0.6)}
			for ri := range g.r.IntN(5) {
				pol.IngressRules = append(pol.IngressRules, g.rule(fmt.Sprintf("%s-in%d", pol.ID, ri)))
			}
			for ri := range g.r.IntN(4) {
				pol.EgressRules = append(pol.EgressRules, g.rule(fmt.Sprintf("%s-out%d", pol.ID, ri)))
			}
			t.Policies = append(t.Policies, pol)
		}
		prog.Tiers = append(prog.Tiers, t)
	}
	return prog
}

func (g progGen) rule(id string) plan.PolicyRule {
	r := plan.PolicyRule{ID: id, Action: []string{"Allow", "Allow", "Deny", "Deny", "Pass"}[g.r.IntN(5)]}
	switch g.r.IntN(4) {
	case 0:
		r.Protocol = 6
	case 1:
		r.Protocol = 17
	case 2:
		if g.chance(0.3) {
			r.NotProtocols = []int{6}
		}
	}
	if g.chance(0.5) {
		r.Remote.Nets = g.prefixes()
	}
	if g.chance(0.35) {
		r.Remote.Selector = genSelectors[g.r.IntN(len(genSelectors))]
	}
	if g.chance(0.15) {
		r.Remote.NotSelector = genSelectors[1+g.r.IntN(len(genSelectors)-1)]
	}
	if r.Protocol != 0 {
		if g.chance(0.5) {
			r.Local.Ports = g.portRanges()
		} else if g.chance(0.2) {
			r.Local.NamedPorts = []string{"http"}
		}
		if g.chance(0.25) {
			r.Remote.Ports = g.portRanges()
		}
	}
	if g.chance(0.15) {
		r.Local.Selector = genSelectors[g.r.IntN(len(genSelectors))]
	}
	return r
}

// list draws a flattened list: rules of both actions over overlapping
// sets, ending with a rule matching everything.
func (g progGen) list() []concrete {
	var out []concrete
	for i := range g.r.IntN(9) {
		c := concrete{id: fmt.Sprintf("r%d", i), action: []string{"Allow", "Deny"}[g.r.IntN(2)],
			proto: anyProto, remote: anyAddr, localPorts: anyPort, remotePorts: anyPort}
		switch g.r.IntN(4) {
		case 0:
			c.proto = protoSet{nums: []int{6}}
		case 1:
			c.proto = protoSet{nums: []int{17}}
		case 2:
			c.proto = protoSet{nums: []int{6, 17}}
		}
		if g.chance(0.7) {
			c.remote = setOf(g.prefixes())
		}
		if !c.proto.any {
			if g.chance(0.5) {
				c.localPorts = portsOf(g.portRanges())
			}
			if g.chance(0.3) {
				c.remotePorts = portsOf(g.portRanges())
			}
		}
		out = append(out, c)
	}
	last := allowAll("end")
	if g.chance(0.5) {
		last.action = "Deny"
	}
	return append(out, last)
}

// TestOptimiseBounded: a list past maxOptimise rules, or past maxWork,
// is left as it is, and one within both is rewritten.
func TestOptimiseBounded(t *testing.T) {
	list := func(n, addrs int) []concrete {
		var out []concrete
		for i := range n {
			var ps []netip.Prefix
			for k := range addrs {
				ps = append(ps, netip.PrefixFrom(addrOf(uint32(i*addrs+k)*2), 32)) // never adjacent
			}
			c := allowAll(fmt.Sprintf("r%d", i))
			c.action, c.remote = "Deny", setOf(ps) // all redundant before the end
			out = append(out, c)
		}
		end := allowAll("end")
		end.action = "Deny"
		return append(out, end)
	}
	for _, c := range []struct {
		rules, addrs int
		optimised    bool
	}{
		{10, 10, true},
		{maxOptimise - 1, 1, true}, // and the end: maxOptimise
		{maxOptimise, 1, false},
		{200, maxWork/(201*200) + 1, false},
	} {
		l := list(c.rules, c.addrs)
		got := optimise(l)
		if optimised := len(got) != len(l); optimised != c.optimised {
			t.Errorf("%d rules of %d addresses: %d rules after, want optimised %v", c.rules, c.addrs, len(got), c.optimised)
		}
	}
}
