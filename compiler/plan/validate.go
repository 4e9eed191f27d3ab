package plan

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// Bounds on a plan's sizes. They are far above what the compiler writes
// for the largest intents it is benchmarked on (1,000 Windows and 100
// Linux nodes: 1,100 routes per plan), and low enough that a hostile plan
// cannot make the agent hold or program without limit.
const (
	MaxRoutes        = 65536 // remoteSubnetRoutes, and hostRoutes, each
	MaxEndpoints     = 4096  // pod endpoints
	MaxPolicies      = 65536 // policies of one object (ACLs included)
	MaxListEntries   = 4096  // entries of one ACL address or port list (the compiler cuts at 4,000)
	MaxTiers         = 1024
	MaxNetworkPols   = 100000 // network policies of the program, all tiers
	MaxRulesPerPol   = 10000
	MaxNetsPerMatch  = 65536
	MaxNameLen       = 256   // names: network, endpoint, node, tier, ids
	MaxStringLen     = 65536 // free text: selectors, sources, DNS suffixes
	MaxUnresolved    = 1024
	MaxSubnets       = 64
	MaxIPConfigs     = 16
	MinOverlayVNI    = 4096 // Windows' VXLAN reserves VSIDs below 4096
	MaxVNI           = 1<<24 - 1
	MinSwitchACLPrio = 900   // the compiler's allow-host-to-endpoint; policies start at 1000
	MaxACLPriority   = 65000 // the compiler's last policy ACL
)

// NetworkTypes are the network types the agent programs.
var NetworkTypes = []string{"Overlay", "L2Bridge"}

// A Problem is one thing wrong with a plan's meaning: where (a JSON path
// into the plan file, "remoteSubnetRoutes[3].DestinationPrefix") and what.
type Problem struct {
	Path string
	Msg  string
}

func (p Problem) String() string { return p.Path + ": " + p.Msg }

// A ValidationError lists what is wrong with a plan that decoded and
// verified but that the agent must not apply. It wraps ErrInvalid.
type ValidationError struct {
	Node     string
	Problems []Problem // at most maxProblems; Omitted more
	Omitted  int
}

// ErrInvalid is wrapped by a *ValidationError.
var ErrInvalid = errors.New("the plan's content is invalid")

const maxProblems = 10

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "plan for node %s: %v: ", e.Node, ErrInvalid)
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	if e.Omitted > 0 {
		fmt.Fprintf(&b, "; and %d more", e.Omitted)
	}
	return b.String()
}

func (e *ValidationError) Unwrap() error { return ErrInvalid }

// Validate checks the meaning of a decoded plan: what the plan schema
// (schema/plan.cue) says, and what makes a plan safe to apply to a node
// whatever its signature. The network is of a type the agent programs,
// an Overlay network's VNI is one Windows accepts (4096..16777215), it
// has a subnet, the host endpoint lies inside it, no route is a default
// route or covers the node's own block, ACLs have fields and priorities
// in the compiler's ranges, and every list and string is bounded. It
// returns nil or a *ValidationError naming each problem's JSON path.
//
// The compiler never writes a plan that fails Validate; the agent applies
// none that does.
func Validate(p *NodePlan) error {
	v := &validator{}
	v.plan(p)
	if len(v.problems) == 0 {
		return nil
	}
	e := &ValidationError{Node: p.Node, Problems: v.problems}
	if len(e.Problems) > maxProblems {
		e.Problems, e.Omitted = e.Problems[:maxProblems], len(e.Problems)-maxProblems
	}
	return e
}

type validator struct {
	problems   []Problem
	subnets    []netip.Prefix // the network's: the node's own block
	overlay    bool
	policyOnly bool // the network is another's: pod endpoints have any address
}

func (v *validator) bad(path, format string, args ...any) {
	v.problems = append(v.problems, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func idx(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// bounded reports whether a list of n elements at path is within max.
func (v *validator) bounded(path string, n, max int) bool {
	if n > max {
		v.bad(path, "%d entries, more than the %d a plan may hold", n, max)
		return false
	}
	return true
}

func (v *validator) str(path, s string, max int) {
	if len(s) > max {
		v.bad(path, "%d bytes long, more than %d", len(s), max)
	}
}

var (
	networkName = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9_. ]*$`)
	// labelKey is a Kubernetes label key: an optional DNS prefix and '/',
	// then a name of alphanumerics, '-', '_' and '.'.
	labelKey  = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	macAddr   = regexp.MustCompile(`^[0-9A-F]{2}(-[0-9A-F]{2}){5}$`)
	protocols = regexp.MustCompile(`^(256|([0-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-5])(,([0-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-5]))*)$`)
)

func (v *validator) plan(p *NodePlan) {
	v.str("node", p.Node, MaxNameLen)
	v.str("cluster", p.Cluster, MaxNameLen)
	switch p.Replacement {
	case "", "drain", "manual":
	default:
		v.bad("replacement", "%q: want \"drain\" or \"manual\"", p.Replacement)
	}
	if r := p.Rollout; r != nil {
		if r.MaxUnavailable != "" {
			if _, err := r.Slots(1); err != nil {
				v.bad("rollout.maxUnavailable", "%q: want a count (1 or more) or a percentage (1%% to 100%%)", r.MaxUnavailable)
			}
		}
		if r.Order != "" && !labelKey.MatchString(r.Order) {
			v.bad("rollout.order", "%q: want a Kubernetes label key", r.Order)
		}
		v.str("rollout.order", r.Order, 317)
		switch r.VXLANChange {
		case "", VXLANRolling, VXLANAllAtOnce:
		default:
			v.bad("rollout.vxlanChange", "%q: want %q or %q", r.VXLANChange, VXLANRolling, VXLANAllAtOnce)
		}
		switch r.BuildRegression {
		case "", BuildProceed, BuildHold:
		default:
			v.bad("rollout.buildRegression", "%q: want %q or %q", r.BuildRegression, BuildHold, BuildProceed)
		}
	}
	if p.PolicyOnly != nil {
		v.policyOnlyPlan(p)
	} else {
		v.network(&p.Network)
		v.endpoint("hostEndpoint", &p.HostEndpoint, true)
	}
	// A plan without the parts it names would remove every route or ACL
	// they hold: it is not a plan to apply (Parts.Assemble).
	if r := p.RouteTable; r != nil && (p.Routes == nil || p.Routes.Name != r.Name || p.Routes.Key != r.Key) {
		v.bad("routeTable", "route table %s is not assembled with the plan", r.Name)
	}
	if len(p.ProgramChunks) > 0 && p.Program == nil {
		v.bad("programChunks", "the policy program (%d chunks) is not assembled with the plan", len(p.ProgramChunks))
	}
	if p.Routes != nil {
		v.routes(p)
	}
	if p.PolicyOnly == nil {
		v.podTemplate(&p.PodEndpoint)
	}
	if v.bounded("endpoints", len(p.Endpoints), MaxEndpoints) {
		seen := map[netip.Addr]int{}
		for i := range p.Endpoints {
			path := idx("endpoints", i)
			v.endpoint(path, &p.Endpoints[i], false)
			if c := p.Endpoints[i].IpConfigurations; len(c) > 0 {
				if j, dup := seen[c[0].IpAddress]; dup {
					v.bad(path+".IpConfigurations[0].IpAddress", "%s is also the address of endpoints[%d]", c[0].IpAddress, j)
				}
				seen[c[0].IpAddress] = i
			}
		}
	}
	if p.Program != nil {
		v.program(p.Program)
	}
	if v.bounded("unresolved", len(p.Unresolved), MaxUnresolved) {
		for i, u := range p.Unresolved {
			v.str(idx("unresolved", i)+".field", u.Field, MaxStringLen)
			v.str(idx("unresolved", i)+".source", u.Source, MaxStringLen)
			v.bounded(idx("unresolved", i)+".nodes", len(u.Nodes), MaxEndpoints)
		}
	}
}

// policyOnlyPlan checks what a policy-only plan holds: the owner and the
// network patterns, and nothing to create (no network, host endpoint,
// pod template or route table: those are the owner's).
func (v *validator) policyOnlyPlan(p *NodePlan) {
	v.policyOnly = true
	po := p.PolicyOnly
	v.name("policyOnly.owner", po.Owner)
	v.addr("policyOnly.nodeAddress", po.NodeAddress)
	if len(po.Networks) == 0 {
		v.bad("policyOnly.networks", "no network pattern: the agent would find no pod endpoint to program")
	}
	if v.bounded("policyOnly.networks", len(po.Networks), MaxNetworkPatterns) {
		for i, n := range po.Networks {
			if err := CheckNetworkPattern(n); err != nil {
				v.bad(idx("policyOnly.networks", i), "%v", err)
			}
		}
	}
	if !isZeroNetwork(&p.Network) {
		v.bad("network", "a policy-only plan creates no network: the network is %s's", po.Owner)
	}
	if !isZeroEndpoint(&p.HostEndpoint) {
		v.bad("hostEndpoint", "a policy-only plan creates no host endpoint: the network is %s's", po.Owner)
	}
	if !isZeroTemplate(&p.PodEndpoint) {
		v.bad("podEndpoint", "a policy-only plan has no pod endpoint template: %s creates the pod endpoints", po.Owner)
	}
	if p.RouteTable != nil {
		v.bad("routeTable", "a policy-only plan programs no routes: %s does", po.Owner)
	}
	for i := range p.Endpoints {
		for j, pol := range p.Endpoints[i].Policies {
			if _, ok := pol.Settings.(ACL); !ok {
				v.bad(idx(idx("endpoints", i)+".Policies", j), "a %s policy: a policy-only plan programs the ACLs of %s's endpoints only", pol.Type, po.Owner)
			}
		}
	}
}

func isZeroNetwork(n *Network) bool {
	return n.Name == "" && n.Type == "" && len(n.Ipams) == 0 && len(n.Policies) == 0 && len(n.Immutable) == 0
}

func isZeroEndpoint(e *Endpoint) bool {
	return e.Name == "" && len(e.IpConfigurations) == 0 && e.MacAddress == "" && e.Dns == nil && len(e.Routes) == 0 &&
		len(e.Policies) == 0 && e.Flags == 0 && e.Attach == "" && e.Pod == ""
}

func isZeroTemplate(t *PodEndpointTemplate) bool {
	return !t.Gateway.IsValid() && t.MacAddressRule == "" && t.DnsSearch == "" && len(t.DnsServers) == 0 &&
		len(t.Routes) == 0 && len(t.Policies) == 0
}

// routes checks the route table a plan was assembled with: its entries,
// and that it fits the plan's network.
func (v *validator) routes(p *NodePlan) {
	t := p.Routes
	path := "routeTable " + t.Name
	switch t.Type {
	case RoutesRemoteSubnet:
		if p.Network.Type != "Overlay" {
			v.bad(path+".type", "RemoteSubnet routes need an Overlay network, the plan's is %q", p.Network.Type)
		}
		v.vni(path+".isolationId", t.IsolationId)
		for _, ipam := range p.Network.Ipams {
			for _, s := range ipam.Subnets {
				if id, ok := Find[VSID](s.Policies); ok && id.IsolationId != t.IsolationId {
					v.bad(path+".isolationId", "VNI %d, the plan's network has %d: the plan and its route table disagree", t.IsolationId, id.IsolationId)
				}
			}
		}
	case RoutesHost:
	default:
		v.bad(path+".type", "%q: want RemoteSubnet or Host", t.Type)
	}
	if !v.bounded(path+".nodes", len(t.Nodes), MaxRoutes) {
		return
	}
	seen := map[netip.Prefix]string{}
	routes := 0
	for _, n := range t.Nodes {
		np := path + ".nodes[" + truncate(n.Node) + "]"
		v.name(np+".node", n.Node)
		v.addr(np+".address", n.Address)
		if n.TunnelMAC != "" && !macAddr.MatchString(n.TunnelMAC) {
			v.bad(np+".tunnelMAC", "%q is not a MAC address as HNS writes it (\"00-15-5D-7A-00-22\")", n.TunnelMAC)
		}
		if n.Node == p.Node {
			continue
		}
		for i, b := range n.Blocks {
			bp := idx(np+".blocks", i)
			if routes++; routes > MaxRoutes {
				v.bad(path, "more than %d routes", MaxRoutes)
				return
			}
			v.route(bp, b) // a default route, host bits, the node's own block
			if other, dup := seen[b]; dup {
				v.bad(bp, "%s is routed twice (also to node %s)", b, other)
			}
			seen[b] = n.Node
		}
	}
}

func (v *validator) network(n *Network) {
	switch {
	case n.Name == "":
		v.bad("network.Name", "empty: the agent owns its network by name")
	case len(n.Name) > MaxNameLen:
		v.str("network.Name", n.Name, MaxNameLen)
	case !networkName.MatchString(n.Name):
		v.bad("network.Name", "%q: must start with a letter or digit and hold letters, digits, '-', '_', '.' and spaces", n.Name)
	}
	switch n.Type {
	case "Overlay":
		v.overlay = true
	case "L2Bridge":
	default:
		v.bad("network.Type", "%q is not a network type the agent programs (Overlay or L2Bridge)", n.Type)
	}
	nsub := 0
	for i, ipam := range n.Ipams {
		path := idx("network.Ipams", i)
		if ipam.Type != "Static" {
			v.bad(path+".Type", "%q: want \"Static\"", ipam.Type)
		}
		if !v.bounded(path+".Subnets", len(ipam.Subnets), MaxSubnets) {
			continue
		}
		for j, s := range ipam.Subnets {
			v.subnet(idx(path+".Subnets", j), &s)
			nsub++
		}
	}
	if nsub == 0 {
		v.bad("network.Ipams", "no subnet: the network needs the node's block")
	}
	for i, a := range v.subnets {
		for _, b := range v.subnets[:i] {
			if a.Overlaps(b) {
				v.bad("network.Ipams", "subnets %s and %s overlap", b, a)
			}
		}
	}
	v.policies("network.Policies", n.Policies)
	for i, pol := range n.Policies {
		if s, ok := pol.Settings.(VxlanPort); ok {
			switch {
			case s.Port == 0:
				v.bad(idx("network.Policies", i)+".Settings.Port", "0 is not a UDP port (4789 is VXLAN's)")
			case !v.overlay:
				v.bad(idx("network.Policies", i), "a VxlanPort policy on a network of type %q: only Overlay networks carry VXLAN", n.Type)
			}
		}
	}
	for i, f := range n.Immutable {
		switch f {
		case "Name", "Type", "Subnet", "VNI", "VxlanPort":
		default:
			v.bad(idx("network.Immutable", i), "%q: want Name, Type, Subnet, VNI or VxlanPort", f)
		}
	}
}

func (v *validator) subnet(path string, s *Subnet) {
	pfx := s.IpAddressPrefix
	switch {
	case !pfx.IsValid():
		v.bad(path+".IpAddressPrefix", "missing")
		return
	case pfx != pfx.Masked():
		v.bad(path+".IpAddressPrefix", "%s has host bits set (the prefix is %s)", pfx, pfx.Masked())
	case pfx.Bits() == 0:
		v.bad(path+".IpAddressPrefix", "%s is every address, not a node's block", pfx)
	}
	v.subnets = append(v.subnets, pfx.Masked())
	vsid, hasVSID := Find[VSID](s.Policies)
	switch {
	case v.overlay && !hasVSID:
		v.bad(path+".Policies", "an Overlay subnet needs a VSID policy (its VNI)")
	case hasVSID:
		for i, pol := range s.Policies {
			if _, ok := pol.Settings.(VSID); ok {
				v.vni(idx(path+".Policies", i)+".Settings.IsolationId", vsid.IsolationId)
			}
		}
	}
	v.policies(path+".Policies", s.Policies)
	if !v.bounded(path+".Routes", len(s.Routes), MaxSubnets) {
		return
	}
	for i, r := range s.Routes {
		rp := idx(path+".Routes", i)
		if !r.DestinationPrefix.IsValid() {
			v.bad(rp+".DestinationPrefix", "missing")
		}
		switch {
		case !r.NextHop.IsValid():
			v.bad(rp+".NextHop", "missing")
		case !pfx.Contains(r.NextHop):
			v.bad(rp+".NextHop", "%s is outside the subnet %s: the gateway must be in it", r.NextHop, pfx)
		}
	}
}

// vni checks a VXLAN network identifier: 24 bits, and on an Overlay
// network at least 4096 (Windows reserves the VSIDs below).
func (v *validator) vni(path string, id uint32) {
	switch {
	case id > MaxVNI:
		v.bad(path, "%d is more than 24 bits (at most %d)", id, MaxVNI)
	case v.overlay && id < MinOverlayVNI:
		v.bad(path, "%d: an Overlay network's VNI must be at least %d (Windows reserves those below)", id, MinOverlayVNI)
	case id == 0:
		v.bad(path, "0 is not a VNI")
	}
}

// route checks a route's destination: a real prefix, not a default route
// (it would take every packet of the host or the network), and outside
// the node's own block (it would send the node's pods' traffic elsewhere).
func (v *validator) route(path string, pfx netip.Prefix) {
	switch {
	case !pfx.IsValid():
		v.bad(path, "missing")
		return
	case pfx.Bits() == 0:
		v.bad(path, "%s is a default route: a plan routes other nodes' blocks only", pfx)
		return
	case pfx != pfx.Masked():
		v.bad(path, "%s has host bits set (the prefix is %s)", pfx, pfx.Masked())
	}
	for _, own := range v.subnets {
		if own.Overlaps(pfx) {
			v.bad(path, "%s overlaps the node's own block %s", pfx, own)
			return
		}
	}
}

func (v *validator) addr(path string, a netip.Addr) {
	switch {
	case !a.IsValid():
		v.bad(path, "missing")
	case a.IsUnspecified():
		v.bad(path, "%s is not an address a host has", a)
	}
}

func (v *validator) name(path, s string) {
	if s == "" {
		v.bad(path, "empty")
	}
	v.str(path, s, MaxNameLen)
}

func (v *validator) inSubnets(a netip.Addr) (netip.Prefix, bool) {
	for _, s := range v.subnets {
		if s.Contains(a) {
			return s, true
		}
	}
	return netip.Prefix{}, false
}

// endpoint checks the host endpoint (host) or a pod endpoint: it has an
// address inside the network's subnets, with the subnet's length.
func (v *validator) endpoint(path string, e *Endpoint, host bool) {
	if host || e.Name != "" {
		v.name(path+".Name", e.Name)
	}
	if e.MacAddress != "" && !macAddr.MatchString(e.MacAddress) {
		v.bad(path+".MacAddress", "%q is not a MAC address as HNS writes it (\"0E-2A-C0-A8-00-0A\")", e.MacAddress)
	}
	if e.Attach != "" && e.Attach != "Host" {
		v.bad(path+".Attach", "%q: want \"Host\" or nothing", e.Attach)
	}
	if e.Flags < 0 || int64(e.Flags) > 1<<32-1 {
		v.bad(path+".Flags", "%d is not a uint32", e.Flags)
	}
	v.str(path+".Pod", e.Pod, MaxStringLen)
	if len(e.IpConfigurations) == 0 {
		v.bad(path+".IpConfigurations", "no address")
	} else if v.bounded(path+".IpConfigurations", len(e.IpConfigurations), MaxIPConfigs) {
		c := e.IpConfigurations[0]
		cp := path + ".IpConfigurations[0]"
		if !c.IpAddress.IsValid() {
			v.bad(cp+".IpAddress", "missing")
		} else if v.policyOnly {
			// The owner's network: any address its IPAM gave.
			if c.PrefixLength < 0 || c.PrefixLength > c.IpAddress.BitLen() {
				v.bad(cp+".PrefixLength", "%d is not a prefix length of %s", c.PrefixLength, c.IpAddress)
			}
			if e.Pod == "" {
				v.bad(path+".Pod", "empty: a policy-only plan finds a pod's endpoint by the pod's address")
			}
		} else if s, ok := v.inSubnets(c.IpAddress); !ok {
			v.bad(cp+".IpAddress", "%s is outside the network's subnets %v", c.IpAddress, v.subnets)
		} else if c.PrefixLength != s.Bits() {
			v.bad(cp+".PrefixLength", "%d, but the subnet %s is a /%d", c.PrefixLength, s, s.Bits())
		} else if c.IpAddress == s.Addr() {
			v.bad(cp+".IpAddress", "%s is the subnet's own address", c.IpAddress)
		}
	}
	if v.bounded(path+".Routes", len(e.Routes), MaxSubnets) {
		for i, r := range e.Routes {
			if !r.DestinationPrefix.IsValid() || !r.NextHop.IsValid() {
				v.bad(idx(path+".Routes", i), "a route needs DestinationPrefix and NextHop")
			}
		}
	}
	if e.Dns != nil {
		v.bounded(path+".Dns.Search", len(e.Dns.Search), MaxSubnets)
		v.bounded(path+".Dns.ServerList", len(e.Dns.ServerList), MaxSubnets)
		for i, s := range e.Dns.Search {
			v.str(idx(path+".Dns.Search", i), s, MaxNameLen)
		}
	}
	v.policies(path+".Policies", e.Policies)
}

func (v *validator) podTemplate(t *PodEndpointTemplate) {
	const path = "podEndpoint"
	if !t.Gateway.IsValid() {
		v.bad(path+".Gateway", "missing")
	}
	v.str(path+".MacAddressRule", t.MacAddressRule, MaxNameLen)
	v.str(path+".DnsSearch", t.DnsSearch, MaxNameLen)
	v.bounded(path+".DnsServers", len(t.DnsServers), MaxSubnets)
	if v.bounded(path+".Routes", len(t.Routes), MaxSubnets) {
		for i, r := range t.Routes {
			if !r.DestinationPrefix.IsValid() || !r.NextHop.IsValid() {
				v.bad(idx(path+".Routes", i), "a route needs DestinationPrefix and NextHop")
			}
		}
	}
	v.policies(path+".Policies", t.Policies)
}

// policies checks every policy's settings; ACLs by acl.
func (v *validator) policies(path string, ps []Policy) {
	if !v.bounded(path, len(ps), MaxPolicies) {
		return
	}
	type slot struct {
		dir, ruleType string
		prio          uint16
	}
	prios := map[slot]int{}
	ids := map[string]int{}
	for i, pol := range ps {
		pp := idx(path, i)
		v.str(pp+".Type", pol.Type, MaxNameLen)
		switch s := pol.Settings.(type) {
		case ACL:
			v.acl(pp+".Settings", s)
			k := slot{s.Direction, s.RuleType, s.Priority}
			if j, dup := prios[k]; dup {
				v.bad(pp+".Settings.Priority", "%d is also the priority of %s[%d] (%s %s): HNS's order between them is undefined", s.Priority, path, j, s.Direction, s.RuleType)
			}
			prios[k] = i
			if s.Id != "" {
				if j, dup := ids[s.Id]; dup {
					v.bad(pp+".Settings.Id", "%q is also the Id of %s[%d]", s.Id, path, j)
				}
				ids[s.Id] = i
			}
		case ProviderAddress:
			v.addr(pp+".Settings.ProviderAddress", s.ProviderAddress)
		case NetAdapterName:
			v.name(pp+".Settings.NetworkAdapterName", s.NetworkAdapterName)
		case OutBoundNAT:
			v.bounded(pp+".Settings.Exceptions", len(s.Exceptions), MaxListEntries)
		case SDNRoute:
			if !s.DestinationPrefix.IsValid() {
				v.bad(pp+".Settings.DestinationPrefix", "missing")
			}
		case RemoteSubnetRouteSetting:
			v.bad(pp, "RemoteSubnetRoute policies go in remoteSubnetRoutes, where the agent adds them one by one")
		case Raw:
			v.str(pp+".Settings", string(s.JSON), MaxStringLen)
		}
	}
}

// truncate keeps an echoed value short; %q makes it printable.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
