package kube

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// netipCmp compares netip values by ==, as they are meant to be.
var netipCmp = cmp.Options{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

func TestNormalizeMAC(t *testing.T) {
	for _, tc := range []struct{ in, want, wantErr string }{
		{in: "00:15:5d:7a:00:22", want: "00-15-5D-7A-00-22"},
		{in: "00-15-5D-7A-00-22", want: "00-15-5D-7A-00-22"},
		{in: " 0e:2a:0a:f4:01:05 ", want: "0E-2A-0A-F4-01-05"},
		{in: "0015.5d7a.0022", want: "00-15-5D-7A-00-22"},
		{in: "00:15:5d", wantErr: `kube: MAC address "00:15:5d": address 00:15:5d: invalid MAC address`},
		{in: "00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01", wantErr: "not a 48-bit address"},
	} {
		got, err := NormalizeMAC(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("NormalizeMAC(%q) error = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("NormalizeMAC(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// fullPod is a pod as the API server sends it, with everything the
// transform must drop.
func fullPod(ns, name, node string, labels map[string]string, ip string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "." + name), ResourceVersion: "7",
			Labels:      labels,
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 2000)},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply,
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{}}`)}}},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", UID: "rs-uid"}},
		},
		Spec: corev1.PodSpec{
			NodeName:           node,
			ServiceAccountName: "sa-" + name,
			Containers: []corev1.Container{
				{Name: "app", Image: "registry/app:1", Command: []string{"/app"},
					Env:   []corev1.EnvVar{{Name: "A", Value: "b"}},
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP, HostPort: 80}}},
				{Name: "sidecar", Image: "registry/side:1"},
			},
			InitContainers: []corev1.Container{{Name: "init", Image: "i", Ports: []corev1.ContainerPort{{ContainerPort: 53, Protocol: corev1.ProtocolUDP}}}},
			Volumes:        []corev1.Volume{{Name: "v"}},
			NodeSelector:   map[string]string{"kubernetes.io/os": "windows"},
		},
		Status: corev1.PodStatus{
			Phase:             corev1.PodRunning,
			PodIP:             ip,
			PodIPs:            []corev1.PodIP{{IP: ip}},
			HostIP:            "172.20.41.103",
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "registry/app:1", ImageID: "sha256:abc"}},
		},
	}
}

func TestPodTransform(t *testing.T) {
	in := fullPod("web", "a", "win-1", map[string]string{"app": "web"}, "10.244.1.5")
	tr := podTransform(&interner{})
	got, err := tr(in.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	p, ok := got.(*podObject)
	if !ok {
		t.Fatalf("transform returned %T, want *podObject", got)
	}
	want := &podObject{rv: "7", Pod: Pod{
		Namespace: "web", Name: "a", Node: "win-1", ServiceAccount: "sa-a", Labels: map[string]string{"app": "web"},
		IPs:   []netip.Addr{netip.MustParseAddr("10.244.1.5")},
		Ports: []Port{{Name: "http", Port: 8080, Protocol: "TCP"}, {Port: 53, Protocol: "UDP"}},
		Phase: "Running",
	}}
	if diff := cmp.Diff(want, p, netipCmp, cmp.AllowUnexported(podObject{})); diff != "" {
		t.Errorf("transform (-want +got):\n%s", diff)
	}
	// The informer reads key and resourceVersion through meta.Accessor.
	if key, err := cache.MetaNamespaceKeyFunc(p); err != nil || key != "web/a" {
		t.Errorf("key = %q, %v; want web/a", key, err)
	}
	if m, err := meta.Accessor(p); err != nil || m.GetResourceVersion() != "7" {
		t.Errorf("meta.Accessor: %v, %v", m, err)
	}
	again, _ := tr(p)
	if again != any(p) {
		t.Errorf("transform is not idempotent")
	}
	// Pods with equal labels share one map; snapshots still get copies.
	q, _ := tr(fullPod("web", "b", "win-1", map[string]string{"app": "web"}, "10.244.1.6"))
	if reflect.ValueOf(q.(*podObject).Labels).UnsafePointer() != reflect.ValueOf(p.Labels).UnsafePointer() {
		t.Errorf("equal label sets are not shared")
	}
	// So do pods with equal ports, and a pod with others has its own.
	if q.(*podObject).Ports[0] != p.Ports[0] || &q.(*podObject).Ports[0] != &p.Ports[0] {
		t.Errorf("equal port lists are not shared")
	}
	other := fullPod("web", "c", "win-1", map[string]string{"app": "web"}, "10.244.1.7")
	other.Spec.Containers[0].Ports[0].ContainerPort = 8081
	if r, _ := tr(other); r.(*podObject).Ports[0].Port != 8081 || &r.(*podObject).Ports[0] == &p.Ports[0] {
		t.Errorf("a pod with other ports got %+v", r.(*podObject).Ports)
	}
	// Tombstones pass through untouched.
	tomb := cacheTombstone(in)
	if out, _ := tr(tomb); !reflect.DeepEqual(out, tomb) {
		t.Errorf("transform changed a tombstone")
	}
	// Without the transform, the same snapshot comes from the full pod.
	full, _ := podView(in)
	if diff := cmp.Diff(want.Pod, full, netipCmp); diff != "" {
		t.Errorf("podView(full pod) (-want +got):\n%s", diff)
	}
}

func TestInternerLimit(t *testing.T) {
	var in interner
	first := in.str(strings.Repeat("a", 3))
	for i := range internStrLimit + 10 {
		in.str(fmt.Sprint(i))
	}
	if len(in.strs) > internStrLimit {
		t.Errorf("intern table holds %d strings, limit %d", len(in.strs), internStrLimit)
	}
	if first != "aaa" {
		t.Errorf("interned string changed: %q", first)
	}
}

func TestNodeTransform(t *testing.T) {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "lin-1", ResourceVersion: "9", Labels: map[string]string{"kubernetes.io/os": "linux"},
			Annotations: map[string]string{
				AnnotationTunnelMAC: "66:de:0a:0b:0c:0d", AnnotationTunnelAddr: "10.244.7.0",
				"node.alpha.kubernetes.io/ttl": "0", "hnsplan.io/state": "converged",
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.7.0/24", PodCIDRs: []string{"10.244.7.0/24"}},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.20.41.10"}, {Type: corev1.NodeHostName, Address: "lin-1"}},
			Images:    []corev1.ContainerImage{{Names: []string{"big/image:1"}, SizeBytes: 1 << 30}},
		},
	}
	out, _ := nodeTransform("win-1", &interner{})(n.DeepCopy())
	got, ok := out.(*nodeObject)
	if !ok {
		t.Fatalf("transform returned %T, want *nodeObject", out)
	}
	// nodeObject has no field for managedFields or images: storing one
	// proves they are gone.
	if got.rv != n.ResourceVersion {
		t.Errorf("resourceVersion %q, want %q", got.rv, n.ResourceVersion)
	}
	want := Node{
		Name: "lin-1", Labels: map[string]string{"kubernetes.io/os": "linux"},
		Annotations: map[string]string{AnnotationTunnelMAC: "66:de:0a:0b:0c:0d", AnnotationTunnelAddr: "10.244.7.0", "hnsplan.io/state": "converged"},
		PodCIDRs:    []netip.Prefix{netip.MustParsePrefix("10.244.7.0/24")},
		Addresses:   []NodeAddress{{Type: "InternalIP", Addr: netip.MustParseAddr("172.20.41.10")}},
		TunnelMAC:   "66-DE-0A-0B-0C-0D", TunnelAddr: netip.MustParseAddr("10.244.7.0"),
	}
	if diff := cmp.Diff(want, got.view(), netipCmp); diff != "" {
		t.Errorf("node (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(nodeFromAPI(n), withAnnotations(got.view(), n.Annotations), netipCmp); diff != "" {
		t.Errorf("stored node differs from nodeFromAPI but for annotations (-want +got):\n%s", diff)
	}
	again, _ := nodeTransform("win-1", &interner{})(out)
	if again != out {
		t.Errorf("transform of a stored node made %v, want it unchanged", again)
	}
	self, _ := nodeTransform("lin-1", &interner{})(n.DeepCopy())
	if ann := self.(*nodeObject).view().Annotations; len(ann) != 4 {
		t.Errorf("own node lost annotations: %v", ann)
	}
}

func withAnnotations(n Node, ann map[string]string) Node {
	n.Annotations = ann
	return n
}

func blockAffinity(name, node, cidr string, deleted any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "BlockAffinity",
		"metadata": map[string]any{"name": name, "managedFields": []any{map[string]any{"manager": "calico"}}},
		"spec":     map[string]any{"node": node, "cidr": cidr, "state": "confirmed", "deleted": deleted},
	}}
}

func newFakes(t *testing.T, objs []runtime.Object, bas ...runtime.Object) (*fake.Clientset, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	cs := fake.NewClientset(objs...)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{BlockAffinityResource: "BlockAffinityList"}, bas...)
	return cs, dyn
}

func startSynced(t *testing.T, c *Client) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c.Start(ctx)
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if !c.WaitForSync(wctx) {
		t.Fatal("cache did not sync")
	}
}

func TestCacheSnapshots(t *testing.T) {
	objs := []runtime.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"team": "a"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win-1", Annotations: map[string]string{"a": "b"}},
			Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "lin-1", Annotations: map[string]string{AnnotationTunnelMAC: "66:de:0a:0b:0c:0d"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "lin-2", Annotations: map[string]string{AnnotationTunnelMAC: "garbage"}}},
		fullPod("web", "b", "lin-1", map[string]string{"app": "web"}, "10.244.7.3"),
		fullPod("web", "a", "win-1", map[string]string{"app": "web"}, "10.244.1.5"),
		fullPod("api", "z", "win-1", nil, "10.244.1.6"),
	}
	cs, dyn := newFakes(t, objs,
		blockAffinity("win-1-10-244-1-0-26", "win-1", "10.244.1.0/26", "false"),
		blockAffinity("lin-1-10-244-7-0-26", "lin-1", "10.244.7.0/26", true))
	c := New(cs, dyn, "win-1")
	startSynced(t, c)

	keys := func(ps []Pod) (out []string) {
		for _, p := range ps {
			out = append(out, p.Key())
		}
		return out
	}
	if got, want := keys(c.Pods()), []string{"api/z", "web/a", "web/b"}; !slices.Equal(got, want) {
		t.Errorf("Pods() = %v, want %v", got, want)
	}
	if got, want := keys(c.PodsOnNode()), []string{"api/z", "web/a"}; !slices.Equal(got, want) {
		t.Errorf("PodsOnNode() = %v, want %v", got, want)
	}
	if got, want := c.TunnelMACs(), map[string]string{"lin-1": "66-DE-0A-0B-0C-0D"}; !reflect.DeepEqual(got, want) {
		t.Errorf("TunnelMACs() = %v, want %v", got, want)
	}
	if n, ok := c.Node(); !ok || n.Annotations["a"] != "b" || n.PodCIDRs[0] != netip.MustParsePrefix("10.244.1.0/24") {
		t.Errorf("Node() = %+v, %v", n, ok)
	}
	if got := c.Namespaces(); len(got) != 1 || got[0].Labels["team"] != "a" {
		t.Errorf("Namespaces() = %+v", got)
	}
	wantBA := []BlockAffinity{
		{Name: "lin-1-10-244-7-0-26", Node: "lin-1", CIDR: netip.MustParsePrefix("10.244.7.0/26"), State: "confirmed", Deleted: true},
		{Name: "win-1-10-244-1-0-26", Node: "win-1", CIDR: netip.MustParsePrefix("10.244.1.0/26"), State: "confirmed"},
	}
	if got := c.BlockAffinities(); !reflect.DeepEqual(got, wantBA) {
		t.Errorf("BlockAffinities() = %+v, want %+v", got, wantBA)
	}
	if !c.BlockAffinitiesAvailable() {
		t.Errorf("BlockAffinitiesAvailable() = false with the CRD served")
	}
	// Snapshots are copies: changing one changes nothing in the cache.
	c.Pods()[1].Labels["x"] = "y"
	if _, ok := c.Pods()[1].Labels["x"]; ok {
		t.Errorf("Pods() shares label maps with the cache")
	}
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		case <-time.After(200 * time.Millisecond):
			return
		}
	}
}

func TestChangesIgnoresIrrelevantUpdates(t *testing.T) {
	pod := fullPod("web", "a", "win-1", map[string]string{"app": "web"}, "10.244.1.5")
	cs, dyn := newFakes(t, []runtime.Object{pod})
	c := New(cs, dyn, "win-1")
	startSynced(t, c)
	drain(c.Changes())
	ctx := context.Background()

	// A readiness flip changes resourceVersion and status, nothing the agent reads.
	p := pod.DeepCopy()
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	p.ResourceVersion = "8"
	if _, err := cs.CoreV1().Pods("web").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Changes():
		t.Errorf("Changes signalled for a status condition update")
	case <-time.After(500 * time.Millisecond):
	}

	p.Labels = map[string]string{"app": "api"}
	p.ResourceVersion = "9"
	if _, err := cs.CoreV1().Pods("web").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Changes():
	case <-time.After(5 * time.Second):
		t.Fatalf("no Changes signal after a label change")
	}
	if got := c.Pods()[0].Labels["app"]; got != "api" {
		t.Errorf("label = %q after update, want api", got)
	}
}

func TestBlockAffinityCRDMissing(t *testing.T) {
	cs, dyn := newFakes(t, nil)
	var mu sync.Mutex
	lists := 0
	dyn.PrependReactor("list", "blockaffinities", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		lists++
		mu.Unlock()
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "crd.projectcalico.org", Resource: "blockaffinities"}, "")
	})
	dyn.PrependWatchReactor("blockaffinities", func(k8stesting.Action) (bool, watchIface, error) {
		t.Errorf("watch started while the CRD is missing")
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "blockaffinities"}, "")
	})
	c := New(cs, dyn, "win-1", WithCRDRecheck(100*time.Millisecond))
	startSynced(t, c)
	if c.BlockAffinitiesAvailable() || c.BlockAffinities() != nil {
		t.Errorf("available=%v affinities=%v, want false, nil", c.BlockAffinitiesAvailable(), c.BlockAffinities())
	}
	time.Sleep(time.Second)
	mu.Lock()
	defer mu.Unlock()
	// One initial list, then one cheap look per recheck period: no storm.
	if lists < 2 || lists > 15 {
		t.Errorf("%d lists in 1s with a 100ms recheck", lists)
	}
}

func TestCordonUncordon(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name            string
		unschedulable   bool
		wantAfterCordon bool
		wantMarker      bool
		wantAfterUncord bool
		annotations     map[string]string
	}{
		{name: "schedulable", wantAfterCordon: true, wantMarker: true, wantAfterUncord: false},
		{name: "operator-cordoned", unschedulable: true, wantAfterCordon: true, wantMarker: false, wantAfterUncord: true},
		// rollout resume let go of the agent's cordon; replace --retry
		// takes it up again: the let-go goes, so that the node is
		// stranded again if the agent dies.
		{name: "let go of, then retried", unschedulable: true, wantAfterCordon: true, wantMarker: true, wantAfterUncord: false,
			annotations: map[string]string{AnnotationCordoned: "true", AnnotationLetGo: "2026-11-28T12:00:00Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, dyn := newFakes(t, []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win-1", Annotations: tc.annotations},
				Spec: corev1.NodeSpec{Unschedulable: tc.unschedulable}}})
			c := New(cs, dyn, "win-1")
			get := func() *corev1.Node {
				n, err := cs.CoreV1().Nodes().Get(ctx, "win-1", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			for range 2 { // idempotent
				if err := c.Cordon(ctx); err != nil {
					t.Fatal(err)
				}
			}
			n := get()
			_, marker := n.Annotations[AnnotationCordoned]
			if n.Spec.Unschedulable != tc.wantAfterCordon || marker != tc.wantMarker {
				t.Errorf("after Cordon: unschedulable=%v marker=%v", n.Spec.Unschedulable, marker)
			}
			if _, letGo := n.Annotations[AnnotationLetGo]; letGo {
				t.Errorf("after Cordon: the let-go mark stays (%v): the node would not count as stranded if the agent died", n.Annotations)
			}
			// A new Client (an agent restart) knows from the marker.
			c2 := New(cs, dyn, "win-1")
			if err := c2.Uncordon(ctx); err != nil {
				t.Fatal(err)
			}
			n = get()
			_, marker = n.Annotations[AnnotationCordoned]
			if n.Spec.Unschedulable != tc.wantAfterUncord || marker {
				t.Errorf("after Uncordon: unschedulable=%v marker=%v", n.Spec.Unschedulable, marker)
			}
		})
	}
}

func TestEvict(t *testing.T) {
	ctx := context.Background()
	pod := func(name string, mod func(*corev1.Pod)) *corev1.Pod {
		p := fullPod("web", name, "win-1", nil, "10.244.1.9")
		if mod != nil {
			mod(p)
		}
		return p
	}
	yes := true
	now := metav1.Now()
	objs := []runtime.Object{
		pod("plain", nil),
		pod("guarded", nil),
		pod("ds", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "d", Controller: &yes}}
		}),
		pod("mirror", func(p *corev1.Pod) { p.Annotations[corev1.MirrorPodAnnotationKey] = "x" }),
		pod("hostnet", func(p *corev1.Pod) { p.Spec.HostNetwork = true }),
		pod("terminating", func(p *corev1.Pod) { p.DeletionTimestamp = &now }),
		fullPod("web", "elsewhere", "win-2", nil, "10.244.2.9"),
	}
	cs, dyn := newFakes(t, objs)
	// The fake clientset honours neither the field selector nor evictions;
	// play the API server: filter by node, refuse "guarded" as a PDB would,
	// delete the others.
	cs.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sel := a.(k8stesting.ListAction).GetListRestrictions().Fields
		all, err := cs.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), "")
		if err != nil {
			return true, nil, err
		}
		l := all.(*corev1.PodList)
		l.Items = slices.DeleteFunc(l.Items, func(p corev1.Pod) bool {
			return !sel.Matches(fieldsSet{"spec.nodeName": p.Spec.NodeName})
		})
		return true, l, nil
	})
	var evicted []string
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		evicted = append(evicted, ev.Name)
		if ev.Name == "guarded" {
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		}
		return true, nil, cs.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), ev.Namespace, ev.Name)
	})
	c := New(cs, dyn, "win-1")
	pending, err := c.Evict(ctx)
	if err != nil {
		t.Fatalf("Evict: %v", err)
	}
	if want := []string{"web/guarded", "web/terminating"}; !slices.Equal(pending, want) {
		t.Errorf("pending = %v, want %v", pending, want)
	}
	slices.Sort(evicted)
	if want := []string{"guarded", "plain"}; !slices.Equal(evicted, want) {
		t.Errorf("eviction requests for %v, want %v", evicted, want)
	}
}

func TestSetStatus(t *testing.T) {
	ctx := context.Background()
	cs, dyn := newFakes(t, []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win-1",
		Annotations: map[string]string{"other": "kept"}}}})
	c := New(cs, dyn, "win-1")
	startSynced(t, c)
	annotations := func() map[string]string {
		n, err := cs.CoreV1().Nodes().Get(ctx, "win-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.Annotations
	}
	if err := c.SetStatus(ctx, Status{Digest: "sha256:1", State: StateError, Error: "hns: boom"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"other": "kept", AnnotationDigest: "sha256:1", AnnotationState: "error", AnnotationLastError: "hns: boom"}
	if got := annotations(); !reflect.DeepEqual(got, want) {
		t.Errorf("annotations = %v, want %v", got, want)
	}
	if err := c.SetStatus(ctx, Status{Digest: "sha256:2", State: StateConverged}); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"other": "kept", AnnotationDigest: "sha256:2", AnnotationState: "converged"}
	if got := annotations(); !reflect.DeepEqual(got, want) {
		t.Errorf("annotations = %v, want %v (last-error removed)", got, want)
	}
	// A read-back mismatch is its state and an annotation of its own,
	// removed with the mismatch.
	mismatch := "network Calico: VNI sent 4096, read back 4097"
	if err := c.SetStatus(ctx, Status{Digest: "sha256:2", State: StateReadbackMismatch, Mismatch: mismatch}); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"other": "kept", AnnotationDigest: "sha256:2", AnnotationState: "hns-readback-mismatch", AnnotationReadbackMismatch: mismatch}
	if got := annotations(); !reflect.DeepEqual(got, want) {
		t.Errorf("annotations = %v, want %v", got, want)
	}
	// (SetStatus trusts the cache: let it see the mismatch first.)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, _ := c.Node(); n.Annotations[AnnotationReadbackMismatch] == mismatch {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("cache did not catch up")
		}
	}
	if err := c.SetStatus(ctx, Status{Digest: "sha256:2", State: StateConverged}); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"other": "kept", AnnotationDigest: "sha256:2", AnnotationState: "converged"}
	if got := annotations(); !reflect.DeepEqual(got, want) {
		t.Errorf("annotations = %v, want %v (readback-mismatch removed)", got, want)
	}
	// Once the cache shows the status, setting it again sends nothing.
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, _ := c.Node()
		if n.Annotations[AnnotationDigest] == "sha256:2" && n.Annotations[AnnotationLastError] == "" && n.Annotations[AnnotationReadbackMismatch] == "" && n.Annotations[AnnotationState] == "converged" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("cache did not catch up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := countPatches(cs)
	if err := c.SetStatus(ctx, Status{Digest: "sha256:2", State: StateConverged}); err != nil {
		t.Fatal(err)
	}
	if n := countPatches(cs) - before; n != 0 {
		t.Errorf("%d patches for an unchanged status, want 0", n)
	}

	if err := c.PublishTunnel(ctx, "00-15-5D-7A-00-22", netip.MustParseAddr("10.244.1.0")); err != nil {
		t.Fatal(err)
	}
	got := annotations()
	if got[AnnotationTunnelMAC] != "00:15:5d:7a:00:22" || got[AnnotationTunnelAddr] != "10.244.1.0" {
		t.Errorf("tunnel annotations = %v", got)
	}
	if err := c.PublishTunnel(ctx, "00-15-5D-7A-00-22", netip.MustParseAddr("fd00::1")); err == nil ||
		err.Error() != `kube: publish tunnel of node "win-1": VTEP address fd00::1 is not IPv4` {
		t.Errorf("IPv6 VTEP: err = %v", err)
	}
}

func countPatches(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "patch" {
			n++
		}
	}
	return n
}

// TestAgentAnnotations: every annotation the agent writes on its Node —
// each status field set, its cordon, its tunnel — is in AgentAnnotations
// (what deploy/node-patch-policy.yaml admits, examples/deploy_test.go),
// and every one listed is written: the list and the writes are one.
func TestAgentAnnotations(t *testing.T) {
	ctx := context.Background()
	// An operator's let-go of the agent's cordon is there: the agent writes
	// it only by removing it, with its next cordon.
	cs, dyn := newFakes(t, []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win-1",
		Annotations: map[string]string{"other": "kept", AnnotationLetGo: "operator"}}}})
	c := New(cs, dyn, "win-1")
	startSynced(t, c)
	// Every field of Status set: a new field that writes an annotation
	// must be set here, or this test's count of writes falls short.
	st := Status{Digest: "sha256:1", Routes: "sha256:2", State: StateReadbackMismatch, Error: "e", Mismatch: "m", Audit: "1 problems"}
	if n := reflect.TypeFor[Status]().NumField(); n != 6 {
		t.Fatalf("Status has %d fields; set each in this test", n)
	}
	if err := c.SetStatus(ctx, st); err != nil {
		t.Fatal(err)
	}
	if err := c.Cordon(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.PublishTunnel(ctx, "00-15-5D-7A-00-22", netip.MustParseAddr("10.244.7.0")); err != nil {
		t.Fatal(err)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, "win-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wrote []string
	for k := range n.Annotations {
		if k != "other" {
			wrote = append(wrote, k)
		}
	}
	if _, ok := n.Annotations[AnnotationLetGo]; !ok {
		wrote = append(wrote, AnnotationLetGo) // written by its removal
	}
	slices.Sort(wrote)
	listed := slices.Sorted(slices.Values(AgentAnnotations))
	if !slices.Equal(wrote, listed) {
		t.Errorf("the agent writes %q; AgentAnnotations lists %q", wrote, listed)
	}
}
