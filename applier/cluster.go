package applier

import (
	"cmp"
	"net/netip"

	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/compiler/acl"
)

// Caches are the cluster's informer caches as the reconciler reads them;
// *kube.Client's are.
type Caches interface {
	// Synced says the caches hold the whole cluster (until then a pass
	// would program pods from a partial view).
	Synced() bool
	NodeName() string
	Pods() []kube.Pod
	Namespaces() []kube.Namespace
	Nodes() []kube.Node
	BlockAffinities() []kube.BlockAffinity
	// TunnelMACs are the nodes' VXLAN tunnel MACs, HNS form, by node.
	TunnelMACs() map[string]string
}

// ClusterOf turns the caches into what a pass reads: the pods with an
// address (not on the host network) as the ACL renderer knows them, with
// their nodes and named ports; the namespaces' labels; each node's
// InternalIP (IPv4) and confirmed Calico blocks; the tunnel MACs; the
// competing dataplanes' pods on this node, sorted as Pods are. ok is
// false while the caches are not synced. It runs on every pass and is
// linear in pods.
func ClusterOf(k Caches) (c *Cluster, ok bool) {
	if !k.Synced() {
		return nil, false
	}
	c = &Cluster{PodNodes: map[string]string{}, Namespaces: map[string]map[string]string{}, TunnelMACs: k.TunnelMACs()}
	self := k.NodeName()
	for _, p := range k.Pods() {
		if p.Competes(self) { // host-network pods: before the skip below
			c.Competitors = append(c.Competitors, Competing{What: p.Competitor, Pod: p.Key()})
		}
		if p.HostNetwork || len(p.IPs) == 0 {
			continue
		}
		pod := &acl.Pod{Namespace: p.Namespace, Name: p.Name, IP: p.IPs[0], Labels: p.Labels, ServiceAccount: cmp.Or(p.ServiceAccount, "default")}
		for _, ip := range p.IPs {
			if ip.Is4() {
				pod.IP = ip // Windows pods are IPv4 (the plan's block)
				break
			}
		}
		for _, port := range p.Ports {
			if port.Name != "" {
				pod.Ports = append(pod.Ports, acl.NamedPort{Name: port.Name, Protocol: protocolNumber[cmp.Or(port.Protocol, "TCP")], Port: uint16(port.Port)})
			}
		}
		c.Pods = append(c.Pods, pod)
		c.PodNodes[pod.Key()] = p.Node
	}
	for _, ns := range k.Namespaces() {
		c.Namespaces[ns.Name] = ns.Labels
	}
	c.Blocks, c.NodeAddrs = map[string][]netip.Prefix{}, map[string]netip.Addr{}
	for _, n := range k.Nodes() {
		for _, a := range n.Addresses {
			if a.Type == "InternalIP" && a.Addr.Is4() {
				c.NodeAddrs[n.Name] = a.Addr
				break
			}
		}
	}
	c.NodeAddr = c.NodeAddrs[self]
	for _, b := range k.BlockAffinities() {
		if b.State == "confirmed" && !b.Deleted {
			c.Blocks[b.Node] = append(c.Blocks[b.Node], b.CIDR)
		}
	}
	return c, true
}

// protocolNumber is a container port's protocol as IANA numbers it.
var protocolNumber = map[string]int{"TCP": 6, "UDP": 17, "SCTP": 132}
