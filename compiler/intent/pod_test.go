package intent

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

// TestPodCompact: every field the compact Pod keeps is read from a pod as
// kubectl writes it, and the fields it leaves out are ignored without a
// finding.
func TestPodCompact(t *testing.T) {
	dir := writeDir(t, map[string]string{"inv.yaml": `apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: n
  labels: {app: web}
  annotations: {a: b}
  uid: 0f1e
spec:
  nodeName: win-1
  hostNetwork: true
  dnsPolicy: ClusterFirstWithHostNet
  serviceAccountName: sa
  priority: 5
  securityContext: {windowsOptions: {hostProcess: true}}
  containers:
  - name: c
    image: i
    ports: [{name: http, containerPort: 80, protocol: TCP}]
    securityContext: {windowsOptions: {hostProcess: true}}
status:
  phase: Running
  podIP: 10.0.0.4
  podIPs: [{ip: 10.0.0.4}]
  conditions: [{type: Ready, status: "True"}]
`})
	var errs diag.List
	inv, err := LoadInventory([]string{filepath.Join(dir, "inv.yaml")}, &errs)
	if err != nil || len(errs) != 0 || len(inv.Pods) != 1 {
		t.Fatalf("LoadInventory: %v %v, %d pods", err, errs, len(inv.Pods))
	}
	yes := true
	want := Pod{
		PodMeta: PodMeta{Name: "p", Namespace: "n", Labels: map[string]string{"app": "web"}},
		Spec: PodSpec{NodeName: "win-1", HostNetwork: true, DNSPolicy: corev1.DNSClusterFirstWithHostNet, ServiceAccountName: "sa",
			SecurityContext: &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: &yes}},
			Containers: []Container{{Name: "c", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
				SecurityContext: &corev1.SecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: &yes}}}}},
		Status: PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.4", PodIPs: []corev1.PodIP{{IP: "10.0.0.4"}}},
	}
	if diff := cmp.Diff(want, inv.Pods[0], cmpopts.IgnoreFields(Pod{}, "Source")); diff != "" {
		t.Errorf("pod (-want +got):\n%s", diff)
	}
	k := inv.Pods[0].CoreV1()
	if k.Name != "p" || k.Labels["app"] != "web" || k.Spec.NodeName != "win-1" || k.Status.PodIP != "10.0.0.4" ||
		len(k.Spec.Containers) != 1 || k.Spec.Containers[0].Ports[0].ContainerPort != 80 || !*k.Spec.SecurityContext.WindowsOptions.HostProcess {
		t.Errorf("CoreV1() = %+v", k)
	}
}
