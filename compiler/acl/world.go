// Package acl renders one endpoint's HNS ACL list from the compiled policy
// program (plan.Program) and the pods and namespaces it knows: the
// inventory at compile time, the live cluster in the agent. It imports no
// CUE and no client-go.
//
// # The rendered list
//
// Per direction, the list is ordered by Priority, strictly increasing from
// 1000 (no two ACLs share a priority, so HNS's tie-breaking never matters):
//
//   - ingress starts with allow-host-to-endpoint (priority 900): the node's
//     own addresses reach its pods (kubelet probes), as Calico does;
//   - then the endpoint's policies, tier by tier, rule by rule, already
//     flattened: a Pass rule is replaced by its intersection with every
//     rule of the next applying tier, so HNS only sees Allow and Block;
//   - then the tier's end: Block when any policy of a tier applies to the
//     endpoint in that direction and no rule matched (a tier whose
//     defaultAction is Pass goes on to the next tier instead), Allow when
//     no policy applies at all (the namespace profile allows);
//   - and, as Calico installs them, an Allow of RuleType Host at priority 0
//     for each direction, which the l2bridge host path needs.
//
// Every rule is specialised to the endpoint: a constraint on the local side
// (the destination of ingress, the source of egress) is evaluated here —
// the rule is dropped if the endpoint does not satisfy it, and the
// constraint disappears if it does — so no ACL carries LocalAddresses.
//
// ACL Ids are "<rule id>-<n>" where the rule id is "<policy id>-<in|out><i>"
// and n counts the ACLs one rule becomes (address and port lists are cut
// at 4,000 entries and combined as a cross product, as Felix does).
package acl

import (
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/selector"
)

// Pod is a pod endpoint as the renderer sees it.
type Pod struct {
	Namespace, Name string
	IP              netip.Addr
	Labels          map[string]string
	ServiceAccount  string
	// Ports are the pod's container ports, for named ports.
	Ports []NamedPort

	labels map[string]string // endpoint labels, set by NewWorld
}

// Key is "namespace/name".
func (p *Pod) Key() string { return p.Namespace + "/" + p.Name }

// NamedPort is a container port.
type NamedPort struct {
	Name     string
	Protocol int // IANA number
	Port     uint16
}

// World is what the renderer knows of the cluster: its pods and the labels
// of its namespaces.
type World struct {
	Pods       []*Pod
	Namespaces map[string]map[string]string
	// HostAddrs are the node's own addresses (allow-host-to-endpoint).
	HostAddrs []netip.Addr

	nsLabels    map[string]map[string]string
	byNamespace map[string][]*Pod // pods of each namespace, in key order
	byPortName  map[string][]*Pod // pods with a container port of each name

	indexOnce      sync.Once
	byLabel        map[string]map[string][]*Pod // pods by endpoint label key and value
	namespaceNames []string                     // every namespace with pods, sorted
}

// NewWorld indexes pods and namespaces, and gives each pod its endpoint
// labels, once: a Pod's fields must not change after it is first in a
// World (the agent keeps unchanged pods' Pods from pass to pass, so that a
// pass does not remake 50,000 label sets). Pods without an address
// are kept out: they have no endpoint to match.
func NewWorld(pods []*Pod, namespaces map[string]map[string]string, hostAddrs []netip.Addr) *World {
	w := &World{Namespaces: namespaces, HostAddrs: hostAddrs,
		nsLabels: map[string]map[string]string{}, byNamespace: map[string][]*Pod{}, byPortName: map[string][]*Pod{}}
	for _, p := range pods {
		if p.IP.IsValid() {
			w.Pods = append(w.Pods, p)
		}
	}
	sortByKey(w.Pods)
	for _, p := range w.Pods {
		if _, ok := w.byNamespace[p.Namespace]; !ok {
			w.namespaceNames = append(w.namespaceNames, p.Namespace)
		}
		w.byNamespace[p.Namespace] = append(w.byNamespace[p.Namespace], p)
		for i, np := range p.Ports {
			if !slices.ContainsFunc(p.Ports[:i], func(o NamedPort) bool { return o.Name == np.Name }) {
				w.byPortName[np.Name] = append(w.byPortName[np.Name], p)
			}
		}
		if p.labels != nil {
			continue // labels already made by an earlier World: a Pod's fields do not change
		}
		l := make(map[string]string, len(p.Labels)+3)
		for k, v := range p.Labels {
			l[k] = v
		}
		l[plan.LabelNamespace] = p.Namespace
		l[plan.LabelOrchestrator] = "k8s"
		if p.ServiceAccount != "" {
			l[plan.LabelServiceAccount] = p.ServiceAccount
		}
		p.labels = l
	}
	for ns, labels := range namespaces {
		w.nsLabels[ns] = namespaceLabels(ns, labels)
	}
	return w
}

func namespaceLabels(ns string, labels map[string]string) map[string]string {
	l := make(map[string]string, len(labels)+2)
	for k, v := range labels {
		l[k] = v
	}
	l[plan.LabelNamespaceName] = ns
	if _, ok := l["kubernetes.io/metadata.name"]; !ok {
		l["kubernetes.io/metadata.name"] = ns
	}
	return l
}

// EndpointLabels returns the labels selectors see on p: its own plus
// projectcalico.org/namespace, /orchestrator and /serviceaccount.
func (w *World) EndpointLabels(p *Pod) map[string]string { return p.labels }

// NamespaceLabels returns the labels namespace selectors see on ns: its
// own plus projectcalico.org/name and kubernetes.io/metadata.name.
func (w *World) NamespaceLabels(ns string) map[string]string {
	if l, ok := w.nsLabels[ns]; ok {
		return l
	}
	return namespaceLabels(ns, nil)
}

// Selected returns the pods, in key order, whose endpoint labels sel
// matches, looking candidates up in the label index when sel requires a
// label value: the cost follows the pods that can match, not the World.
func (w *World) Selected(sel selector.Selector) []*Pod {
	pods, ok := w.candidates(sel)
	if !ok {
		pods = w.Pods
	}
	var out []*Pod
	for _, p := range pods {
		if sel.Evaluate(p.labels) {
			out = append(out, p)
		}
	}
	return out
}

// sortByKey sorts pods by Key, computing each key once.
func sortByKey(pods []*Pod) {
	type keyed struct {
		key string
		pod *Pod
	}
	ks := make([]keyed, len(pods))
	for i, p := range pods {
		ks[i] = keyed{p.Key(), p}
	}
	slices.SortFunc(ks, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	for i := range ks {
		pods[i] = ks[i].pod
	}
}

// candidates returns the pods that carry every label value the selector
// requires (selector.RequiredEquals), from an index built on first use:
// the shortest posting list. ok is false when the selector requires none.
func (w *World) candidates(sel selector.Selector) (pods []*Pod, ok bool) {
	req := sel.RequiredEquals()
	if len(req) == 0 {
		return nil, false
	}
	w.indexOnce.Do(func() {
		w.byLabel = map[string]map[string][]*Pod{}
		for _, p := range w.Pods {
			for k, v := range p.labels {
				if w.byLabel[k] == nil {
					w.byLabel[k] = map[string][]*Pod{}
				}
				w.byLabel[k][v] = append(w.byLabel[k][v], p)
			}
		}
	})
	first := true
	for k, v := range req {
		list := w.byLabel[k][v]
		if first || len(list) < len(pods) {
			pods, first = list, false
		}
	}
	return pods, true
}
