package kube

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// nodeObject is what the node informer stores: the Node snapshot itself
// (addresses parsed, the tunnel MAC normalized) plus the resourceVersion
// the informer compares. A stripped *corev1.Node still cost about 1.2 KB
// of mostly empty spec and status per node; this costs about 500 bytes
// with its slices, whose strings are shared through an interner. Labels
// and annotations are kept as sorted pairs, not maps: a map of four
// labels costs 330 bytes, its pairs 128. In a 5,000-node cluster that is
// 4 MiB of the agent's live heap, and a pass reads the nodes it needs
// (EachNode) without parsing or copying them. Stored values are never
// modified: accessors copy.
type nodeObject struct {
	Node                       // without Labels and Annotations: they are
	labels, annotations []pair // here, sorted by key
	rv                  string
}

// A pair is a label or annotation.
type pair struct{ k, v string }

var (
	_ runtime.Object            = (*nodeObject)(nil)
	_ metav1.ObjectMetaAccessor = (*nodeObject)(nil)
)

func (n *nodeObject) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (n *nodeObject) DeepCopyObject() runtime.Object {
	c := *n
	c.Node = n.Node.clone()
	c.labels, c.annotations = slices.Clone(n.labels), slices.Clone(n.annotations)
	return &c
}

func (n *nodeObject) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: n.Name, ResourceVersion: n.rv}
}

// view is the stored node with its labels and annotations as maps of
// its own; its slices are the store's.
func (n *nodeObject) view() Node {
	v := n.Node
	v.Labels, v.Annotations = mapOf(n.labels), mapOf(n.annotations)
	return v
}

// clone returns n with its own maps and slices.
func (n Node) clone() Node {
	n.Labels = cloneMap(n.Labels)
	n.Annotations = cloneMap(n.Annotations)
	n.PodCIDRs = slices.Clone(n.PodCIDRs)
	n.Addresses = slices.Clone(n.Addresses)
	return n
}

// ownSlices returns n (a nodeView, whose maps are its own) with its own
// slices.
func (n Node) ownSlices() Node {
	n.PodCIDRs = slices.Clone(n.PodCIDRs)
	n.Addresses = slices.Clone(n.Addresses)
	return n
}

// nodeView returns the snapshot of a stored node, whose labels and
// annotations are maps of its own but whose slices are shared with the
// store (the caller must clone them before handing it out), and false
// for anything else.
func nodeView(obj any) (Node, bool) {
	switch n := obj.(type) {
	case *nodeObject:
		return n.view(), true
	case *corev1.Node:
		return nodeFromAPI(n), true
	}
	return Node{}, false
}

// nodeBare is nodeView without labels and annotations (nil), which it
// does not copy: EachNode's.
func nodeBare(obj any) (Node, bool) {
	if n, ok := obj.(*nodeObject); ok {
		return n.Node, true
	}
	n, ok := nodeView(obj)
	n.Labels, n.Annotations = nil, nil
	return n, ok
}

// pairs returns m's entries sorted by key, with in's strings; nil if m
// has none.
func (in *interner) pairs(m map[string]string) []pair {
	if len(m) == 0 {
		return nil
	}
	out := make([]pair, 0, len(m))
	for k, v := range m {
		out = append(out, pair{in.str(k), in.str(v)})
	}
	slices.SortFunc(out, func(a, b pair) int { return strings.Compare(a.k, b.k) })
	return out
}

// mapOf is the map of ps, nil if there are none.
func mapOf(ps []pair) map[string]string {
	if len(ps) == 0 {
		return nil
	}
	m := make(map[string]string, len(ps))
	for _, p := range ps {
		m[p.k] = p.v
	}
	return m
}
