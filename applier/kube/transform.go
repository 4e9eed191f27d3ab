package kube

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

// The transforms below run on every object an informer receives, before it
// is stored, and replace the object by a copy holding only what the snapshot
// accessors read. Building a fresh object (rather than clearing fields of the
// decoded one) lets the garbage collector free the decoded object's
// managedFields, annotations, specs and status entirely.
//
// Every transform is idempotent and passes through anything it does not know,
// in particular cache.DeletedFinalStateUnknown tombstones. The pod transform
// goes further and stores the package's own compact type (podObject.go).

// podTransform returns the transform for pods: it replaces a *corev1.Pod
// by a *podObject holding name, namespace, labels, deletion state, phase,
// node name, service account, host networking, container ports, pod IPs and
// the competing dataplane it runs (from its owner references, which are
// not kept), with strings and label sets shared through in.
func podTransform(in *interner) cache.TransformFunc {
	return func(obj any) (any, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return obj, nil // a *podObject already, or a tombstone
		}
		return &podObject{Pod: podFromAPI(p, in), rv: p.ResourceVersion}, nil
	}
}

// transformNamespace keeps name and labels.
func transformNamespace(obj any) (any, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns.Name, UID: ns.UID, ResourceVersion: ns.ResourceVersion, Labels: ns.Labels,
	}}, nil
}

// nodeTransform returns the transform for Nodes: it replaces a
// *corev1.Node by a *nodeObject (nodeobject.go) holding its name,
// labels, podCIDRs, unschedulable, IP addresses and tunnel MAC and
// address, with strings shared through in. This node (self) keeps all its
// annotations (the agent reads back its own status and cordon marker);
// other nodes keep only Calico's and hnsplan's. The images list,
// conditions and node info, which dominate a Node's size, are dropped.
func nodeTransform(self string, in *interner) cache.TransformFunc {
	return func(obj any) (any, error) {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return obj, nil // a *nodeObject already, or a tombstone
		}
		ann := n.Annotations
		if n.Name != self {
			ann = nil
			for k, v := range n.Annotations {
				if strings.HasPrefix(k, "projectcalico.org/") || strings.HasPrefix(k, "hnsplan.io/") {
					if ann == nil {
						ann = map[string]string{}
					}
					ann[k] = v
				}
			}
		}
		out := &nodeObject{Node: nodeFrom(n, in), labels: in.pairs(n.Labels), annotations: in.pairs(ann), rv: n.ResourceVersion}
		if n.Name == self {
			// The OS build (applier's build report and rollout hold).
			out.KernelVersion = n.Status.NodeInfo.KernelVersion
		}
		return out, nil
	}
}

// transformBlockAffinity keeps name, resource version and spec.
func transformBlockAffinity(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": u.GetAPIVersion(),
		"kind":       u.GetKind(),
		"metadata": map[string]any{
			"name":            u.GetName(),
			"uid":             string(u.GetUID()),
			"resourceVersion": u.GetResourceVersion(),
		},
	}}
	if spec, ok := u.Object["spec"]; ok {
		out.Object["spec"] = spec
	}
	return out, nil
}
