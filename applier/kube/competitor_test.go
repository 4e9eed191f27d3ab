package kube

import (
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCompetitorOf: what makes a pod a competing dataplane: its
// controlling DaemonSet or its installer's label, never its name alone;
// the transform keeps the verdict.
func TestCompetitorOf(t *testing.T) {
	yes := true
	ds := func(name string, controller bool) []metav1.OwnerReference {
		c := controller
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: name, Controller: &c}}
	}
	for _, tc := range []struct {
		name, ns, pod string
		labels        map[string]string
		owners        []metav1.OwnerReference
		want          Competitor
	}{
		{"operator calico-node-windows", "calico-system", "calico-node-windows-x7k2p", map[string]string{"k8s-app": "calico-node-windows"}, ds("calico-node-windows", true), CalicoNodeWindows},
		{"sig-windows-tools calico (os label only)", "kube-system", "calico-node-windows-4hq8s", map[string]string{"kubernetes.io/os": "windows"}, ds("calico-node-windows", true), CalicoNodeWindows},
		{"calico label without owner, any namespace", "calico-x", "felix", map[string]string{"k8s-app": "calico-node-windows"}, nil, CalicoNodeWindows},
		{"Linux calico-node", "calico-system", "calico-node-abcde", map[string]string{"k8s-app": "calico-node"}, ds("calico-node", true), NoCompetitor},
		{"name alone", "default", "calico-node-windows-fake", map[string]string{"app": "web"}, nil, NoCompetitor},
		{"owned but not controlled", "default", "x", nil, ds("calico-node-windows", false), NoCompetitor},
		{"a Deployment of that name", "default", "x", nil, []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "calico-node-windows", Controller: &yes}}, NoCompetitor},
		{"sig-windows-tools flannel", "kube-flannel", "kube-flannel-ds-windows-amd64-q2x9z", map[string]string{"app": "flannel", "tier": "node"}, ds("kube-flannel-ds-windows-amd64", true), Flanneld},
		{"flannel owner, other namespace", "net", "f", nil, ds("kube-flannel-ds-windows-amd64", true), Flanneld},
		{"flannel label in kube-system", "kube-system", "f", map[string]string{"app": "flannel"}, nil, Flanneld},
		{"an app called flannel elsewhere", "shop", "flannel-0", map[string]string{"app": "flannel"}, nil, NoCompetitor},
		{"kube-proxy", "kube-system", "kube-proxy-windows-abc", map[string]string{"k8s-app": "kube-proxy-windows"}, ds("kube-proxy-windows", true), NoCompetitor},
		{"Azure NPM on Windows", "kube-system", "azure-npm-win-7tq2z", map[string]string{"k8s-app": "azure-npm"}, ds("azure-npm-win", true), AzureNPM},
		{"Azure NPM label in kube-system", "kube-system", "npm", map[string]string{"k8s-app": "azure-npm"}, nil, AzureNPM},
		{"azure-npm label elsewhere", "shop", "npm", map[string]string{"k8s-app": "azure-npm"}, nil, NoCompetitor},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: tc.pod, Labels: tc.labels, OwnerReferences: tc.owners, ResourceVersion: "1"},
				Spec: corev1.PodSpec{NodeName: "win-1"}}
			if got := competitorOf(p); got != tc.want {
				t.Errorf("competitorOf = %q, want %q", got, tc.want)
			}
			got, _ := podTransform(&interner{})(p)
			if c := got.(*podObject).Competitor; c != tc.want {
				t.Errorf("after the transform: %q, want %q", c, tc.want)
			}
		})
	}
}

// TestCompetes: only a competitor bound to the node, neither terminating
// nor completed, competes.
func TestCompetes(t *testing.T) {
	base := Pod{Namespace: "calico-system", Name: "calico-node-windows-x", Node: "win-1", Phase: "Running", Competitor: CalicoNodeWindows}
	for _, tc := range []struct {
		name string
		edit func(*Pod)
		want bool
	}{
		{"running here", func(*Pod) {}, true},
		{"pending here", func(p *Pod) { p.Phase = "Pending" }, true},
		{"on another node", func(p *Pod) { p.Node = "win-2" }, false},
		{"unscheduled", func(p *Pod) { p.Node = "" }, false},
		{"terminating", func(p *Pod) { p.Terminating = true }, false},
		{"succeeded", func(p *Pod) { p.Phase = "Succeeded" }, false},
		{"failed", func(p *Pod) { p.Phase = "Failed" }, false},
		{"no competitor", func(p *Pod) { p.Competitor = NoCompetitor }, false},
	} {
		p := base
		tc.edit(&p)
		if got := p.Competes("win-1"); got != tc.want {
			t.Errorf("%s: Competes = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPodSizeWithCompetitor: the competitor costs the pod cache nothing:
// it sits in the padding after Terminating (the memory budget,
// memory_integration_test.go).
func TestPodSizeWithCompetitor(t *testing.T) {
	if a, b := unsafe.Offsetof(Pod{}.Competitor), unsafe.Offsetof(Pod{}.Terminating); a != b+1 {
		t.Errorf("Competitor at offset %d, Terminating at %d: keep the byte in Terminating's padding", a, b)
	}
}
