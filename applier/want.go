package applier

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// Cluster is what the reconciler reads of the live cluster. The agent
// fills it from its informers (applier/kube); nil means "no cluster": the
// plan's own rendered endpoints (from a compile-time inventory) are used.
type Cluster struct {
	// Pods are the cluster's pods (every node: policies select remote
	// pods too), with their addresses, labels and container ports.
	Pods []*acl.Pod
	// PodNode is the node of a pod of Pods, "" if it has none (or the
	// pod is not one of Pods); nil means no pod is on any node. It is a
	// lookup rather than a map by pod key: at 50,000 pods such a map
	// cost 4 MiB of the agent's live heap next to the ClusterCache's
	// own record of each pod's node.
	PodNode func(pod *acl.Pod) string
	// Namespaces are the labels of every namespace.
	Namespaces map[string]map[string]string
	// TunnelMACs are the other nodes' VXLAN tunnel MACs by node name.
	TunnelMACs map[string]string
	// NodeAddr is this node's address, where the plan does not say it
	// (an L2Bridge host endpoint has no ProviderAddress).
	NodeAddr netip.Addr
	// Blocks are the IPAM blocks each node holds (Calico's confirmed
	// BlockAffinities), and NodeAddrs the nodes' addresses: the routes to
	// blocks the plan leaves to the live cluster (Linux nodes' blocks,
	// claimed at run time) are made from them.
	Blocks    map[string][]netip.Prefix
	NodeAddrs map[string]netip.Addr
	// Competitors are the competing dataplanes' pods on this node
	// (kube.Pod.Competes): while the plan does not share the node with
	// one (competing), a pass writes nothing (state conflict).
	Competitors []Competing

	// world is Pods and Namespaces as the renderer knows them, when a
	// ClusterCache (cache) made the Cluster: nil, WantOf makes one.
	world *acl.World
	cache *ClusterCache
}

// nodeOf is the node of pod (PodNode's).
func (c *Cluster) nodeOf(pod *acl.Pod) string {
	if c.PodNode == nil {
		return ""
	}
	return c.PodNode(pod)
}

// Competing is a competing dataplane's pod on this node.
type Competing struct {
	What kube.Competitor
	Pod  string // namespace/name
}

func (c Competing) String() string { return c.What.String() + " pod " + c.Pod }

// WantOf is what HNS should hold for plan p and cluster c: the plan's
// network, host endpoint and routes (with the tunnel MACs only the
// cluster knows), and an ACL list for each of this node's pods whose
// address is in the network's subnet. Pending lists what must wait for
// the cluster (a route whose tunnel MAC is unknown).
//
// For a policy-only plan every pod of this node with an address gets an
// ACL list (empty without a policy program: the agent's ACLs go), whatever
// its address: the CNI's IPAM gave it, and no subnet is the plan's.
func WantOf(p *plan.NodePlan, c *Cluster) (want *hns.Want, pending []string, err error) {
	var live hns.LiveValues
	if c != nil {
		live.TunnelMACs = c.TunnelMACs
	}
	if want, pending, err = hns.WantFromPlan(p, live); err != nil {
		return nil, nil, err
	}
	if c == nil {
		return want, pending, nil
	}
	if p.PolicyOnly != nil {
		return policyOnlyWant(p, c, want)
	}
	pending = append(pending, liveRoutes(p, c, want)...)
	// The live cluster replaces the compile-time inventory.
	want.PodACLs = map[netip.Addr][]plan.ACL{}
	if p.Program == nil {
		return want, pending, nil // no policy: HNS's default, nothing to program
	}
	r := c.renderer(p.Program)
	hosts := hostAddrs(p, c.NodeAddr)
	for _, pod := range c.Pods {
		if c.nodeOf(pod) != p.Node || !pod.IP.IsValid() || !inSubnets(want, pod.IP) {
			continue
		}
		in, out, err := r.RenderOn(pod, hosts)
		if err != nil {
			return nil, nil, fmt.Errorf("render the ACLs of pod %s: %w", pod.Key(), err)
		}
		want.PodACLs[pod.IP] = hns.CanonicalACLs(slices.Concat(in, out))
	}
	return want, pending, nil
}

// policyOnlyWant is WantOf's want of a policy-only plan with a cluster:
// the ACL lists of this node's pods, rendered with the node's own address
// as the host (kubelet probes), by the pods' addresses.
func policyOnlyWant(p *plan.NodePlan, c *Cluster, want *hns.Want) (*hns.Want, []string, error) {
	want.PodACLs, want.PodNames = map[netip.Addr][]plan.ACL{}, map[netip.Addr]string{}
	var pending []string
	shared := map[netip.Addr]bool{}
	var r *acl.Renderer
	if p.Program != nil {
		r = c.renderer(p.Program)
	}
	hosts := hostAddrs(p, c.NodeAddr)
	for _, pod := range c.Pods {
		if c.nodeOf(pod) != p.Node || !pod.IP.IsValid() {
			continue
		}
		if other, dup := want.PodNames[pod.IP]; dup || shared[pod.IP] {
			// Two live pods of this node on one address: one is on its
			// way out. Which endpoint is whose cannot be told, so the
			// address keeps the ACLs it has until one pod is gone.
			if dup {
				pending = append(pending, fmt.Sprintf("address %s: pods %s and %s both report it; its endpoints keep their ACLs until one of the pods is gone", pod.IP, other, pod.Key()))
			}
			delete(want.PodACLs, pod.IP)
			delete(want.PodNames, pod.IP)
			shared[pod.IP] = true
			continue
		}
		acls := []plan.ACL{}
		if r != nil {
			in, out, err := r.RenderOn(pod, hosts)
			if err != nil {
				return nil, nil, fmt.Errorf("render the ACLs of pod %s: %w", pod.Key(), err)
			}
			acls = hns.CanonicalACLs(slices.Concat(in, out))
		}
		want.PodACLs[pod.IP], want.PodNames[pod.IP] = acls, pod.Key()
	}
	return want, pending, nil
}

// liveRoutes adds the VXLAN routes to the blocks of the nodes whose route
// table entries leave their blocks to the live cluster (LiveBlocks), from
// the cluster's BlockAffinities, and says which must wait.
func liveRoutes(p *plan.NodePlan, c *Cluster, want *hns.Want) (pending []string) {
	if len(want.Network.Subnets) == 0 || want.Network.Subnets[0].VNI == 0 {
		return nil // not VXLAN: routes to other nodes are BGP's or the cloud's
	}
	vni := want.Network.Subnets[0].VNI
	have := map[netip.Prefix]bool{}
	for _, r := range want.Network.RemoteRoutes {
		have[r.Prefix] = true
	}
	for _, e := range p.LiveBlockNodes() {
		node := e.Node
		blocks := c.Blocks[node]
		if len(blocks) == 0 {
			pending = append(pending, fmt.Sprintf("routes to node %s: it holds no block yet (no confirmed BlockAffinity)", node))
		}
		for _, b := range blocks {
			mac, pa := cmp.Or(e.TunnelMAC, c.TunnelMACs[node]), c.NodeAddrs[node]
			if !pa.IsValid() {
				pa = e.Address
			}
			switch {
			case have[b]:
			case mac == "" || !pa.IsValid():
				pending = append(pending, fmt.Sprintf("route %s to %s: its tunnel MAC or address is not known yet", b, node))
			default:
				want.Network.RemoteRoutes = append(want.Network.RemoteRoutes, hns.RemoteRoute{Prefix: b, VNI: vni, ProviderAddress: pa, DRMAC: mac})
				have[b] = true
			}
		}
	}
	return pending
}

// hostAddrs are the node's own addresses, which reach its pods (kubelet
// probes): its management address and the host endpoint's, as the
// compiler renders them.
func hostAddrs(p *plan.NodePlan, nodeAddr netip.Addr) []netip.Addr {
	var out []netip.Addr
	if pa, ok := plan.Find[plan.ProviderAddress](p.HostEndpoint.Policies); ok {
		out = append(out, pa.ProviderAddress)
	} else if nodeAddr.IsValid() {
		out = append(out, nodeAddr)
	} else if po := p.PolicyOnly; po != nil && po.NodeAddress.IsValid() {
		out = append(out, po.NodeAddress) // the intent's, while the Node shows none
	}
	for _, c := range p.HostEndpoint.IpConfigurations {
		out = append(out, c.IpAddress)
	}
	return out
}

func inSubnets(w *hns.Want, a netip.Addr) bool {
	for _, s := range w.Network.Subnets {
		if s.Prefix.Contains(a) {
			return true
		}
	}
	return false
}
