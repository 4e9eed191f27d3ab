package intent

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pod is a v1 Pod from the inventory, compact: the fields hnsplan reads
// (under the names and types corev1.Pod gives them), nothing else. A
// large cluster's inventory holds tens of thousands of pods for the whole
// run, and a corev1.Pod is 1.3 KB before its containers (0.4 KB each),
// maps and strings; this is about a fifth of that. What it leaves out is
// ignored when read, as the inventory ignores fields it does not know.
type Pod struct {
	PodMeta `json:"metadata"`
	Spec    PodSpec   `json:"spec"`
	Status  PodStatus `json:"status"`
	Source  Source    `json:"-"`
}

// PodMeta is the part of a pod's metadata hnsplan reads.
type PodMeta struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace"`
	Labels    map[string]string `json:"labels"`
}

// PodSpec is the part of a pod's spec hnsplan reads.
type PodSpec struct {
	NodeName           string                     `json:"nodeName"`
	HostNetwork        bool                       `json:"hostNetwork"`
	DNSPolicy          corev1.DNSPolicy           `json:"dnsPolicy"`
	ServiceAccountName string                     `json:"serviceAccountName"`
	SecurityContext    *corev1.PodSecurityContext `json:"securityContext"`
	Containers         []Container                `json:"containers"`
}

// Container is the part of a pod's container hnsplan reads.
type Container struct {
	Name            string                  `json:"name"`
	Ports           []corev1.ContainerPort  `json:"ports"`
	SecurityContext *corev1.SecurityContext `json:"securityContext"`
}

// PodStatus is the part of a pod's status hnsplan reads.
type PodStatus struct {
	Phase  corev1.PodPhase `json:"phase"`
	PodIP  string          `json:"podIP"`
	PodIPs []corev1.PodIP  `json:"podIPs"`
}

// CoreV1 is p as a corev1.Pod: the fields p keeps, the others zero (a
// test's fake API server serves inventory pods so).
func (p *Pod) CoreV1() *corev1.Pod {
	out := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: maps.Clone(p.Labels)},
		Spec: corev1.PodSpec{NodeName: p.Spec.NodeName, HostNetwork: p.Spec.HostNetwork, DNSPolicy: p.Spec.DNSPolicy,
			ServiceAccountName: p.Spec.ServiceAccountName, SecurityContext: p.Spec.SecurityContext.DeepCopy()},
		Status: corev1.PodStatus{Phase: p.Status.Phase, PodIP: p.Status.PodIP, PodIPs: slices.Clone(p.Status.PodIPs)},
	}
	for _, c := range p.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Ports: slices.Clone(c.Ports), SecurityContext: c.SecurityContext.DeepCopy()})
	}
	return out
}
