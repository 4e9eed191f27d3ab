package kube

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// Component is the event source component of the agent's Events.
const Component = "hnsplan-agent"

// BlockAffinityResource is Calico's IPAM block affinity CRD (cluster-scoped).
var BlockAffinityResource = schema.GroupVersionResource{
	Group: "crd.projectcalico.org", Version: "v1", Resource: "blockaffinities",
}

// byNode is the pod informer's index on spec.nodeName.
const byNode = "node"

// A Client is the agent's view of, and hand on, the Kubernetes API for one
// node: a cache of the cluster data the reconciler needs, this node's status
// and Events, and cordon/evict/uncordon.
//
// The cache accessors (Pods, Node, ...) may be called at any time from any
// goroutine; before the cache has synced they return what has arrived so far,
// so a reconciler must wait for WaitForSync (or check Synced) before acting
// on an absence — in particular before deleting anything.
type Client struct {
	node   string
	client kubernetes.Interface
	opts   options

	factory    informers.SharedInformerFactory
	pods       cache.SharedIndexInformer
	nodes      cache.SharedIndexInformer
	namespaces cache.SharedIndexInformer
	blocks     cache.SharedIndexInformer // nil with WithoutBlockAffinities
	blocksLW   *blockAffinityLW

	changes chan struct{}

	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	startOnce sync.Once
}

type options struct {
	noTransform bool // tests only: measure what the transforms save
	noBlocks    bool
	crdRecheck  time.Duration
}

// An Option configures New.
type Option func(*options)

// WithoutBlockAffinities skips the Calico BlockAffinity cache (clusters that
// do not use Calico IPAM). BlockAffinities then always returns nil.
func WithoutBlockAffinities() Option { return func(o *options) { o.noBlocks = true } }

// WithCRDRecheck sets how often the cache looks again for the BlockAffinity
// CRD while it is not installed (default one minute).
func WithCRDRecheck(d time.Duration) Option { return func(o *options) { o.crdRecheck = d } }

// New returns a Client for node. client is used for the core API (pods,
// namespaces, nodes, events, evictions); dyn for Calico's BlockAffinities
// (nil implies WithoutBlockAffinities). Nothing talks to the API server until
// Start, except the Event sink, which is started here so that Events emitted
// before Start are delivered; it stops when Start's context ends.
//
// For large clusters build client from a rest.Config whose ContentType is
// "application/vnd.kubernetes.protobuf": decoding protobuf allocates far less
// than JSON while the pod list streams in.
func New(client kubernetes.Interface, dyn dynamic.Interface, node string, opts ...Option) *Client {
	o := options{crdRecheck: time.Minute}
	for _, f := range opts {
		f(&o)
	}
	if dyn == nil {
		o.noBlocks = true
	}
	c := &Client{
		node:    node,
		client:  client,
		opts:    o,
		changes: make(chan struct{}, 1),
	}
	c.factory = informers.NewSharedInformerFactory(client, 0)
	// The factory's own pod and node informers index every object by
	// namespace, for listers the agent does not use: 100 sets holding
	// every pod's key, 3 MiB at 50,000 pods.
	c.pods = c.factory.InformerFor(&corev1.Pod{}, func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredPodInformer(cs, metav1.NamespaceAll, resync, cache.Indexers{}, nil)
	})
	c.nodes = c.factory.InformerFor(&corev1.Node{}, func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredNodeInformer(cs, resync, cache.Indexers{}, nil)
	})
	c.namespaces = c.factory.Core().V1().Namespaces().Informer()
	if !o.noTransform {
		// SetTransform fails only after the informer has started.
		_ = c.pods.SetTransform(podTransform(&interner{}))
		_ = c.nodes.SetTransform(nodeTransform(node, &interner{}))
		_ = c.namespaces.SetTransform(transformNamespace)
	}
	// Only this node's pods are indexed: an index of every node's held a
	// set of pod keys per node, 5 MiB in a 50,000-pod cluster, for
	// PodsOnNode, which asks for this node only.
	_ = c.pods.AddIndexers(cache.Indexers{byNode: func(obj any) ([]string, error) {
		if p, ok := podView(obj); ok && p.Node == node {
			return []string{node}, nil
		}
		return nil, nil
	}})
	c.addHandler(c.pods, func(o any) any {
		p, ok := podView(o)
		if !ok {
			return nil
		}
		return p
	})
	c.addHandler(c.nodes, func(o any) any {
		n, ok := nodeView(o)
		if !ok {
			return nil
		}
		// Without what the agent itself writes (its status annotations, the
		// cordon): its own writes must not wake it, or a status that
		// changes on every pass (blocked, replacing) would loop. The
		// view's annotations are its own.
		v := n
		v.Unschedulable = false
		for k := range v.Annotations {
			if strings.HasPrefix(k, "hnsplan.io/") {
				delete(v.Annotations, k)
			}
		}
		return v
	})
	c.addHandler(c.namespaces, func(o any) any {
		ns, _ := o.(*corev1.Namespace)
		if ns == nil {
			return nil
		}
		return Namespace{Name: ns.Name, Labels: ns.Labels}
	})
	if !o.noBlocks {
		c.blocksLW = &blockAffinityLW{res: dyn.Resource(BlockAffinityResource), recheck: o.crdRecheck}
		c.blocks = cache.NewSharedIndexInformerWithOptions(c.blocksLW, &unstructured.Unstructured{},
			cache.SharedIndexInformerOptions{ObjectDescription: "BlockAffinity"})
		if !o.noTransform {
			_ = c.blocks.SetTransform(transformBlockAffinity)
		}
		c.addHandler(c.blocks, func(o any) any {
			u, _ := o.(*unstructured.Unstructured)
			if u == nil {
				return nil
			}
			ba, err := blockAffinityFromAPI(u)
			if err != nil {
				return err.Error()
			}
			return ba
		})
	}

	c.broadcaster = record.NewBroadcaster()
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	c.recorder = c.broadcaster.NewRecorder(kscheme.Scheme, corev1.EventSource{Component: Component, Host: node})
	return c
}

// addHandler signals Changes on adds and deletes, and on updates that change
// what view returns: a pod's status conditions or a node's heartbeat change
// its resourceVersion but nothing the agent reads, and must not wake the
// reconciler thousands of times a minute in a large cluster.
func (c *Client) addHandler(inf cache.SharedIndexInformer, view func(any) any) {
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.notify() },
		UpdateFunc: func(old, cur any) {
			if !reflect.DeepEqual(view(old), view(cur)) {
				c.notify()
			}
		},
		DeleteFunc: func(any) { c.notify() },
	})
}

func (c *Client) notify() {
	select {
	case c.changes <- struct{}{}:
	default: // a signal is already pending; the reconciler reads everything anyway
	}
}

// Changes returns a channel that receives a value after a relevant change to
// the cache (a pod, namespace, node or BlockAffinity added, deleted, or
// changed in a field the snapshots expose). Signals coalesce: one pending
// value stands for any number of changes, so the receiver must reread the
// whole snapshot. The channel is never closed.
func (c *Client) Changes() <-chan struct{} { return c.changes }

// Start starts the informers; they run until ctx is done, at which point the
// Event sink is shut down too. Calls after the first do nothing.
func (c *Client) Start(ctx context.Context) {
	c.startOnce.Do(func() {
		c.factory.Start(ctx.Done())
		if c.blocks != nil {
			go c.blocks.RunWithContext(ctx)
		}
		go func() {
			<-ctx.Done()
			c.factory.Shutdown()
			c.broadcaster.Shutdown()
		}()
	})
}

func (c *Client) hasSynced() []cache.InformerSynced {
	s := []cache.InformerSynced{c.pods.HasSynced, c.nodes.HasSynced, c.namespaces.HasSynced}
	if c.blocks != nil {
		s = append(s, c.blocks.HasSynced)
	}
	return s
}

// WaitForSync waits until every informer has completed its initial list, and
// reports whether it has; false means ctx ended first.
func (c *Client) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), c.hasSynced()...)
}

// Synced reports whether every informer has completed its initial list.
func (c *Client) Synced() bool {
	for _, f := range c.hasSynced() {
		if !f() {
			return false
		}
	}
	return true
}

// NodeName returns the name of the node the Client acts for.
func (c *Client) NodeName() string { return c.node }

// Pods returns every pod in the cluster, sorted by namespace and name.
func (c *Client) Pods() []Pod { return podsOf(c.pods.GetStore().List()) }

// EachPod calls f with every pod in the cluster, in no order, without
// copying: the Pod's maps and slices are the cache's (shared between pods)
// and must not be modified or kept past f. A pass over 50,000 pods reads
// them this way rather than through Pods, which copies each.
func (c *Client) EachPod(f func(Pod)) {
	for _, o := range c.pods.GetStore().List() {
		if p, ok := podView(o); ok {
			f(p)
		}
	}
}

// PodsOnNode returns the pods scheduled to this node, sorted by namespace and
// name, terminating ones included (they keep their HNS endpoint until the
// kubelet has stopped them).
func (c *Client) PodsOnNode() []Pod {
	objs, err := c.pods.GetIndexer().ByIndex(byNode, c.node)
	if err != nil { // only for an unknown index name: a bug here
		panic(fmt.Sprintf("kube: pod index %q: %v", byNode, err))
	}
	return podsOf(objs)
}

func podsOf(objs []any) []Pod {
	out := make([]Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := podView(o); ok {
			out = append(out, p.clone())
		}
	}
	slices.SortFunc(out, func(a, b Pod) int {
		return cmpKeys(a.Namespace, a.Name, b.Namespace, b.Name)
	})
	return out
}

func cmpKeys(ans, an, bns, bn string) int {
	if c := strings.Compare(ans, bns); c != 0 {
		return c
	}
	return strings.Compare(an, bn)
}

// Namespaces returns every namespace, sorted by name.
func (c *Client) Namespaces() []Namespace {
	var out []Namespace
	for _, o := range c.namespaces.GetStore().List() {
		if ns, ok := o.(*corev1.Namespace); ok {
			out = append(out, Namespace{Name: ns.Name, Labels: cloneMap(ns.Labels)})
		}
	}
	slices.SortFunc(out, func(a, b Namespace) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Node returns this node, and false if the cache does not hold it (not yet
// synced, or the Node object does not exist).
func (c *Client) Node() (Node, bool) {
	o, ok, _ := c.nodes.GetStore().GetByKey(c.node)
	n, isNode := nodeView(o)
	if !ok || !isNode {
		return Node{}, false
	}
	return n.ownSlices(), true
}

// Nodes returns every node, sorted by name.
func (c *Client) Nodes() []Node {
	var out []Node
	for _, o := range c.nodes.GetStore().List() {
		if n, ok := nodeView(o); ok {
			out = append(out, n.ownSlices())
		}
	}
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// EachNode calls f with every node, in no order, without copying and
// without its labels and annotations (nil: Node and Nodes have them): the
// Node's slices are the cache's and must not be modified or kept past f.
// A pass reads 5,000 nodes' addresses this way rather than through Nodes,
// which copies each.
func (c *Client) EachNode(f func(Node)) {
	for _, o := range c.nodes.GetStore().List() {
		if n, ok := nodeBare(o); ok {
			f(n)
		}
	}
}

// TunnelMACs returns each node's VXLAN tunnel MAC (annotation
// projectcalico.org/VXLANTunnelMACAddr) in HNS form, "00-15-5D-7A-00-22".
// Nodes without the annotation, or with a malformed one, are absent.
func (c *Client) TunnelMACs() map[string]string {
	objs := c.nodes.GetStore().List()
	out := make(map[string]string, len(objs))
	for _, o := range objs {
		if n, ok := nodeBare(o); ok && n.TunnelMAC != "" {
			out[n.Name] = n.TunnelMAC
		}
	}
	return out
}

// BlockAffinities returns Calico's block affinities, sorted by name. It
// returns nil while the CRD is not installed (see BlockAffinitiesAvailable);
// malformed objects are left out.
func (c *Client) BlockAffinities() []BlockAffinity {
	if c.blocks == nil {
		return nil
	}
	var out []BlockAffinity
	for _, o := range c.blocks.GetStore().List() {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		ba, err := blockAffinityFromAPI(u)
		if err != nil {
			klog.V(2).InfoS("Ignoring malformed BlockAffinity", "err", err)
			continue
		}
		out = append(out, ba)
	}
	slices.SortFunc(out, func(a, b BlockAffinity) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// BlockAffinitiesAvailable reports whether the BlockAffinity CRD was
// served at the last look: false if it is not installed (or the cache was
// built WithoutBlockAffinities).
func (c *Client) BlockAffinitiesAvailable() bool {
	return c.blocksLW != nil && !c.blocksLW.missing.Load()
}

// Event records an Event on this Node object. eventtype is
// corev1.EventTypeNormal or corev1.EventTypeWarning; reason is a short
// UpperCamelCase word ("NetworkReplaced"). Delivery is asynchronous and
// best-effort, with client-go's aggregation of repeated events. The
// reference uses the node name as UID, as the kubelet does, so that
// `kubectl describe node` lists the Events.
func (c *Client) Event(eventtype, reason, message string) {
	c.recorder.Event(c.nodeRef(), eventtype, reason, message)
}

func (c *Client) nodeRef() *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: c.node, UID: types.UID(c.node)}
}

var _ runtime.Object = (*corev1.ObjectReference)(nil)
