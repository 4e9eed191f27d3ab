// Package compiler compiles a loaded, vetted intent into one NodePlan per
// Windows node: the node's IPAM block, its HNS network, host endpoint,
// routes to other nodes, NAT and pod endpoint template — and, with an
// inventory, its pod endpoints. Output is deterministic: the same input
// gives byte-identical plans.
package compiler

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/check"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/ipam"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/policy"
	"github.com/hnsplan/hnsplan/compiler/topology"
)

// Rule ids the plan compiler reports (policies/ipam.cue, phase compile;
// policies/netpol.cue, the ACL budget).
const (
	RuleBlockInvalid  = "ipam-block-invalid"
	RuleNoBlock       = "ipam-no-block"
	RulePodIPOutside  = "pod-ip-outside-block"
	RulePodIPDup      = "pod-ip-duplicate"
	RuleACLBudget     = "policy-acl-budget"
	macPrefix         = "0E-2A"
	calicoMACAnnot    = "projectcalico.org/VXLANTunnelMACAddr"
	flannelBackendKey = "flannel.alpha.coreos.com/backend-data"
)

// Result is a build (Build): the intent as loaded, its policy program and,
// when the compile ran (Compiled), one plan per Windows node.
type Result struct {
	// Intent is the intent as loaded, with its inventory.
	Intent *intent.Intent
	// Program is the intent's policy program, compiled once for vet and
	// the plans, with source positions relative to the intent directory;
	// nil when it has no tier or the compile did not run. An intent
	// without Windows nodes has one too: it decides the Linux pods.
	Program *plan.Program
	Plans   []*plan.NodePlan // one per Windows node with a block, in node order
	IPAM    *ipam.Result
}

// compile compiles res.Intent, which must have loaded and vetted without
// error, into res, with the policy program vet compiled (nil: none). The
// findings are the compiler's own (blocks, pod addresses, ACL budgets),
// with the catalog's severities; the caller applies cluster.constraints
// with check.Override. t is the cluster's topology (topology.New), which
// vet has used too.
func compile(res *Result, cat check.Catalog, prog *plan.Program, t *topology.Topology) diag.List {
	in := res.Intent
	c := &compilation{in: in, c: in.Cluster, cat: cat, t: t}
	c.podCIDRs = usesPodCIDR(in.Cluster)
	if in.Cluster.PolicyOnly() {
		// The CNI assigns the Windows pods' addresses: no block is the
		// compiler's to give.
		c.ipam = &ipam.Result{Blocks: map[string]ipam.Block{}}
	} else {
		c.ipam = ipam.Assign(c.t, in.Inventory, in.Lock, c.podCIDRs)
	}
	for _, p := range c.ipam.Problems {
		rule := RuleNoBlock
		if p.Kind == "invalid" {
			rule = RuleBlockInvalid
		}
		c.report(rule, p.Node, c.c.Pos("nodes", p.Node), intent.Path("nodes", p.Node), "%s", p.Message)
	}
	c.indexInventory()
	c.remotes()
	// The policy program; its findings are vet's (check.VetProgram).
	if prog != nil && len(prog.Tiers) > 0 {
		relativeSources(prog, in.Dir)
		c.program = prog
	}
	if c.program != nil || len(in.Inventory.Pods) > 0 {
		c.pods = policy.Pods(&in.Inventory)
		c.namespaces = policy.NamespaceLabels(in)
	}
	if c.program != nil {
		c.renderer = acl.NewRenderer(c.program, acl.NewWorld(c.pods, c.namespaces, nil))
	}
	res.Program, res.IPAM = c.program, c.ipam
	for _, n := range c.t.Windows {
		if in.Cluster.PolicyOnly() {
			res.Plans = append(res.Plans, c.policyOnlyPlan(n))
			continue
		}
		b, ok := c.ipam.Blocks[n.Name]
		if !ok {
			continue
		}
		res.Plans = append(res.Plans, c.nodePlan(n, b))
	}
	return c.findings
}

// forUpdateLock drops the findings that `compile --update-lock` resolves:
// a lock that does not cover every node, or names blocks of no pool, is
// what the update rewrites.
func forUpdateLock(findings diag.List) diag.List {
	var out diag.List
	for _, f := range findings {
		if f.Rule != "ipam-lock-stale" && f.Rule != "ipam-unlocked" {
			out = append(out, f)
		}
	}
	return out
}

// relativeSources rewrites the program's source positions relative to the
// intent directory, so that a plan does not depend on where the compiler
// ran.
func relativeSources(prog *plan.Program, dir string) {
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return
	}
	relOf := map[string]string{}
	rel := func(pos string) string {
		file, rest, ok := strings.Cut(pos, ":")
		for ok && !strings.HasSuffix(file, ".yaml") && !strings.HasSuffix(file, ".yml") {
			var more string
			more, rest, ok = strings.Cut(rest, ":")
			file += ":" + more
		}
		if !ok {
			return pos
		}
		r, seen := relOf[file]
		if !seen {
			// Once per file, not per source: filepath.Abs asks the
			// system for the working directory each time, and a policy
			// of 10,000 peers has as many sources.
			r = ""
			if abs, err := filepath.Abs(file); err == nil {
				if rr, err := filepath.Rel(absDir, abs); err == nil && !strings.HasPrefix(rr, "..") {
					r = filepath.ToSlash(rr)
				}
			}
			relOf[file] = r
		}
		if r == "" {
			return pos
		}
		return r + ":" + rest
	}
	for i := range prog.Tiers {
		for j := range prog.Tiers[i].Policies {
			p := &prog.Tiers[i].Policies[j]
			p.Source = rel(p.Source)
			for k := range p.IngressRules {
				p.IngressRules[k].Source = rel(p.IngressRules[k].Source)
			}
			for k := range p.EgressRules {
				p.EgressRules[k].Source = rel(p.EgressRules[k].Source)
			}
		}
	}
}

// usesPodCIDR reports whether nodes take their pod range from podCIDR.
func usesPodCIDR(c *intent.Cluster) bool {
	switch c.Networking {
	case intent.FlannelHostGW, intent.FlannelVXLAN, intent.StaticRoutes:
		return true
	case intent.CalicoBGP:
		return c.IPAM.Type == "host-local" || c.Datastore == "kubernetes"
	}
	return c.IPAM.Type == "host-local"
}

type compilation struct {
	in       *intent.Intent
	c        *intent.Cluster
	cat      check.Catalog
	t        *topology.Topology
	ipam     *ipam.Result
	podCIDRs bool
	findings diag.List

	program    *plan.Program
	renderer   *acl.Renderer // one for all nodes: its caches are the cluster's
	pods       []*acl.Pod
	podByKey   map[string]*acl.Pod
	namespaces map[string]map[string]string

	routeTable      *plan.RouteTable             // shared by every plan; nil without routes
	nodeAnnotations map[string]map[string]string // inventory Nodes
	podsByNode      map[string][]*intent.Pod
	dnsServers      []netip.Addr
	natBySubnet     map[netip.Prefix][]netip.Prefix // natExceptions
}

func (c *compilation) report(rule, node string, pos diag.Pos, path, format string, args ...any) {
	sev := diag.Error
	if r, ok := c.cat[rule]; ok {
		sev, _ = diag.ParseSeverity(r.Severity)
	}
	c.findings.Add(diag.Finding{Rule: rule, Severity: sev, Node: node, Pos: pos, Path: path, Message: fmt.Sprintf(format, args...)})
}

func (c *compilation) indexInventory() {
	c.nodeAnnotations = map[string]map[string]string{}
	for _, n := range c.in.Inventory.Nodes {
		c.nodeAnnotations[n.Name] = n.Annotations
	}
	c.podsByNode = map[string][]*intent.Pod{}
	for i := range c.in.Inventory.Pods {
		p := &c.in.Inventory.Pods[i]
		if p.Spec.NodeName != "" && !p.Spec.HostNetwork {
			c.podsByNode[p.Spec.NodeName] = append(c.podsByNode[p.Spec.NodeName], p)
		}
	}
	for _, s := range c.in.Inventory.Services {
		if s.Namespace == "kube-system" && s.Name == "kube-dns" {
			if a, err := netip.ParseAddr(s.Spec.ClusterIP); err == nil {
				c.dnsServers = []netip.Addr{a}
			}
		}
	}
}

// vxlan reports whether the node network is an Overlay.
func (c *compilation) vxlan() bool {
	return c.c.Networking == intent.CalicoVXLAN || c.c.Networking == intent.FlannelVXLAN
}

func (c *compilation) vni() uint32 {
	if c.c.VXLAN != nil {
		return uint32(c.c.VXLAN.VNI)
	}
	return 4096
}

func (c *compilation) vxlanPort() uint16 {
	if c.c.VXLAN != nil {
		return uint16(c.c.VXLAN.Port)
	}
	return 4789
}

func (c *compilation) nodePlan(n *intent.Node, b ipam.Block) *plan.NodePlan {
	p := &plan.NodePlan{
		FormatVersion: plan.FormatVersion, Kind: plan.Kind, Node: n.Name,
		Cluster: c.c.Name, Networking: string(c.c.Networking), Replacement: c.c.Windows.Replacement,
	}
	if r := c.c.Windows.Rollout; r != nil {
		p.Rollout = &plan.Rollout{MaxUnavailable: r.MaxUnavailable, Order: r.Order}
		if r.VXLANChange == plan.VXLANAllAtOnce {
			// Only when set: rolling is what a plan without it means, so
			// that plans compiled before the setting existed stay the same.
			p.Rollout.VXLANChange = r.VXLANChange
		}
		if r.BuildRegression == plan.BuildHold {
			// Only when set, for the same reason: proceed is what a
			// plan without it means.
			p.Rollout.BuildRegression = r.BuildRegression
		}
	}
	bits := b.Prefix.Bits()
	gw := b.Gateway()
	defaultRoute := plan.Route{NextHop: gw, DestinationPrefix: netip.MustParsePrefix("0.0.0.0/0")}
	if b.Prefix.Addr().Is6() {
		defaultRoute.DestinationPrefix = netip.MustParsePrefix("::/0")
	}
	subnet := plan.Subnet{IpAddressPrefix: b.Prefix, Routes: []plan.Route{defaultRoute}}
	p.Network = plan.Network{Name: c.c.Windows.NetworkName, Immutable: []string{"Name", "Type", "Subnet"}}
	hostEP := plan.Endpoint{
		Name:             c.c.Windows.NetworkName + "_ep",
		IpConfigurations: []plan.IpConfig{{IpAddress: b.HostEndpoint(), PrefixLength: bits}},
	}
	podGW := gw
	if c.vxlan() {
		p.Network.Type = "Overlay"
		subnet.Policies = []plan.Policy{plan.NewPolicy(plan.VSID{IsolationId: c.vni()})}
		p.Network.Policies = []plan.Policy{
			plan.NewPolicy(plan.VxlanPort{Port: c.vxlanPort()}),
			plan.NewPolicy(plan.HostRouteSetting{}),
		}
		p.Network.Immutable = append(p.Network.Immutable, "VNI", "VxlanPort")
		hostEP.Flags = plan.FlagRemoteEndpoint
		hostEP.Policies = []plan.Policy{plan.NewPolicy(plan.ProviderAddress{ProviderAddress: n.Addr})}
		p.Unresolved = append(p.Unresolved, plan.Unresolved{Field: "hostEndpoint.MacAddress",
			Source: fmt.Sprintf("the MAC address of the host adapter that holds %s (read on the node)", n.Addr)})
	} else {
		p.Network.Type = "L2Bridge"
		if n.Interface != "" {
			p.Network.Policies = []plan.Policy{plan.NewPolicy(plan.NetAdapterName{NetworkAdapterName: n.Interface})}
		} else {
			p.Unresolved = append(p.Unresolved, plan.Unresolved{Field: "network.Policies[NetAdapterName]",
				Source: fmt.Sprintf("the host adapter that holds %s (nodes.%s.interface is unset; read on the node)", n.Addr, n.Name)})
		}
		hostEP.Attach = "Host"
		podGW = b.HostEndpoint() // L2Bridge pods route through the host endpoint (Calico)
	}
	p.Network.Ipams = []plan.Ipam{{Type: "Static", Subnets: []plan.Subnet{subnet}}}
	p.HostEndpoint = hostEP
	p.SingleNetwork = c.c.Windows.UseSingleNetwork
	p.PodEndpoint = c.podTemplate(n, b, podGW, &p.Unresolved)
	p.Program = c.program
	c.routes(p)
	c.endpoints(p, n, b)
	return p
}

func (c *compilation) podTemplate(n *intent.Node, b ipam.Block, gw netip.Addr, unresolved *[]plan.Unresolved) plan.PodEndpointTemplate {
	def := netip.MustParsePrefix("0.0.0.0/0")
	if gw.Is6() {
		def = netip.MustParsePrefix("::/0")
	}
	t := plan.PodEndpointTemplate{
		Gateway:        gw,
		MacAddressRule: c.c.Windows.VXLANMACPrefix + "-<ip hex>",
		DnsSearch:      "{namespace}.svc." + c.c.DNSDomain,
		DnsServers:     c.dnsServers,
		Routes:         []plan.Route{{NextHop: gw, DestinationPrefix: def}},
	}
	if len(c.dnsServers) == 0 {
		*unresolved = append(*unresolved, plan.Unresolved{Field: "podEndpoint.DnsServers",
			Source: "the cluster DNS Service kube-system/kube-dns (its clusterIP; the kubelet's --cluster-dns)"})
	}
	natOut := false
	if c.podCIDRs {
		natOut = c.t.PodCIDRNATOutgoing(n)
	} else if p := c.t.PoolContaining(b.Prefix); p != nil {
		natOut = p.NATOutgoing
	}
	if natOut {
		t.Policies = append(t.Policies, plan.NewPolicy(plan.OutBoundNAT{Exceptions: c.natExceptions(n)}))
	}
	if c.vxlan() {
		t.Policies = append(t.Policies, plan.NewPolicy(plan.ProviderAddress{ProviderAddress: n.Addr}))
	} else {
		// L2Bridge: reach the host and the services through the vSwitch.
		t.Policies = append(t.Policies, plan.NewPolicy(plan.SDNRoute{DestinationPrefix: netip.PrefixFrom(n.Addr, n.Addr.BitLen()), NeedEncap: true}))
		for _, s := range c.c.ServiceCIDRs {
			t.Policies = append(t.Policies, plan.NewPolicy(plan.SDNRoute{DestinationPrefix: s, NeedEncap: true}))
		}
	}
	return t
}

// natExceptions is topology.NATExceptions(c.c, n, true), which depends on
// the node only through its host subnet: it is merged once per subnet (a
// sort of every pool, 200 of them in a large cluster, for each of 5,000
// nodes was a tenth of a second), and each plan gets its own copy.
func (c *compilation) natExceptions(n *intent.Node) []netip.Prefix {
	if c.natBySubnet == nil {
		c.natBySubnet = map[netip.Prefix][]netip.Prefix{}
	}
	ex, ok := c.natBySubnet[n.Subnet]
	if !ok {
		ex = topology.NATExceptions(c.c, n, true)
		c.natBySubnet[n.Subnet] = ex
	}
	return slices.Clone(ex)
}

// remotes makes the route table, once for all plans: every node's block,
// address and tunnel MAC, and the Linux nodes whose block only the live
// cluster knows. A plan's routes are the table less its own node; nil when
// the networking leaves routes to others (BGP, flanneld, the cloud).
func (c *compilation) remotes() {
	if c.c.PolicyOnly() {
		return // the CNI's network: its owner routes
	}
	var typ string
	var vni uint32
	var port uint16
	switch c.c.Networking {
	case intent.StaticRoutes:
		typ = plan.RoutesHost
	case intent.CalicoVXLAN, intent.FlannelVXLAN:
		typ, vni, port = plan.RoutesRemoteSubnet, c.vni(), c.vxlanPort()
	default:
		return
	}
	var nodes []plan.RouteNode
	for i := range c.c.Nodes {
		n := &c.c.Nodes[i]
		e := plan.RouteNode{Node: n.Name, Address: n.Addr}
		if typ == plan.RoutesRemoteSubnet {
			e.TunnelMAC = c.vtepMAC(n)
		}
		if b, ok := c.ipam.Blocks[n.Name]; ok {
			e.Blocks = []netip.Prefix{b.Prefix}
		} else if n.IsWindows() || typ == plan.RoutesHost {
			continue
		} else {
			e.LiveBlocks = true
		}
		nodes = append(nodes, e)
	}
	pools := make([]netip.Prefix, 0, len(c.c.Pools))
	for _, p := range c.c.Pools {
		pools = append(pools, p.CIDR)
	}
	slices.SortFunc(pools, plan.ComparePrefix)
	key := plan.RouteKey(c.c.Name, string(c.c.Networking), typ, vni, port, pools)
	c.routeTable = plan.NewRouteTable(c.c.Name, key, typ, vni, nodes)
}

// routes gives a plan its route table, or says who routes instead.
func (c *compilation) routes(p *plan.NodePlan) {
	switch c.c.Networking {
	case intent.CalicoBGP:
		p.Routing = "bgp"
	case intent.FlannelHostGW, intent.FlannelVXLAN:
		p.Routing = "flanneld"
	case intent.CloudProvider:
		p.Routing = "cloud-provider"
	}
	p.Routes = c.routeTable
}

// vtepMAC reads a node's VXLAN tunnel MAC from the inventory.
func (c *compilation) vtepMAC(n *intent.Node) string {
	ann := c.nodeAnnotations[n.Name]
	if c.c.Networking == intent.FlannelVXLAN {
		var bd struct{ VtepMAC string }
		if json.Unmarshal([]byte(ann[flannelBackendKey]), &bd) == nil {
			return hnsMAC(bd.VtepMAC)
		}
		return ""
	}
	return hnsMAC(ann[calicoMACAnnot])
}

// hnsMAC writes a MAC address as HNS does: upper case, dash-separated.
func hnsMAC(s string) string {
	return strings.ToUpper(strings.ReplaceAll(s, ":", "-"))
}

// PodMAC applies the MAC address rule with Calico's default prefix: 0E-2A
// followed by the address's four octets in hex.
func PodMAC(a netip.Addr) string { return podMAC(macPrefix, a) }

// podMAC applies the MAC address rule with prefix (windows.vxlanMACPrefix).
func podMAC(prefix string, a netip.Addr) string {
	if !a.Is4() {
		return ""
	}
	b := a.As4()
	return fmt.Sprintf("%s-%02X-%02X-%02X-%02X", prefix, b[0], b[1], b[2], b[3])
}

// aclBudget is the ACL count past which policy-acl-budget warns.
const aclBudget = 1000

// render returns a pod's ingress and egress ACLs on a node.
func (c *compilation) render(key string, hosts []netip.Addr) ([]plan.ACL, error) {
	if c.podByKey == nil {
		c.podByKey = map[string]*acl.Pod{}
		for _, p := range c.pods {
			c.podByKey[p.Key()] = p
		}
	}
	p, ok := c.podByKey[key]
	if !ok {
		return nil, fmt.Errorf("not in the inventory's pods")
	}
	in, out, err := c.renderer.RenderOn(p, hosts)
	return append(in, out...), err
}

// policyOnlyPlan is the plan of a node whose network and pod endpoints
// are the CNI's: the networks to find the endpoints on, the policy
// program, and, with an inventory, the node's pods with their ACL lists.
func (c *compilation) policyOnlyPlan(n *intent.Node) *plan.NodePlan {
	p := &plan.NodePlan{
		FormatVersion: plan.FormatVersion, Kind: plan.Kind, Node: n.Name,
		Cluster: c.c.Name, Networking: string(c.c.Networking),
		PolicyOnly: &plan.PolicyOnly{Owner: c.c.CNI(), Networks: slices.Clone(c.c.Windows.NetworkMatch), NodeAddress: n.Addr},
	}
	c.routes(p)
	p.Program = c.program
	// Kubelet probes come from the node's own address.
	hosts := []netip.Addr{n.Addr}
	for _, np := range c.networkedPods(n) {
		ep := plan.Endpoint{Pod: np.key, IpConfigurations: []plan.IpConfig{{IpAddress: np.ip, PrefixLength: np.ip.BitLen()}}}
		acls, ok := c.aclPolicies(n, np, hosts)
		if !ok {
			continue
		}
		ep.Policies = acls
		p.Endpoints = append(p.Endpoints, ep)
	}
	return p
}

// nodePod is an inventory pod of a node that has an endpoint there.
type nodePod struct {
	pod *intent.Pod
	key string // namespace/name
	ip  netip.Addr
}

// networkedPods are the inventory pods of node n that have an endpoint,
// by key: an address, not finished (a finished pod keeps its address in
// its status, and has no endpoint), and the first pod of each address (a
// second is reported: the inventory is stale, or a CNI gave one address
// twice).
func (c *compilation) networkedPods(n *intent.Node) []nodePod {
	pods := c.podsByNode[n.Name]
	slices.SortFunc(pods, func(a, b *intent.Pod) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	var out []nodePod
	seen := map[netip.Addr]string{}
	for _, pod := range pods {
		ip, err := netip.ParseAddr(policy.PodIP(pod))
		if err != nil || pod.Status.Phase == "Succeeded" || pod.Status.Phase == "Failed" {
			continue // not networked yet, or its endpoint is gone
		}
		key := pod.Namespace + "/" + pod.Name
		if other, dup := seen[ip]; dup {
			c.report(RulePodIPDup, n.Name, pod.Source.Pos, "status.podIP",
				"pod %s on node %s has address %s, which pod %s has too: it gets no endpoint in the plan", key, n.Name, ip, other)
			continue
		}
		seen[ip] = key
		out = append(out, nodePod{pod: pod, key: key, ip: ip})
	}
	return out
}

// aclPolicies renders a pod's ACL list as policies, nil without a policy
// program; ok is false when it cannot be rendered (reported).
func (c *compilation) aclPolicies(n *intent.Node, np nodePod, hosts []netip.Addr) (acls []plan.Policy, ok bool) {
	if c.renderer == nil {
		return nil, true
	}
	list, err := c.render(np.key, hosts)
	if err != nil {
		c.report(RuleACLBudget, n.Name, np.pod.Source.Pos, "", "pod %s: %v", np.key, err)
		return nil, false
	}
	if len(list) > aclBudget {
		c.report(RuleACLBudget, n.Name, np.pod.Source.Pos, "",
			"pod %s gets %d ACLs (more than %d): every policy update reprograms them all, and programming slows; consider narrower selectors or fewer rules", np.key, len(list), aclBudget)
	}
	for _, a := range list {
		acls = append(acls, plan.NewPolicy(a))
	}
	return acls, true
}

// endpoints renders the node's pod endpoints from the inventory.
func (c *compilation) endpoints(p *plan.NodePlan, n *intent.Node, b ipam.Block) {
	hosts := []netip.Addr{n.Addr, b.HostEndpoint()}
	for _, np := range c.networkedPods(n) {
		ip, name := np.ip, np.key
		switch {
		case !b.Prefix.Contains(ip):
			c.report(RulePodIPOutside, n.Name, np.pod.Source.Pos, "status.podIP",
				"pod %s on node %s has address %s, outside the node's block %s: it was networked from another block; recreate the pod", name, n.Name, ip, b.Prefix)
			continue
		case b.Reserved(ip):
			c.report(RulePodIPOutside, n.Name, np.pod.Source.Pos, "status.podIP",
				"pod %s on node %s has address %s, one of the 4 addresses Windows reserves in block %s (.0, .1 gateway, .2 host endpoint, broadcast)", name, n.Name, ip, b.Prefix)
			continue
		}
		acls, ok := c.aclPolicies(n, np, hosts)
		if !ok {
			continue
		}
		p.Endpoints = append(p.Endpoints, plan.Endpoint{
			Pod:              name,
			IpConfigurations: []plan.IpConfig{{IpAddress: ip, PrefixLength: b.Prefix.Bits()}},
			MacAddress:       podMAC(c.c.Windows.VXLANMACPrefix, ip),
			Dns:              &plan.Dns{Search: []string{np.pod.Namespace + ".svc." + c.c.DNSDomain}, ServerList: c.dnsServers},
			Routes:           p.PodEndpoint.Routes,
			Policies:         slices.Concat(p.PodEndpoint.Policies, acls),
		})
	}
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
