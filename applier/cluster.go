package applier

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/plan"
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
// unchanged pod's *acl.Pod from one pass to the next, and the acl.World
// and renderer made of them while no pod and no namespace changed: in a
// 50,000-pod cluster a pass would otherwise remake 50,000 pods and the
// World's indexes. The zero value is ready; it is not safe for
// concurrent use, and a Cluster it made looks its pods' nodes up in the
// cache (PodNode), which the next Of changes (passes run one at a time
// and keep no Cluster).
type ClusterCache struct {
	pods map[podID]cachedPod
	gen  uint64
	// The World of the last Cluster, its namespaces, and the renderer
	// last made over it (for program prog).
	world      *acl.World
	namespaces map[string]map[string]string
	prog       *plan.Program
	renderer   *acl.Renderer
	// ports are the named ports made of a kube.Pod's port list, by that
	// list: kube.Client shares one list between the pods that declare
	// the same ports (a workload's replicas), and so these share theirs.
	ports map[portsID][]acl.NamedPort
}

// portsID is a kube.Pod's port list (never modified) by identity.
type portsID struct {
	first *kube.Port
	n     int
}

// maxPortLists bounds ClusterCache.ports: past it the table starts
// again (lists already handed out stay shared).
const maxPortLists = 1 << 12

type podID struct{ namespace, name string }

type cachedPod struct {
	pod  *acl.Pod
	node string
	gen  uint64 // the last pass that saw it
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

// eachNode is a cache's nodes without copies where it can (kube.Client's
// EachNode: Nodes copied 5,000 nodes' labels and annotations, 9 MB, on
// every pass), else Nodes.
func eachNode(k Caches, f func(kube.Node)) {
	if e, ok := k.(interface{ EachNode(func(kube.Node)) }); ok {
		e.EachNode(f)
		return
	}
	for _, n := range k.Nodes() {
		f(n)
	}
}

// samePod says p, on node, makes the same acl.Pod as pod (aclPod),
// without making one.
func samePod(pod *acl.Pod, node string, p kube.Pod) bool {
	if node != p.Node || pod.IP != podIP(p) || pod.ServiceAccount != cmp.Or(p.ServiceAccount, "default") || !maps.Equal(pod.Labels, p.Labels) {
		return false
	}
	i := 0
	for _, port := range p.Ports {
		if port.Name == "" {
			continue
		}
		if i == len(pod.Ports) || pod.Ports[i] != namedPort(port) {
			return false
		}
		i++
	}
	return i == len(pod.Ports)
}

// Of is ClusterOf, keeping what it can from the cache's last Cluster.
func (cc *ClusterCache) Of(k Caches) (c *Cluster, ok bool) {
	if !k.Synced() {
		return nil, false
	}
	if cc.pods == nil {
		cc.pods = map[podID]cachedPod{}
	}
	cc.gen++
	c = &Cluster{PodNode: cc.podNode, Namespaces: map[string]map[string]string{}, TunnelMACs: k.TunnelMACs(), cache: cc}
	self := k.NodeName()
	changed := false
	c.Pods = make([]*acl.Pod, 0, len(cc.pods))
	eachPod(k, func(p kube.Pod) {
		if p.Competes(self) { // host-network pods: before the skip below
			c.Competitors = append(c.Competitors, Competing{What: p.Competitor, Pod: p.Key()})
		}
		if p.HostNetwork || len(p.IPs) == 0 || finished(p.Phase) {
			return
		}
		id := podID{p.Namespace, p.Name}
		e, ok := cc.pods[id]
		if !ok || !samePod(e.pod, e.node, p) {
			e = cachedPod{pod: cc.aclPod(p), node: p.Node}
			changed = true
		}
		e.gen = cc.gen
		cc.pods[id] = e
		c.Pods = append(c.Pods, e.pod)
	})
	for id, e := range cc.pods {
		if e.gen != cc.gen { // gone, or now without an address
			delete(cc.pods, id)
			changed = true
		}
	}
	for _, ns := range k.Namespaces() {
		c.Namespaces[ns.Name] = ns.Labels
	}
	if changed || cc.world == nil || !maps.EqualFunc(c.Namespaces, cc.namespaces, maps.Equal) {
		cc.world, cc.namespaces, cc.prog, cc.renderer = acl.NewWorld(c.Pods, c.Namespaces, nil), c.Namespaces, nil, nil
	}
	c.world = cc.world
	slices.SortFunc(c.Competitors, func(a, b Competing) int { return strings.Compare(a.Pod, b.Pod) })
	c.Blocks, c.NodeAddrs = map[string][]netip.Prefix{}, make(map[string]netip.Addr, len(c.TunnelMACs))
	eachNode(k, func(n kube.Node) {
		for _, a := range n.Addresses {
			if a.Type == "InternalIP" && a.Addr.Is4() {
				c.NodeAddrs[n.Name] = a.Addr
				break
			}
		}
	})
	c.NodeAddr = c.NodeAddrs[self]
	for _, b := range k.BlockAffinities() {
		if b.State == "confirmed" && !b.Deleted {
			c.Blocks[b.Node] = append(c.Blocks[b.Node], b.CIDR)
		}
	}
	return c, true
}

// finished says a pod in phase has ended: it has no network left, and
// Calico makes no workload endpoint of it (libcalico-go's IsFinished), so
// no selector stands for its address, which a new pod may have now.
func finished(phase string) bool { return phase == "Succeeded" || phase == "Failed" }

// podNode is the node of pod if it is the cache's pod of its name (a
// Cluster's PodNode), else "".
func (cc *ClusterCache) podNode(pod *acl.Pod) string {
	if e, ok := cc.pods[podID{pod.Namespace, pod.Name}]; ok && e.pod == pod {
		return e.node
	}
	return ""
}

// protocolNumber is a container port's protocol as IANA numbers it.
var protocolNumber = map[string]int{"TCP": 6, "UDP": 17, "SCTP": 132}

// aclPod is aclPod(p), whose named ports are shared with every pod's
// that has the same kube.Pod port list.
func (cc *ClusterCache) aclPod(p kube.Pod) *acl.Pod {
	if len(p.Ports) == 0 {
		return aclPod(p)
	}
	id := portsID{&p.Ports[0], len(p.Ports)}
	ports, ok := cc.ports[id]
	if !ok {
		ports = namedPorts(p.Ports)
		if cc.ports == nil || len(cc.ports) >= maxPortLists {
			cc.ports = map[portsID][]acl.NamedPort{}
		}
		cc.ports[id] = ports
	}
	p.Ports = nil
	pod := aclPod(p)
	pod.Ports = ports
	return pod
}

// aclPod is p (which has an address) as the ACL renderer knows it,
// sharing p's labels.
func aclPod(p kube.Pod) *acl.Pod {
	return &acl.Pod{Namespace: p.Namespace, Name: p.Name, IP: podIP(p), Labels: p.Labels, ServiceAccount: cmp.Or(p.ServiceAccount, "default"),
		Ports: namedPorts(p.Ports)}
}

// namedPorts are the named ones of ports, nil if none is.
func namedPorts(ports []kube.Port) []acl.NamedPort {
	var out []acl.NamedPort
	for _, port := range ports {
		if port.Name != "" {
			out = append(out, namedPort(port))
		}
	}
	return out
}

// podIP is the address of p (which has one) the renderer knows: its
// first IPv4 (Windows pods are IPv4, the plan's block), else its first.
func podIP(p kube.Pod) netip.Addr {
	for _, ip := range p.IPs {
		if ip.Is4() {
			return ip
		}
	}
	return p.IPs[0]
}

func namedPort(port kube.Port) acl.NamedPort {
	return acl.NamedPort{Name: port.Name, Protocol: protocolNumber[cmp.Or(port.Protocol, "TCP")], Port: uint16(port.Port)}
}

// renderer returns a renderer of prog over c's pods: the one c's
// ClusterCache made for the same World and program, if any (its caches
// of selector matches stay valid while neither changes).
func (c *Cluster) renderer(prog *plan.Program) *acl.Renderer {
	world := c.world
	if world == nil {
		world = acl.NewWorld(c.Pods, c.Namespaces, nil)
	}
	cc := c.cache
	if cc == nil || cc.world != world {
		return acl.NewRenderer(prog, world)
	}
	if cc.renderer == nil || cc.prog != prog {
		cc.prog, cc.renderer = prog, acl.NewRenderer(prog, world)
	}
	return cc.renderer
}
