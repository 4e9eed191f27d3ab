package intent

import corev1 "k8s.io/api/core/v1"

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
