package kube

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// podObject is what the pod informer stores: the Pod snapshot itself plus
// the resourceVersion the informer compares to tell updates from resyncs.
// A stripped *corev1.Pod would still cost its 1.2 KB struct and a 400-byte
// Container per pod, mostly zeros; this costs about 200 bytes, and its
// strings and label maps are shared between pods (see interner). At 50,000
// pods that is the difference between missing and meeting the agent's
// memory budget (memory_integration_test.go).
//
// The informer machinery needs only a runtime.Object whose metadata
// meta.Accessor can read (for the store key and the resourceVersion), which
// GetObjectMeta provides. Stored values are never modified: accessors copy.
type podObject struct {
	Pod
	rv string
}

var (
	_ runtime.Object            = (*podObject)(nil)
	_ metav1.ObjectMetaAccessor = (*podObject)(nil)
)

func (p *podObject) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (p *podObject) DeepCopyObject() runtime.Object {
	c := *p
	c.Pod = p.Pod.clone()
	return &c
}

func (p *podObject) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, ResourceVersion: p.rv}
}

// clone returns p with its own maps and slices.
func (p Pod) clone() Pod {
	p.Labels = cloneMap(p.Labels)
	p.IPs = slices.Clone(p.IPs)
	p.Ports = slices.Clone(p.Ports)
	return p
}

// podView returns the snapshot of a stored pod, shared with the store (the
// caller must clone before handing it out), and false for anything else.
func podView(obj any) (Pod, bool) {
	switch p := obj.(type) {
	case *podObject:
		return p.Pod, true
	case *corev1.Pod:
		return podFromAPI(p, nil), true
	}
	return Pod{}, false
}

// An interner shares equal strings and equal label sets between pods: 50,000
// pods carry a few hundred distinct namespaces, nodes, service accounts and
// label sets (every replica of a Deployment has the same labels). The
// tables are dropped when they reach their limit, so label values that churn
// (pod-template-hash after each rollout) cannot grow them without bound;
// values already handed out stay shared.
type interner struct {
	mu     sync.Mutex
	strs   map[string]string
	labels map[string]map[string]string
	ports  map[string][]Port
}

const (
	internStrLimit   = 1 << 16
	internLabelLimit = 1 << 15
	internPortLimit  = 1 << 15
)

// portList returns a slice equal to ps (whose strings are in's), shared
// with every other pod that declares the same ports: the replicas of a
// workload do, and a list of their own cost 3 MiB at 50,000 pods. The
// result must not be modified.
func (in *interner) portList(ps []Port) []Port {
	if in == nil || len(ps) == 0 {
		return ps
	}
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Name)
		b.WriteByte(0)
		b.WriteString(strconv.Itoa(int(p.Port)))
		b.WriteByte(0)
		b.WriteString(p.Protocol)
		b.WriteByte(0)
	}
	id := b.String()
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.ports[id]; ok {
		return v
	}
	if in.ports == nil || len(in.ports) >= internPortLimit {
		in.ports = map[string][]Port{}
	}
	ps = slices.Clip(ps)
	in.ports[id] = ps
	return ps
}

func (in *interner) str(s string) string {
	if in == nil || s == "" {
		return s
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.strs[s]; ok {
		return v
	}
	if in.strs == nil || len(in.strs) >= internStrLimit {
		in.strs = map[string]string{}
	}
	s = strings.Clone(s)
	in.strs[s] = s
	return s
}

// labelSet returns a map equal to m, shared with every other pod whose
// labels equal m. The result must not be modified.
func (in *interner) labelSet(m map[string]string) map[string]string {
	if in == nil || len(m) == 0 {
		return m
	}
	keys := make([]string, 0, len(m))
	n := 0
	for k, v := range m {
		keys = append(keys, k)
		n += len(k) + len(v) + 2
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(n)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	id := b.String()
	in.mu.Lock()
	if v, ok := in.labels[id]; ok {
		in.mu.Unlock()
		return v
	}
	in.mu.Unlock()
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[in.str(k)] = in.str(v)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.labels == nil || len(in.labels) >= internLabelLimit {
		in.labels = map[string]map[string]string{}
	}
	in.labels[id] = out
	return out
}
