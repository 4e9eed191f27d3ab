//go:build integration

// Integration tests against a real kube-apiserver and etcd (no kubelet, no
// controller-manager): make test-integration, or
//
//	KAS_RUN_DIR=/tmp/kas hack/kube-test-env.sh start   # from the repository root
//	KUBECONFIG=/tmp/kas/kubeconfig KAS_RUN_DIR=/tmp/kas go test -tags integration ./applier/kube/
//
// The tests play the kubelet (they set pod status, and force-delete pods an
// eviction left terminating) and the disruption controller (they set a
// PodDisruptionBudget's status). Every test uses its own node and namespace
// names, so the tests can share one API server with other packages' tests.

package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hnsplan/hnsplan/internal/kubetest"
)

// clients are a clientset and a dynamic client for cfg.
func clients(t testing.TB, cfg *rest.Config) (kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kubetest.Client(t, cfg), dyn
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func createNode(t testing.TB, ctx context.Context, cs kubernetes.Interface, n *corev1.Node) {
	t.Helper()
	if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node %s: %v", n.Name, err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{})
	})
}

func createNamespace(t testing.TB, ctx context.Context, cs kubernetes.Interface, name string, labels map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		// No namespace controller runs: remove the pods ourselves.
		bg := context.Background()
		zero := int64(0)
		_ = cs.CoreV1().Pods(name).DeleteCollection(bg, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = cs.CoreV1().Namespaces().Delete(bg, name, metav1.DeleteOptions{})
	})
}

// testPod returns a pod scheduled to node with one container port.
func testPod(ns, name, node string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels,
			Annotations: map[string]string{"example.com/owner": "team-a"}},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{Name: "app", Image: "mcr.microsoft.com/windows/nanoserver:ltsc2022",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}},
		},
	}
}

// runPod creates p and, as the kubelet would, marks it Running and Ready
// with ip. The eviction API deletes Pending pods without consulting
// PodDisruptionBudgets, so a pod must be running for a budget to apply.
func runPod(t testing.TB, ctx context.Context, cs kubernetes.Interface, p *corev1.Pod, ip string) *corev1.Pod {
	t.Helper()
	got, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{FieldManager: "kube-controller-manager"})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", p.Namespace, p.Name, err)
	}
	now := metav1.Now()
	got.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, HostIP: "172.20.41.103",
		StartTime:  &now,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
	}
	got, err = cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, got, metav1.UpdateOptions{FieldManager: "kubelet"})
	if err != nil {
		t.Fatalf("set status of pod %s/%s: %v", p.Namespace, p.Name, err)
	}
	return got
}

// kubeletFinish force-deletes the pods of ns that an eviction left
// terminating, as the kubelet does once their containers have stopped.
func kubeletFinish(t testing.TB, ctx context.Context, cs kubernetes.Interface, ns string) []string {
	t.Helper()
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var done []string
	zero := int64(0)
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			continue
		}
		if err := cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("force-delete pod %s/%s: %v", ns, p.Name, err)
		}
		done = append(done, ns+"/"+p.Name)
	}
	slices.Sort(done)
	return done
}

// eventually polls f until it returns "" or d passes, then fails with f's
// last complaint.
func eventually(t testing.TB, d time.Duration, f func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		msg := f()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestIntegrationDrain(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	cs, dyn := clients(t, kubetest.Config(t))
	node, other, ns := kubetest.UniqueName("win-drain"), kubetest.UniqueName("win-other"), kubetest.UniqueName("drain")
	createNode(t, ctx, cs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
	createNode(t, ctx, cs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: other}})
	createNamespace(t, ctx, cs, ns, nil)

	yes := true
	pods := map[string]*corev1.Pod{}
	add := func(name, node string, labels map[string]string, mod func(*corev1.Pod)) {
		p := testPod(ns, name, node, labels)
		if mod != nil {
			mod(p)
		}
		pods[name] = runPod(t, ctx, cs, p, fmt.Sprintf("10.244.9.%d", len(pods)+2))
	}
	add("plain-0", node, map[string]string{"app": "plain"}, nil)
	add("plain-1", node, map[string]string{"app": "plain"}, nil)
	add("guarded-0", node, map[string]string{"app": "guarded"}, nil)
	add("guarded-1", node, map[string]string{"app": "guarded"}, nil)
	add("ds", node, nil, func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "logs", UID: "0b7e4c53-ds", Controller: &yes}}
	})
	add("mirror", node, nil, func(p *corev1.Pod) { p.Annotations[corev1.MirrorPodAnnotationKey] = "hash" })
	add("hostnet", node, nil, func(p *corev1.Pod) { p.Spec.HostNetwork = true })
	add("elsewhere", other, map[string]string{"app": "plain"}, nil)

	// minAvailable = all: no guarded pod may go. The test plays the
	// disruption controller, which computes the budget's status.
	all := intstr.FromInt32(2)
	pdb, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &all,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation,
		DisruptionsAllowed: 0, CurrentHealthy: 2, DesiredHealthy: 2, ExpectedPods: 2}
	if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	c := New(cs, dyn, node)
	if err := c.Cordon(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !n.Spec.Unschedulable || n.Annotations[AnnotationCordoned] != "true" {
		t.Fatalf("after Cordon: unschedulable=%v annotations=%v", n.Spec.Unschedulable, n.Annotations)
	}

	k := func(names ...string) []string {
		out := make([]string, len(names))
		for i, n := range names {
			out[i] = ns + "/" + n
		}
		return out
	}
	pending, err := c.Evict(ctx)
	if err != nil {
		t.Fatalf("Evict: %v", err)
	}
	if want := k("guarded-0", "guarded-1", "plain-0", "plain-1"); !slices.Equal(pending, want) {
		t.Fatalf("first Evict: pending = %v, want %v", pending, want)
	}
	// Nothing but the plain pods was touched.
	for name, p := range pods {
		got, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("pod %s: %v", name, err)
		}
		terminating := got.DeletionTimestamp != nil
		if want := strings.HasPrefix(name, "plain-"); terminating != want {
			t.Errorf("pod %s: terminating = %v, want %v", name, terminating, want)
		}
		if got.UID != p.UID {
			t.Errorf("pod %s was replaced", name)
		}
	}
	if done := kubeletFinish(t, ctx, cs, ns); !slices.Equal(done, k("plain-0", "plain-1")) {
		t.Fatalf("terminating pods = %v, want the plain ones", done)
	}

	// The budget still blocks: the guarded pods stay pending, untouched.
	pending, err = c.Evict(ctx)
	if err != nil {
		t.Fatalf("Evict: %v", err)
	}
	if want := k("guarded-0", "guarded-1"); !slices.Equal(pending, want) {
		t.Fatalf("blocked Evict: pending = %v, want %v", pending, want)
	}
	if done := kubeletFinish(t, ctx, cs, ns); len(done) != 0 {
		t.Fatalf("a blocked eviction left %v terminating", done)
	}

	// Relax the budget: the guarded pods go too.
	if err := cs.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, "guarded", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pending, err = c.Evict(ctx)
	if err != nil {
		t.Fatalf("Evict: %v", err)
	}
	if want := k("guarded-0", "guarded-1"); !slices.Equal(pending, want) {
		t.Fatalf("Evict after the budget went: pending = %v, want %v (terminating)", pending, want)
	}
	kubeletFinish(t, ctx, cs, ns)
	pending, err = c.Evict(ctx)
	if err != nil || len(pending) != 0 {
		t.Fatalf("final Evict = %v, %v; want none pending", pending, err)
	}
	// The skipped pods and the other node's pod are all still there.
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, p := range l.Items {
		left = append(left, p.Name)
	}
	slices.Sort(left)
	if want := []string{"ds", "elsewhere", "hostnet", "mirror"}; !slices.Equal(left, want) {
		t.Errorf("pods left = %v, want %v", left, want)
	}

	// Uncordon from a new Client, as after an agent restart.
	if err := New(cs, dyn, node).Uncordon(ctx); err != nil {
		t.Fatal(err)
	}
	n, err = cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, marker := n.Annotations[AnnotationCordoned]; n.Spec.Unschedulable || marker {
		t.Errorf("after Uncordon: unschedulable=%v annotations=%v", n.Spec.Unschedulable, n.Annotations)
	}

	// An operator's cordon is neither claimed nor lifted.
	c2 := New(cs, dyn, other)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, other, "application/merge-patch+json",
		[]byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c2.Cordon(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c2.Uncordon(ctx); err != nil {
		t.Fatal(err)
	}
	n, err = cs.CoreV1().Nodes().Get(ctx, other, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, marker := n.Annotations[AnnotationCordoned]; !n.Spec.Unschedulable || marker {
		t.Errorf("operator-cordoned node after Cordon+Uncordon: unschedulable=%v annotations=%v", n.Spec.Unschedulable, n.Annotations)
	}
}

func TestIntegrationStatusAndEvents(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	cs, dyn := clients(t, kubetest.Config(t))
	node := kubetest.UniqueName("win-status")
	createNode(t, ctx, cs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Annotations: map[string]string{"keep": "me"}}})
	c := New(cs, dyn, node)
	c.Start(ctx)
	if !c.WaitForSync(ctx) {
		t.Fatal("cache did not sync")
	}
	annotations := func() map[string]string {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.Annotations
	}
	if err := c.SetStatus(ctx, Status{Digest: "sha256:aa", State: StateError, Error: `hns: create network "Calico": access denied`}); err != nil {
		t.Fatal(err)
	}
	a := annotations()
	if a[AnnotationDigest] != "sha256:aa" || a[AnnotationState] != "error" || a[AnnotationLastError] != `hns: create network "Calico": access denied` || a["keep"] != "me" {
		t.Errorf("annotations after SetStatus(error) = %v", a)
	}
	if err := c.SetStatus(ctx, Status{Digest: "sha256:bb", State: StateConverged}); err != nil {
		t.Fatal(err)
	}
	a = annotations()
	if _, ok := a[AnnotationLastError]; ok || a[AnnotationState] != "converged" || a[AnnotationDigest] != "sha256:bb" {
		t.Errorf("annotations after SetStatus(converged) = %v", a)
	}
	if err := c.PublishTunnel(ctx, "00-15-5D-7A-00-22", mustAddr("10.244.3.0")); err != nil {
		t.Fatal(err)
	}
	a = annotations()
	if a[AnnotationTunnelMAC] != "00:15:5d:7a:00:22" || a[AnnotationTunnelAddr] != "10.244.3.0" {
		t.Errorf("tunnel annotations = %v", a)
	}
	// The cache sees our own annotations, and the tunnel in TunnelMACs.
	eventually(t, 10*time.Second, func() string {
		if got := c.TunnelMACs()[node]; got != "00-15-5D-7A-00-22" {
			return fmt.Sprintf("TunnelMACs()[%s] = %q", node, got)
		}
		return ""
	})

	c.Event(corev1.EventTypeWarning, "ReplaceBlocked", "2 pods pending: a PodDisruptionBudget refuses eviction")
	eventually(t, 15*time.Second, func() string {
		l, err := cs.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node,
		})
		if err != nil {
			return err.Error()
		}
		for _, e := range l.Items {
			if e.Reason == "ReplaceBlocked" && e.Type == corev1.EventTypeWarning && e.Source.Component == Component &&
				e.Source.Host == node && strings.Contains(e.Message, "PodDisruptionBudget") {
				return ""
			}
		}
		return fmt.Sprintf("no ReplaceBlocked event on node %s among %d events", node, len(l.Items))
	})
}

func TestIntegrationCache(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	cfg := kubetest.Config(t)
	cs, dyn := clients(t, cfg)
	node, remote, ns := kubetest.UniqueName("win-cache"), kubetest.UniqueName("lin-cache"), kubetest.UniqueName("cache")
	createNode(t, ctx, cs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.5.0/24"}}})
	createNode(t, ctx, cs, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: remote, Annotations: map[string]string{
			AnnotationTunnelMAC: "66:de:0a:0b:0c:0d", AnnotationTunnelAddr: "10.244.6.0", "unrelated": "dropped"}},
		Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"big/image:1"}, SizeBytes: 1}}},
	})
	createNamespace(t, ctx, cs, ns, map[string]string{"team": "payments"})
	local := runPod(t, ctx, cs, testPod(ns, "local", node, map[string]string{"app": "api"}), "10.244.5.7")
	runPod(t, ctx, cs, testPod(ns, "remote", remote, map[string]string{"app": "db"}), "10.244.6.9")

	c := New(cs, dyn, node, WithCRDRecheck(300*time.Millisecond))
	c.Start(ctx)
	if !c.WaitForSync(ctx) {
		t.Fatal("cache did not sync")
	}
	// The API server has no Calico CRDs: the cache syncs without them.
	if c.BlockAffinitiesAvailable() || len(c.BlockAffinities()) != 0 {
		t.Errorf("without the CRD: available=%v affinities=%v", c.BlockAffinitiesAvailable(), c.BlockAffinities())
	}

	on := c.PodsOnNode()
	if len(on) != 1 || on[0].Key() != ns+"/local" || on[0].IPs[0].String() != "10.244.5.7" ||
		on[0].Ports[0] != (Port{Name: "http", Port: 8080, Protocol: "TCP"}) {
		t.Fatalf("PodsOnNode() = %+v", on)
	}
	found := 0
	for _, p := range c.Pods() {
		if p.Namespace == ns {
			found++
		}
	}
	if found != 2 {
		t.Errorf("Pods() holds %d pods of %s, want 2 (local and remote)", found, ns)
	}
	// What is stored is the transformed pod: the server sent managedFields,
	// annotations, image; none of them is kept.
	if len(local.ManagedFields) == 0 {
		t.Fatal("the server sent no managedFields: the check below would prove nothing")
	}
	obj, ok, _ := c.pods.GetStore().GetByKey(ns + "/local")
	if !ok {
		t.Fatal("pod not in store")
	}
	// podObject has no field for managedFields, annotations, spec or
	// status: storing one proves they are gone.
	if stored, ok := obj.(*podObject); !ok || stored.rv != local.ResourceVersion || stored.Labels["app"] != "api" {
		t.Errorf("stored pod = %#v, want a *podObject at resourceVersion %s", obj, local.ResourceVersion)
	}
	nobj, _, _ := c.nodes.GetStore().GetByKey(remote)
	if sn, ok := nobj.(*nodeObject); !ok || sn.view().Annotations["unrelated"] != "" {
		t.Errorf("stored remote node keeps dropped fields: %+v", sn)
	}
	if got := c.TunnelMACs()[remote]; got != "66-DE-0A-0B-0C-0D" {
		t.Errorf("TunnelMACs()[%s] = %q", remote, got)
	}
	var nsLabels map[string]string
	for _, n := range c.Namespaces() {
		if n.Name == ns {
			nsLabels = n.Labels
		}
	}
	if nsLabels["team"] != "payments" {
		t.Errorf("namespace %s labels = %v", ns, nsLabels)
	}

	// A label change reaches the cache and signals Changes.
	drain(c.Changes())
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, "remote", "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"app":"cache"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Changes():
	case <-time.After(10 * time.Second):
		t.Fatal("no Changes signal after a pod label change")
	}

	// Installing the CRD later is noticed; removing it empties the cache.
	installBlockAffinityCRD(t, ctx, dyn)
	ba := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "BlockAffinity",
		"metadata": map[string]any{"name": node + "-10-244-5-0-26"},
		"spec":     map[string]any{"node": node, "cidr": "10.244.5.0/26", "state": "confirmed", "deleted": "false"},
	}}
	eventually(t, 30*time.Second, func() string {
		_, err := dyn.Resource(BlockAffinityResource).Create(ctx, ba, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return "create BlockAffinity: " + err.Error()
		}
		return ""
	})
	eventually(t, 30*time.Second, func() string {
		for _, b := range c.BlockAffinities() {
			if b.Node == node && b.CIDR.String() == "10.244.5.0/26" && b.State == "confirmed" && !b.Deleted {
				if !c.BlockAffinitiesAvailable() {
					return "affinity seen but BlockAffinitiesAvailable() = false"
				}
				return ""
			}
		}
		return fmt.Sprintf("BlockAffinities() = %+v", c.BlockAffinities())
	})
	deleteBlockAffinityCRD(t, ctx, dyn)
	eventually(t, 60*time.Second, func() string {
		if c.BlockAffinitiesAvailable() || len(c.BlockAffinities()) != 0 {
			return fmt.Sprintf("after CRD removal: available=%v affinities=%v", c.BlockAffinitiesAvailable(), c.BlockAffinities())
		}
		return ""
	})
	if !c.Synced() {
		t.Error("Synced() = false after the CRD went away")
	}
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

const baCRDName = "blockaffinities.crd.projectcalico.org"

// installBlockAffinityCRD installs a minimal copy of Calico's CRD and waits
// until it is served.
func installBlockAffinityCRD(t testing.TB, ctx context.Context, dyn dynamic.Interface) {
	t.Helper()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": baCRDName},
		"spec": map[string]any{
			"group": "crd.projectcalico.org", "scope": "Cluster",
			"names": map[string]any{"kind": "BlockAffinity", "listKind": "BlockAffinityList", "plural": "blockaffinities", "singular": "blockaffinity"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{"spec": map[string]any{
						"type": "object",
						"properties": map[string]any{
							"node": map[string]any{"type": "string"}, "cidr": map[string]any{"type": "string"},
							"state": map[string]any{"type": "string"}, "deleted": map[string]any{"type": "string"},
						},
					}},
				}},
			}},
		},
	}}
	if _, err := dyn.Resource(crdResource).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create CRD: %v", err)
	}
	t.Cleanup(func() { deleteBlockAffinityCRD(t, context.Background(), dyn) })
	eventually(t, 30*time.Second, func() string {
		if _, err := dyn.Resource(BlockAffinityResource).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			return "CRD not served: " + err.Error()
		}
		return ""
	})
}

func deleteBlockAffinityCRD(t testing.TB, ctx context.Context, dyn dynamic.Interface) {
	err := dyn.Resource(crdResource).Delete(ctx, baCRDName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete CRD: %v", err)
	}
}

func intOrString(s string) intstr.IntOrString { return intstr.FromString(s) }
