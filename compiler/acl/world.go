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
// The flattened list is then optimised (optimise.go): rules and addresses
// that cannot change a verdict are dropped, address sets are replaced by
// the fewest prefixes that decide alike, and the parts of one rule that
// differ in one dimension become one ACL. Every IPv4 packet is decided as
// by the list rule for rule; a list of more than 1,000 rules is left as it
// is.
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

// Pod is a pod endpoint as the renderer sees it. A Pod's fields must not
// change once it is in a World: the agent keeps an unchanged pod's Pod
// from one pass to the next, and a World indexes it.
type Pod struct {
	Namespace, Name string
	IP              netip.Addr
	Labels          map[string]string
	ServiceAccount  string
	// Ports are the pod's container ports, for named ports.
	Ports []NamedPort

	labels map[string]string // endpoint labels as a map, for EndpointLabels
}

// Key is "namespace/name".
func (p *Pod) Key() string { return p.Namespace + "/" + p.Name }

// comparePods orders pods as their Keys compare, without making the keys.
func comparePods(a, b *Pod) int {
	if a.Namespace == b.Namespace {
		return strings.Compare(a.Name, b.Name)
	}
	// The keys differ first within the shorter namespace, or where it
	// ends: there the other key goes on with its namespace, this one
	// with '/'.
	n := min(len(a.Namespace), len(b.Namespace))
	if c := strings.Compare(a.Namespace[:n], b.Namespace[:n]); c != 0 {
		return c
	}
	var c int
	if len(a.Namespace) < len(b.Namespace) {
		c = cmpByte('/', b.Namespace[n])
	} else {
		c = cmpByte(a.Namespace[n], '/')
	}
	if c == 0 { // a namespace with a '/' in it (not Kubernetes'): compare the keys
		return strings.Compare(a.Key(), b.Key())
	}
	return c
}

func cmpByte(a, b byte) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// endpoint is the labels selectors see on a pod (EndpointLabels) without
// making them: the pod's own, then projectcalico.org/namespace,
// /orchestrator and /serviceaccount over them. 50,000 pods would
// otherwise carry 50,000 label maps.
type endpoint struct{ p *Pod }

func (e endpoint) Get(key string) (string, bool) {
	switch key {
	case plan.LabelNamespace:
		return e.p.Namespace, true
	case plan.LabelOrchestrator:
		return "k8s", true
	case plan.LabelServiceAccount:
		if e.p.ServiceAccount != "" {
			return e.p.ServiceAccount, true
		}
	}
	v, ok := e.p.Labels[key]
	return v, ok
}

// endpointMap is e's labels as a map.
func (e endpoint) endpointMap() map[string]string {
	l := make(map[string]string, len(e.p.Labels)+3)
	for k, v := range e.p.Labels {
		l[k] = v
	}
	l[plan.LabelNamespace] = e.p.Namespace
	l[plan.LabelOrchestrator] = "k8s"
	if e.p.ServiceAccount != "" {
		l[plan.LabelServiceAccount] = e.p.ServiceAccount
	}
	return l
}

// NamedPort is a container port.
type NamedPort struct {
	Name     string
	Protocol int // IANA number
	Port     uint16
}

// World is what the renderer knows of the cluster: its pods and the labels
// of its namespaces. It is safe for concurrent use.
type World struct {
	Pods       []*Pod
	Namespaces map[string]map[string]string
	// HostAddrs are the node's own addresses (allow-host-to-endpoint).
	HostAddrs []netip.Addr

	nsLabels       map[string]map[string]string
	byNamespace    map[string][]*Pod // pods of each namespace, in key order
	byPortName     map[string][]*Pod // pods with a container port of each name
	namespaceNames []string          // every namespace with pods, sorted

	labelsOnce sync.Once // EndpointLabels' maps

	mu sync.Mutex
	// byLabel indexes pods by the value of a label key, for the keys
	// selectors have required so far (candidates): an index of every
	// key would hold a pointer per pod and label.
	byLabel map[string]map[string][]*Pod
}

// NewWorld indexes pods and namespaces. Pods without an address are kept
// out: they have no endpoint to match. It keeps nothing per pod but the
// indexes' pointers, so that a World of 50,000 pods is cheap to make.
func NewWorld(pods []*Pod, namespaces map[string]map[string]string, hostAddrs []netip.Addr) *World {
	w := &World{Namespaces: namespaces, HostAddrs: hostAddrs,
		nsLabels: map[string]map[string]string{}, byNamespace: map[string][]*Pod{}, byPortName: map[string][]*Pod{},
		byLabel: map[string]map[string][]*Pod{}}
	w.Pods = make([]*Pod, 0, len(pods))
	for _, p := range pods {
		if p.IP.IsValid() {
			w.Pods = append(w.Pods, p)
		}
	}
	slices.SortFunc(w.Pods, comparePods)
	for i, p := range w.Pods {
		if i == 0 || p.Namespace != w.Pods[i-1].Namespace {
			// Pods in key order hold each namespace's pods together
			// (unless a namespace has a '/' in it): a run of w.Pods,
			// capped so that an append copies.
			j := i + 1
			for j < len(w.Pods) && w.Pods[j].Namespace == p.Namespace {
				j++
			}
			if run, ok := w.byNamespace[p.Namespace]; ok {
				w.byNamespace[p.Namespace] = append(run, w.Pods[i:j]...)
			} else {
				w.namespaceNames = append(w.namespaceNames, p.Namespace)
				w.byNamespace[p.Namespace] = w.Pods[i:j:j]
			}
		}
		for i, np := range p.Ports {
			if !slices.ContainsFunc(p.Ports[:i], func(o NamedPort) bool { return o.Name == np.Name }) {
				w.byPortName[np.Name] = append(w.byPortName[np.Name], p)
			}
		}
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

// EndpointLabels returns the labels selectors see on p, one of the
// World's pods: its own plus projectcalico.org/namespace, /orchestrator
// and /serviceaccount. The maps are made on the first call, for every
// pod of the World that has none yet, and must not be modified; the
// renderer itself never needs them.
func (w *World) EndpointLabels(p *Pod) map[string]string {
	w.labelsOnce.Do(func() {
		for _, q := range w.Pods {
			if q.labels == nil {
				q.labels = endpoint{q}.endpointMap()
			}
		}
	})
	return p.labels
}

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
		if sel.EvaluateLabels(endpoint{p}) {
			out = append(out, p)
		}
	}
	return out
}

// candidates returns the pods, in key order, that carry every label
// value the selector requires (selector.RequiredEquals): the shortest
// posting list of an index of the required keys, each made on first
// use. ok is false when the selector requires none.
func (w *World) candidates(sel selector.Selector) (pods []*Pod, ok bool) {
	req := sel.RequiredEquals()
	if len(req) == 0 {
		return nil, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	first := true
	for k, v := range req {
		idx, ok := w.byLabel[k]
		if !ok {
			idx = map[string][]*Pod{}
			for _, p := range w.Pods {
				if v, ok := (endpoint{p}).Get(k); ok {
					idx[v] = append(idx[v], p)
				}
			}
			w.byLabel[k] = idx
		}
		list := idx[v]
		if first || len(list) < len(pods) {
			pods, first = list, false
		}
	}
	return pods, true
}
