//go:build integration

package applier_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/internal/kubetest"
)

// TestIntegrationConflictWithCalicoNodeWindows: against a real
// kube-apiserver, a calico-node-windows pod bound to the agent's node (as
// the operator's DaemonSet makes it: owner, label, host network) puts the
// agent in state conflict naming the pod, with a Warning Event, and HNS
// sees no mutating call, no ACL for the pod endpoint the CNI made; once
// the pod is deleted the agent converges and programs the endpoint's ACLs.
func TestIntegrationConflictWithCalicoNodeWindows(t *testing.T) {
	cs := kubetest.Client(t, kubetest.Config(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	src := ex.plans["win-1"]
	node, ns, calicoNS := kubetest.UniqueName("win-conflict"), kubetest.UniqueName("conflict-web"), kubetest.UniqueName("calico-system")
	p := *src // the same plan, for this run's node
	p.Node = node

	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node,
		Labels: map[string]string{"kubernetes.io/os": "windows"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer cs.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{})
	for _, n := range []string{ns, calicoNS} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer cs.CoreV1().Namespaces().Delete(context.Background(), n, metav1.DeleteOptions{})
	}
	// A workload pod at an address of the node's block, and its endpoint,
	// as the CNI made it (no ACLs).
	var ip netip.Addr
	for _, pod := range ex.cluster.Pods {
		if ex.cluster.PodNode(pod) == "win-1" {
			ip = pod.IP
			break
		}
	}
	if !ip.IsValid() {
		t.Fatal("the example has no pod on win-1")
	}
	running := func(pod *corev1.Pod, ip string) {
		t.Helper()
		got, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
		if _, err := cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	running(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, ip.String())
	yes := true
	calico := fmt.Sprintf("calico-node-windows-%s", node[len(node)-5:])
	running(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: calicoNS, Name: calico,
		Labels: map[string]string{"k8s-app": "calico-node-windows"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "calico-node-windows",
			UID: types.UID("00000000-0000-0000-0000-000000000001"), Controller: &yes}}},
		Spec: corev1.PodSpec{NodeName: node, HostNetwork: true, Containers: []corev1.Container{{Name: "calico-node", Image: "x"}}}}, "10.240.0.21")

	h := hnsmem.New(hnsmem.ManagementAddress(mgmt(t, &p)))
	w := mustWant(t, &p)
	network := w.Network
	network.RemoteRoutes = nil
	if err := h.AddNetwork(network); err != nil { // calico-node-windows' network
		t.Fatal(err)
	}
	bits := p.Network.Ipams[0].Subnets[0].IpAddressPrefix.Bits()
	if err := h.AddPodEndpoint(p.Network.Name, "web_"+p.Network.Name, netip.PrefixFrom(ip, bits), compiler.PodMAC(ip), p.PodEndpoint.Policies); err != nil {
		t.Fatal(err)
	}

	plans := make(chanSource, 1)
	plans <- &p
	cfg := agentConfig(t, h, plans)
	cfg.Node = node
	cfg.Kube = kube.New(cs, nil, node, kube.WithoutBlockAffinities())
	cfg.Reachable = func(context.Context) bool { return true }
	a, err := applier.NewAgent(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()

	waitNode := func(what string, ok func(map[string]string) bool) {
		t.Helper()
		var ann map[string]string
		for ctx.Err() == nil {
			if n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err == nil {
				if ann = n.Annotations; ok(ann) {
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("waiting for %s: node %s annotations %v; agent status %+v", what, node, ann, a.Status())
	}
	waitNode("state conflict naming the pod", func(ann map[string]string) bool {
		return ann[kube.AnnotationState] == "conflict" && strings.Contains(ann[kube.AnnotationLastError], "calico-node-windows pod "+calicoNS+"/"+calico)
	})
	// More passes while in conflict: a change to the workload pod.
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"front"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if st := a.Status(); st.State != kube.StateConflict || h.MutatingCalls() != 0 || aclCalls(h) != 0 {
		t.Fatalf("in conflict: %+v, %d mutating calls (%d ACL); want conflict and none: calls %v", st, h.MutatingCalls(), aclCalls(h), h.Calls())
	}
	if n, _ := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); n.Annotations[kube.AnnotationTunnelMAC] != "" {
		t.Errorf("the agent published a tunnel in conflict: %v", n.Annotations)
	}
	waitEvent := func(reason string) {
		t.Helper()
		for ctx.Err() == nil {
			l, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + node + ",reason=" + reason})
			if err == nil && len(l.Items) > 0 {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("no Event %s on node %s", reason, node)
	}
	waitEvent("DataplaneConflict")

	// calico-node-windows leaves the node (its DaemonSet no longer
	// selects it): the kubelet has stopped the pod.
	zero := int64(0)
	if err := cs.CoreV1().Pods(calicoNS).Delete(ctx, calico, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	waitNode("converged", func(ann map[string]string) bool {
		return ann[kube.AnnotationState] == "converged" && ann[kube.AnnotationLastError] == "" && ann[kube.AnnotationDigest] == p.Digest
	})
	if e := h.Held().Endpoint("web_" + p.Network.Name); e == nil || len(e.ACLs) == 0 || aclCalls(h) == 0 {
		t.Errorf("after the conflict: endpoint %+v, %d ACL calls; want its ACLs programmed", e, aclCalls(h))
	}
	waitEvent("DataplaneConflictResolved")
}
