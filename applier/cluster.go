package applier

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"strings"

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
// competing dataplanes' pods on this node, sorted by key. ok is false
// while the caches are not synced. It runs on every pass and is linear in
// pods; a ClusterCache's Of does the same with less garbage.
func ClusterOf(k Caches) (c *Cluster, ok bool) { return new(ClusterCache).Of(k) }

// ClusterCache makes the Clusters of successive passes, keeping each
// unchanged pod's *acl.Pod (and the endpoint labels the renderer gives
// it) from one pass to the next: in a 50,000-pod cluster a pass would
// otherwise remake 50,000 pods, label sets and keys. The zero value is
// ready; it is not safe for concurrent use, and a Cluster it made shares
// PodNodes with the next one (passes run one at a time and keep no
// Cluster).
type ClusterCache struct {
	pods     map[podID]*cachedPod
	podNodes map[string]string
	gen      uint64
}

type podID struct{ namespace, name string }

type cachedPod struct {
	// src is what pod was made from; its maps and slices, and pod's
	// Labels, are the informer cache's (kube.Client.EachPod: never
	// modified, shared between pods) or Pods' copies.
	src kube.Pod
	pod *acl.Pod
	gen uint64 // the last pass that saw it
}

// eachPod is a cache's pods without copies where it can (kube.Client's
// EachPod), else Pods.
func eachPod(k Caches, f func(kube.Pod)) {
	if e, ok := k.(interface{ EachPod(func(kube.Pod)) }); ok {
		e.EachPod(f)
		return
	}
	for _, p := range k.Pods() {
		f(p)
	}
}

// samePod says a and b make the same acl.Pod on the same node.
func samePod(a, b kube.Pod) bool {
	return a.Node == b.Node && a.ServiceAccount == b.ServiceAccount && a.HostNetwork == b.HostNetwork &&
		slices.Equal(a.IPs, b.IPs) && slices.Equal(a.Ports, b.Ports) && maps.Equal(a.Labels, b.Labels)
}

// Of is ClusterOf, keeping what it can from the cache's last Cluster.
func (cc *ClusterCache) Of(k Caches) (c *Cluster, ok bool) {
	if !k.Synced() {
		return nil, false
	}
	if cc.pods == nil {
		cc.pods, cc.podNodes = map[podID]*cachedPod{}, map[string]string{}
	}
	cc.gen++
	c = &Cluster{PodNodes: cc.podNodes, Namespaces: map[string]map[string]string{}, TunnelMACs: k.TunnelMACs()}
	self := k.NodeName()
	eachPod(k, func(p kube.Pod) {
		if p.Competes(self) { // host-network pods: before the skip below
			c.Competitors = append(c.Competitors, Competing{What: p.Competitor, Pod: p.Key()})
		}
		if p.HostNetwork || len(p.IPs) == 0 {
			return
		}
		id := podID{p.Namespace, p.Name}
		e := cc.pods[id]
		if e == nil || !samePod(e.src, p) {
			e = &cachedPod{src: p, pod: aclPod(p)}
			cc.pods[id] = e
			cc.podNodes[e.pod.Key()] = p.Node
		}
		e.gen = cc.gen
		c.Pods = append(c.Pods, e.pod)
	})
	for id, e := range cc.pods {
		if e.gen != cc.gen { // gone, or now without an address
			delete(cc.pods, id)
			delete(cc.podNodes, e.pod.Key())
		}
	}
	slices.SortFunc(c.Competitors, func(a, b Competing) int { return strings.Compare(a.Pod, b.Pod) })
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

// aclPod is p as the ACL renderer knows it, sharing p's labels.
func aclPod(p kube.Pod) *acl.Pod {
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
	return pod
}
