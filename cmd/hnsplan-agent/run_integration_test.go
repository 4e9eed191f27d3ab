//go:build integration

package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/internal/kubetest"
)

// TestRunAgainstAPIServer runs the agent against a real kube-apiserver
// (make test-integration): the plan comes from its ConfigMap, status goes
// to the Node; a VNI change drains the node (the test plays the kubelet
// and the CNI), recreates the network and uncordons.
func TestRunAgainstAPIServer(t *testing.T) {
	e := newRunEnv(t, "win-it")
	kubeconfig, cs, ctx, node, ns, must := e.kubeconfig, e.cs, e.ctx, e.node, e.ns, e.must
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
	must(err)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "192.168.0.5", PodIPs: []corev1.PodIP{{IP: "192.168.0.5"}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}} // healthy: a PodDisruptionBudget counts it
	_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	must(err)

	// The plan, with the pod's endpoint (the CNI networks it: --simulate-cni).
	p := samplePlan()
	p.Node = node
	p.Endpoints = []plan.Endpoint{{Pod: ns + "/web", IpConfigurations: []plan.IpConfig{{IpAddress: netip.MustParseAddr("192.168.0.5"), PrefixLength: 26}}}}
	p.Cluster = node // parts are named after their content: this run's own
	setRoutes(p, p.RemoteSubnetRoutes())
	publish := e.publish
	publish(p)
	first := p.Digest

	// HNS as this node's: its management address is the plan's.
	h := hnsmem.New(hnsmem.ManagementAddress(netip.MustParseAddr("10.240.0.21")))
	e.run(&runFlags{node: node, planSource: "configmap", kubeconfig: kubeconfig, listen: freeAddr(t), client: h,
		stateDir: filepath.Join(t.TempDir(), "state"), resync: time.Minute, simulateCNI: true, drainTimeout: 2 * time.Second})
	waitNode := e.waitNode
	applied := func(digest string) func(*corev1.Node) bool {
		return func(n *corev1.Node) bool {
			return n.Annotations["hnsplan.io/applied-digest"] == digest && n.Annotations["hnsplan.io/state"] == "converged"
		}
	}
	n1 := waitNode("the first plan and the VXLAN tunnel", func(n *corev1.Node) bool {
		return applied(first)(n) && n.Annotations["projectcalico.org/IPv4VXLANTunnelAddr"] != ""
	})
	snap, _ := h.Snapshot(ctx)
	if got, want := n1.Annotations["projectcalico.org/IPv4VXLANTunnelAddr"], "192.168.0.1"; got != want {
		t.Errorf("tunnel address %q, want the block's .1 %q", got, want)
	}
	if mac, err := kube.NormalizeMAC(n1.Annotations["projectcalico.org/VXLANTunnelMACAddr"]); err != nil || mac != snap.Network("Calico").DRMAC {
		t.Errorf("tunnel MAC %q (%v), want the network's DrMacAddress %s", n1.Annotations["projectcalico.org/VXLANTunnelMACAddr"], err, snap.Network("Calico").DRMAC)
	}

	// The VNI changes: the agent must drain. The test is the kubelet (an
	// evicted pod goes at once) and the CNI (its endpoint goes with it).
	go func() {
		for ctx.Err() == nil {
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, p := range pods.Items {
					if p.DeletionTimestamp != nil {
						zero := int64(0)
						cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
						h.RemoveEndpoint("cni-0000_Calico")
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	// First a PodDisruptionBudget holds the pod: the replace is blocked,
	// and nothing is deleted.
	one := intstr.FromInt32(1)
	pdb, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}, metav1.CreateOptions{})
	must(err)
	// Its status, as the disruption controller (not running here) sets it.
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: 0, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}
	_, err = cs.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, pdb, metav1.UpdateOptions{})
	must(err)
	setVNI(p, 5000)
	p.Endpoints = nil // the pod is gone
	publish(p)
	waitNode("the cordon", func(n *corev1.Node) bool { return n.Spec.Unschedulable })
	waitNode("the blocked replace", func(n *corev1.Node) bool { return n.Annotations["hnsplan.io/state"] == "blocked" })
	if snap, _ := h.Snapshot(ctx); snap.Network("Calico").Subnets[0].VNI != 4096 || snap.Endpoint("cni-0000_Calico") == nil {
		t.Fatalf("a blocked replace changed HNS:\n%s", h)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatalf("the pod a PodDisruptionBudget protects is gone: %v", err)
	}
	must(cs.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, "web", metav1.DeleteOptions{}))
	n := waitNode("the second plan", applied(p.Digest))
	if n.Spec.Unschedulable {
		t.Errorf("node %s is still cordoned after the replace", node)
	}
	have, err := h.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if net := have.Network("Calico"); net == nil || net.Subnets[0].VNI != 5000 {
		t.Errorf("HNS after the replace:\n%s", h)
	}
	// The recreated network has a new DrMacAddress: the tunnel follows it.
	waitNode("the new tunnel MAC", func(n *corev1.Node) bool {
		mac, err := kube.NormalizeMAC(n.Annotations["projectcalico.org/VXLANTunnelMACAddr"])
		return err == nil && mac == have.Network("Calico").DRMAC
	})
	events, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + node})
	if err != nil {
		t.Fatal(err)
	}
	var reasons bytes.Buffer
	found := false
	for _, e := range events.Items {
		fmt.Fprintf(&reasons, "%s: %s\n", e.Reason, e.Message)
		found = found || e.Reason == "NetworkReplace"
	}
	if !found {
		t.Errorf("no NetworkReplace event on node %s; events:\n%s", node, reasons.String())
	}
}

// runEnv is where a test runs the agent against the real kube-apiserver:
// a Windows Node of a fresh name (deleted after the test) and the
// namespaces of the plans and of the node's pods.
type runEnv struct {
	t          *testing.T
	kubeconfig string
	cs         kubernetes.Interface
	ctx        context.Context
	node, ns   string
	must       func(error) // fails the test on an error but "already exists"
}

func newRunEnv(t *testing.T, prefix string) *runEnv {
	t.Helper()
	kubetest.ShareSystemNamespace(t)
	e := &runEnv{t: t, kubeconfig: kubetest.Kubeconfig(t), cs: kubetest.Client(t, kubetest.Config(t))}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	e.ctx = ctx
	e.node = fmt.Sprintf("%s-%d", prefix, rand.IntN(1e6))
	e.ns = "it-" + e.node
	e.must = func(err error) {
		t.Helper()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	_, err := e.cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.node, Labels: map[string]string{"kubernetes.io/os": "windows"}}}, metav1.CreateOptions{})
	e.must(err)
	t.Cleanup(func() { e.cs.CoreV1().Nodes().Delete(context.Background(), e.node, metav1.DeleteOptions{}) })
	for _, n := range []string{planwatch.ConfigMapNamespace, e.ns} {
		_, err = e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		e.must(err)
	}
	return e
}

// publish writes p's parts, then p, into the agents' namespace, as
// hnsplan publish does (created, or updated if there), and deletes them
// when the test ends.
func (e *runEnv) publish(p *plan.NodePlan) {
	t := e.t
	t.Helper()
	parts, err := plan.EncodeParts([]*plan.NodePlan{p})
	e.must(err)
	b, err := plan.Encode(p)
	e.must(err)
	cms := e.cs.CoreV1().ConfigMaps(planwatch.ConfigMapNamespace)
	put := func(cm *corev1.ConfigMap) {
		t.Helper()
		cm.Namespace = planwatch.ConfigMapNamespace
		if _, err := cms.Update(e.ctx, cm, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
			_, err = cms.Create(e.ctx, cm, metav1.CreateOptions{})
			e.must(err)
		} else {
			e.must(err)
		}
		t.Cleanup(func() { cms.Delete(context.Background(), cm.Name, metav1.DeleteOptions{}) })
	}
	for _, part := range parts {
		put(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: part.Name,
			Labels: map[string]string{planwatch.PartLabel: planwatch.PartLabelValue(part.Kind)}},
			Data: map[string]string{planwatch.PartConfigMapKey: string(part.Data)}})
	}
	put(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: planwatch.ConfigMapName(e.node)},
		Data: map[string]string{planwatch.ConfigMapKey: string(b)}})
}

// run runs the agent with f until the test ends (its error, and on a
// failure its log, reported then).
func (e *runEnv) run(f *runFlags) {
	t := e.t
	var out, errOut lockedBuffer
	runCtx, stop := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- runAgent(runCtx, f, &out, &errOut) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", errOut.String())
		}
	})
}

// waitNode waits until ok holds of the node, and returns it.
func (e *runEnv) waitNode(what string, ok func(*corev1.Node) bool) *corev1.Node {
	t := e.t
	t.Helper()
	var n *corev1.Node
	var err error
	for e.ctx.Err() == nil {
		if n, err = e.cs.CoreV1().Nodes().Get(e.ctx, e.node, metav1.GetOptions{}); err == nil && ok(n) {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("waiting for %s: node %s annotations %v, unschedulable %v", what, e.node, n.GetAnnotations(), n != nil && n.Spec.Unschedulable)
	return nil
}
