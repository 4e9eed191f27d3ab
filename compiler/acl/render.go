package acl

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/selector"
)

// Priorities (Calico's values: research/calico-windows.md §1.5).
const (
	HostToEndpointPriority = 900
	BasePriority           = 1000
	MaxPriority            = 65000
	// ChunkSize is the most entries one address or port list carries;
	// longer lists are cut and combined as a cross product.
	ChunkSize = 4000
)

// Renderer renders endpoints' ACL lists from one program. It caches parsed
// selectors and selector matches; it is safe for concurrent use.
type Renderer struct {
	prog  *plan.Program
	world *World

	mu        sync.Mutex
	selectors map[string]selector.Selector
	members   map[string]prefixSet // by "ns|sel|nssel": the addresses of the pods matched
	remotes   map[*plan.PolicyRule][]remotePart
	errs      map[string]error

	// unoptimised leaves the flattened list as it is (the property test
	// compares the two).
	unoptimised bool
}

// Unoptimised makes r leave each flattened list as it is, without the
// optimiser (optimise.go): for measuring what the optimiser saves, and
// for comparing verdicts. It returns r.
func (r *Renderer) Unoptimised() *Renderer {
	r.unoptimised = true
	return r
}

// NewRenderer returns a renderer of prog over world.
func NewRenderer(prog *plan.Program, world *World) *Renderer {
	return &Renderer{prog: prog, world: world, selectors: map[string]selector.Selector{},
		members: map[string]prefixSet{}, remotes: map[*plan.PolicyRule][]remotePart{}, errs: map[string]error{}}
}

// concrete is a rule specialised to one endpoint, its sets resolved.
type concrete struct {
	id          string
	action      string // Allow, Deny or Pass
	proto       protoSet
	remote      prefixSet
	localPorts  portSet
	remotePorts portSet
	// remoteChunks is remote as RemoteAddresses strings, when known (a
	// rule's remote side is the same on every endpoint: formatted once).
	remoteChunks []string
}

func (c concrete) catchAll() bool {
	return c.proto.any && c.remote.any && c.localPorts.any && c.remotePorts.any
}

// intersect narrows c by d: the traffic both match, with d's action and id.
func (c concrete) intersect(d concrete) (concrete, bool) {
	x := concrete{id: d.id, action: d.action,
		proto: c.proto.intersect(d.proto), remote: c.remote.intersect(d.remote),
		localPorts: c.localPorts.intersect(d.localPorts), remotePorts: c.remotePorts.intersect(d.remotePorts)}
	return x, !(x.proto.empty() || x.remote.empty() || x.localPorts.empty() || x.remotePorts.empty())
}

// Render returns ep's ingress and egress ACL lists, with the world's host
// addresses in allow-host-to-endpoint.
func (r *Renderer) Render(ep *Pod) (in, out []plan.ACL, err error) {
	return r.RenderOn(ep, r.world.HostAddrs)
}

// RenderOn is Render for a pod on a node with the given host addresses:
// one renderer (and its caches) serves every node.
func (r *Renderer) RenderOn(ep *Pod, hostAddrs []netip.Addr) (in, out []plan.ACL, err error) {
	if in, err = r.direction(ep, true, hostAddrs); err != nil {
		return nil, nil, err
	}
	if out, err = r.direction(ep, false, hostAddrs); err != nil {
		return nil, nil, err
	}
	return in, out, nil
}

type tierRules struct {
	name          string
	defaultAction string
	rules         []concrete
}

func (r *Renderer) direction(ep *Pod, ingress bool, hostAddrs []netip.Addr) ([]plan.ACL, error) {
	dir := "out"
	if ingress {
		dir = "in"
	}
	var tiers []tierRules
	for _, t := range r.prog.Tiers {
		applies := false
		var rules []concrete
		for i := range t.Policies {
			pol := &t.Policies[i]
			if ingress && !pol.Ingress || !ingress && !pol.Egress || pol.Namespace != "" && pol.Namespace != ep.Namespace {
				continue
			}
			ok, err := r.matches(pol.Selector, endpoint{ep})
			if err == nil && ok && pol.NamespaceSelector != "" {
				ok, err = r.matches(pol.NamespaceSelector, selector.Map(r.world.NamespaceLabels(ep.Namespace)))
			}
			if err != nil {
				return nil, fmt.Errorf("policy %s: %w", pol.ID, err)
			}
			if !ok {
				continue
			}
			applies = true
			src := pol.IngressRules
			if !ingress {
				src = pol.EgressRules
			}
			for j := range src {
				cs, err := r.concretize(&src[j], ep, ingress)
				if err != nil {
					return nil, fmt.Errorf("rule %s: %w", src[j].ID, err)
				}
				rules = append(rules, cs...)
			}
		}
		if applies {
			tiers = append(tiers, tierRules{name: t.Name, defaultAction: t.DefaultAction, rules: rules})
		}
	}
	var list []concrete
	if len(tiers) == 0 {
		list = []concrete{allowAll("no-policy-" + dir)}
	} else {
		memo := map[int][]concrete{}
		list = flatten(tiers, 0, dir, memo)
	}
	if !r.unoptimised {
		list = optimise(list)
	}
	return r.acls(list, ep, ingress, hostAddrs)
}

func allowAll(id string) concrete {
	return concrete{id: id, action: "Allow", proto: anyProto, remote: anyAddr, localPorts: anyPort, remotePorts: anyPort}
}

// flatten turns tiers[i:] into one list of Allow and Deny rules: a Pass
// rule becomes its intersection with each rule of the rest. Traffic that
// passes every tier reaches the profile, which allows (Calico's semantics
// on Linux; Calico for Windows blocks it instead, issue #13208).
func flatten(tiers []tierRules, i int, dir string, memo map[int][]concrete) []concrete {
	if l, ok := memo[i]; ok {
		return l
	}
	if i == len(tiers) {
		return []concrete{allowAll("profile-" + dir)}
	}
	t := tiers[i]
	var out []concrete
	for _, c := range t.rules {
		switch c.action {
		case "Allow", "Deny":
			out = append(out, c)
		case "Pass":
			for _, d := range flatten(tiers, i+1, dir, memo) {
				if x, ok := c.intersect(d); ok {
					out = append(out, x)
				}
			}
		}
		if n := len(out); n > 0 && out[n-1].catchAll() {
			memo[i] = out // the rest is unreachable
			return out
		}
	}
	if t.defaultAction == "Pass" {
		out = append(out, flatten(tiers, i+1, dir, memo)...)
	} else {
		out = append(out, concrete{id: "tier-" + t.name + "-end-" + dir, action: "Deny",
			proto: anyProto, remote: anyAddr, localPorts: anyPort, remotePorts: anyPort})
	}
	memo[i] = out
	return out
}

// matches evaluates a selector over labels.
func (r *Renderer) matches(sel string, labels selector.Labels) (bool, error) {
	s, err := r.selector(sel)
	if err != nil {
		return false, err
	}
	return s.EvaluateLabels(labels), nil
}

func (r *Renderer) selector(sel string) (selector.Selector, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.selectors[sel]; ok {
		return s, nil
	}
	if err, ok := r.errs[sel]; ok {
		return selector.Selector{}, err
	}
	s, err := selector.Parse(sel)
	if err != nil {
		r.errs[sel] = err
		return selector.Selector{}, err
	}
	r.selectors[sel] = s
	return s, nil
}

// selects reports whether the endpoint side constraints of m (selector,
// namespace, namespace selector) hold for p; true when m has none.
func (r *Renderer) selects(m *plan.Match, p *Pod) (bool, error) {
	if m.Namespace != "" && p.Namespace != m.Namespace {
		return false, nil
	}
	if m.NamespaceSelector != "" {
		ok, err := r.matches(m.NamespaceSelector, selector.Map(r.world.NamespaceLabels(p.Namespace)))
		if err != nil || !ok {
			return false, err
		}
	}
	if m.Selector != "" {
		return r.matches(m.Selector, endpoint{p})
	}
	return true, nil
}

func hasSelector(m *plan.Match) bool {
	return m.Selector != "" || m.Namespace != "" || m.NamespaceSelector != ""
}

// membersOf returns the addresses of the pods m's endpoint constraints
// select. It looks only at the namespaces that can hold them.
func (r *Renderer) membersOf(m *plan.Match) (prefixSet, error) {
	key := m.Namespace + "|" + m.Selector + "|" + m.NamespaceSelector
	r.mu.Lock()
	s, ok := r.members[key]
	r.mu.Unlock()
	if ok {
		return s, nil
	}
	var sel selector.Selector
	if m.Selector != "" {
		var err error
		if sel, err = r.selector(m.Selector); err != nil {
			return prefixSet{}, err
		}
	}
	nsOK := func(ns string) (bool, error) {
		if m.Namespace != "" && ns != m.Namespace {
			return false, nil
		}
		if m.NamespaceSelector == "" {
			return true, nil
		}
		return r.matches(m.NamespaceSelector, selector.Map(r.world.NamespaceLabels(ns)))
	}
	var ps []netip.Prefix
	if cands, ok := r.world.candidates(sel); ok {
		// The selector requires a label value: look its pods up.
		nsCache := map[string]bool{}
		for _, p := range cands {
			ok, seen := nsCache[p.Namespace]
			if !seen {
				var err error
				if ok, err = nsOK(p.Namespace); err != nil {
					return prefixSet{}, err
				}
				nsCache[p.Namespace] = ok
			}
			if ok && sel.EvaluateLabels(endpoint{p}) {
				ps = append(ps, netip.PrefixFrom(p.IP, p.IP.BitLen()))
			}
		}
	} else {
		namespaces := r.world.namespaceNames
		if m.Namespace != "" {
			namespaces = []string{m.Namespace}
		}
		for _, ns := range namespaces {
			ok, err := nsOK(ns)
			if err != nil {
				return prefixSet{}, err
			}
			if !ok {
				continue
			}
			for _, p := range r.world.byNamespace[ns] {
				if m.Selector == "" || sel.EvaluateLabels(endpoint{p}) {
					ps = append(ps, netip.PrefixFrom(p.IP, p.IP.BitLen()))
				}
			}
		}
	}
	s = setOf(ps)
	r.mu.Lock()
	r.members[key] = s
	r.mu.Unlock()
	return s, nil
}

// remotePart is one way a rule's remote side can match: addresses and,
// for a named port, the port number those addresses map it to.
type remotePart struct {
	addrs  prefixSet
	ports  portSet
	chunks []string // addrs as RemoteAddresses strings
}

// remoteParts resolves a rule's remote side — the same for every endpoint,
// so it is computed once per rule and protocol set.
func (r *Renderer) remoteParts(rule *plan.PolicyRule, proto protoSet) ([]remotePart, error) {
	r.mu.Lock()
	parts, ok := r.remotes[rule]
	r.mu.Unlock()
	if ok {
		return parts, nil
	}
	remote := &rule.Remote
	addrs := anyAddr
	if remote.Nets != nil {
		addrs = setOf(remote.Nets)
	}
	if hasSelector(remote) {
		m, err := r.membersOf(remote)
		if err != nil {
			return nil, err
		}
		addrs = addrs.intersect(m)
	}
	if remote.NotSelector != "" {
		m, err := r.membersOf(&plan.Match{Selector: remote.NotSelector})
		if err != nil {
			return nil, err
		}
		addrs = addrs.minus(m)
	}
	switch {
	case addrs.empty():
	case remote.Ports == nil && remote.NamedPorts == nil:
		parts = []remotePart{{addrs: addrs, ports: anyPort}}
	default:
		if remote.Ports != nil {
			parts = append(parts, remotePart{addrs: addrs, ports: portsOf(remote.Ports)})
		}
		if remote.NamedPorts != nil {
			// A named port means a different number on each remote pod: one
			// part per number, over the pods that map the name to it.
			byPort := map[uint16][]netip.Prefix{}
			for _, name := range remote.NamedPorts {
				for _, p := range r.world.byPortName[name] {
					if !addrs.any && !setContains(addrs, p.IP) {
						continue
					}
					for _, np := range p.Ports {
						if np.Name == name && proto.contains(np.Protocol) {
							byPort[np.Port] = append(byPort[np.Port], netip.PrefixFrom(p.IP, p.IP.BitLen()))
						}
					}
				}
			}
			ports := make([]uint16, 0, len(byPort))
			for port := range byPort {
				ports = append(ports, port)
			}
			slices.Sort(ports)
			for _, port := range ports {
				parts = append(parts, remotePart{addrs: setOf(byPort[port]), ports: portSet{ranges: []plan.PortRange{{First: port, Last: port}}}})
			}
		}
	}
	for i := range parts {
		// Windows pod networking is IPv4: IPv6 addresses cannot match.
		if !parts[i].addrs.any {
			parts[i].addrs = prefixSet{ps: ipv4Only(parts[i].addrs.ps)}
		}
		parts[i].chunks = chunkPrefixes(parts[i].addrs)
	}
	parts = slices.DeleteFunc(parts, func(p remotePart) bool { return p.addrs.empty() })
	r.mu.Lock()
	r.remotes[rule] = parts
	r.mu.Unlock()
	return parts, nil
}

// concretize specialises rule to ep. It returns no rule when the local
// side cannot be ep, or nothing on the remote side can match.
func (r *Renderer) concretize(rule *plan.PolicyRule, ep *Pod, ingress bool) ([]concrete, error) {
	local := &rule.Local
	// Local side: decided here, for this endpoint.
	if local.Nets != nil && !slices.ContainsFunc(local.Nets, func(p netip.Prefix) bool { return p.Contains(ep.IP) }) {
		return nil, nil
	}
	if ok, err := r.selects(local, ep); err != nil || !ok {
		return nil, err
	}
	if local.NotSelector != "" {
		if ok, err := r.matches(local.NotSelector, endpoint{ep}); err != nil || ok {
			return nil, err
		}
	}
	proto := anyProto
	if rule.Protocol != 0 {
		proto = protoSet{nums: []int{rule.Protocol}}
	} else if len(rule.NotProtocols) > 0 {
		var nums []int
		for n := 0; n <= 255; n++ {
			if !slices.Contains(rule.NotProtocols, n) {
				nums = append(nums, n)
			}
		}
		proto = protoSet{nums: nums}
	}
	localPorts := anyPort
	if local.Ports != nil || local.NamedPorts != nil {
		rs := slices.Clone(local.Ports)
		for _, name := range local.NamedPorts {
			for _, np := range ep.Ports {
				if np.Name == name && proto.contains(np.Protocol) {
					rs = append(rs, plan.PortRange{First: np.Port, Last: np.Port})
				}
			}
		}
		if len(rs) == 0 {
			return nil, nil // only named ports, none of them on this endpoint
		}
		localPorts = portsOf(rs)
	}

	parts, err := r.remoteParts(rule, proto)
	if err != nil {
		return nil, err
	}
	out := make([]concrete, 0, len(parts))
	for _, part := range parts {
		out = append(out, concrete{id: rule.ID, action: rule.Action, proto: proto, remote: part.addrs, localPorts: localPorts, remotePorts: part.ports, remoteChunks: part.chunks})
	}
	return out, nil
}

func setContains(s prefixSet, a netip.Addr) bool {
	i, found := slices.BinarySearchFunc(s.ps, a, func(p netip.Prefix, a netip.Addr) int {
		if p.Contains(a) {
			return 0
		}
		return p.Addr().Compare(a)
	})
	_ = i
	return found
}

// acls lays the rules out as HNS ACLs with strictly increasing priorities.
func (r *Renderer) acls(list []concrete, ep *Pod, ingress bool, hostAddrs []netip.Addr) ([]plan.ACL, error) {
	dir, hnsDir := "out", "Out"
	if ingress {
		dir, hnsDir = "in", "In"
	}
	var out []plan.ACL
	if ingress && len(hostAddrs) > 0 {
		var hosts []netip.Prefix
		for _, a := range hostAddrs {
			hosts = append(hosts, netip.PrefixFrom(a, a.BitLen()))
		}
		out = append(out, plan.ACL{Id: "allow-host-to-endpoint", Protocols: strconv.Itoa(plan.ProtocolAny), Action: "Allow",
			Direction: hnsDir, RemoteAddresses: joinPrefixes(setOf(hosts).ps), RuleType: "Switch", Priority: HostToEndpointPriority})
	}
	prio := BasePriority
	seen := map[string]int{} // ACLs made of each rule id so far: Ids stay unique
	for _, c := range list {
		chunks := c.remoteChunks
		if chunks == nil {
			if !c.remote.any {
				// IPv6 addresses cannot match on a Windows (IPv4) endpoint.
				c.remote = prefixSet{ps: ipv4Only(c.remote.ps)}
				if c.remote.empty() {
					continue
				}
			}
			chunks = chunkPrefixes(c.remote)
		}
		action := "Allow"
		if c.action == "Deny" {
			action = "Block"
		}
		protocols := strconv.Itoa(plan.ProtocolAny)
		if !c.proto.any {
			s := make([]string, len(c.proto.nums))
			for i, n := range c.proto.nums {
				s[i] = strconv.Itoa(n)
			}
			protocols = strings.Join(s, ",")
		}
		n := seen[c.id]
		for _, addrs := range chunks {
			for _, lp := range chunkPorts(c.localPorts) {
				for _, rp := range chunkPorts(c.remotePorts) {
					if prio > MaxPriority {
						return nil, fmt.Errorf("endpoint %s: more than %d %s ACLs", ep.Key(), MaxPriority-BasePriority, dir)
					}
					out = append(out, plan.ACL{Id: fmt.Sprintf("%s-%d", c.id, n), Protocols: protocols, Action: action,
						Direction: hnsDir, RemoteAddresses: addrs, LocalPorts: lp, RemotePorts: rp, RuleType: "Switch", Priority: uint16(prio)})
					n++
					prio++
				}
			}
		}
		seen[c.id] = n
	}
	out = append(out, plan.ACL{Id: "host-" + dir, Protocols: strconv.Itoa(plan.ProtocolAny), Action: "Allow", Direction: hnsDir, RuleType: "Host", Priority: 0})
	return out, nil
}

func ipv4Only(ps []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		if p.Addr().Is4() {
			out = append(out, p)
		}
	}
	return out
}

func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		if p.IsSingleIP() {
			s[i] = p.Addr().String() + "/" + strconv.Itoa(p.Bits())
		} else {
			s[i] = p.String()
		}
	}
	return strings.Join(s, ",")
}

func chunkPrefixes(s prefixSet) []string {
	if s.any {
		return []string{""}
	}
	var out []string
	for i := 0; i < len(s.ps); i += ChunkSize {
		out = append(out, joinPrefixes(s.ps[i:min(i+ChunkSize, len(s.ps))]))
	}
	return out
}

func chunkPorts(s portSet) []string {
	if s.any {
		return []string{""}
	}
	var out []string
	for i := 0; i < len(s.ranges); i += ChunkSize {
		var parts []string
		for _, r := range s.ranges[i:min(i+ChunkSize, len(s.ranges))] {
			if r.First == r.Last {
				parts = append(parts, strconv.Itoa(int(r.First)))
			} else {
				parts = append(parts, fmt.Sprintf("%d-%d", r.First, r.Last))
			}
		}
		out = append(out, strings.Join(parts, ","))
	}
	return out
}
