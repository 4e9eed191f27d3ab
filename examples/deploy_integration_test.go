//go:build integration

// Integration tests of deploy/ against a real kube-apiserver and
// etcd: make test-integration, or
//
//	KAS_RUN_DIR=/tmp/kas hack/kube-test-env.sh start   # from the repository root
//	KUBECONFIG=/tmp/kas/kubeconfig go test -tags integration ./examples/ -run Deploy
//
// They apply the manifests as they are and then act as the agent of one
// node, by impersonation (the user, groups and extra a node-bound or
// pod-bound token of the hnsplan-agent ServiceAccount authenticates as) and
// with real tokens from the TokenRequest API. The policies match only agent
// identities, so the tests share the API server with other packages' tests;
// their nodes, pods and namespaces have names unique to the run.

package examples_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/internal/kubetest"
)

// nodeNameExtra is the extra deploy/'s policies read the agent's node
// from; kubetest.AgentConfig impersonates with its copy of the name, which
// TestDeployAgentTokens checks against real tokens.
const nodeNameExtra = kube.ExtraNodeName

func applyObject(t *testing.T, ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, file string, obj runtime.Object) {
	t.Helper()
	if err := serverSideApply(t, ctx, dyn, mapper, file, obj, metav1.ApplyOptions{FieldManager: "hnsplan-deploy-test", Force: true}); err != nil {
		t.Fatal(err)
	}
}

// serverSideApply applies obj, read from file, as `kubectl apply
// --server-side` does; the error names the file, the kind and the name.
func serverSideApply(t *testing.T, ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, file string, obj runtime.Object, opts metav1.ApplyOptions) error {
	t.Helper()
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvks[0])
	if err := kubetest.Apply(ctx, dyn, mapper, u, opts); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// fixture is two nodes and a pod on each, in a namespace of this run.
type fixture struct {
	ns, nodeA, nodeB string
	admin            kubernetes.Interface
}

func newFixture(t *testing.T, ctx context.Context, admin kubernetes.Interface) *fixture {
	t.Helper()
	f := &fixture{ns: kubetest.UniqueName("evict"), nodeA: kubetest.UniqueName("win-a"), nodeB: kubetest.UniqueName("win-b"), admin: admin}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.CoreV1().Namespaces().Delete(context.Background(), f.ns, metav1.DeleteOptions{}) })
	for _, n := range []string{f.nodeA, f.nodeB} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"kubernetes.io/os": "windows"}}}
		if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			// A finalizer a failed assertion left would keep the node.
			patch := []byte(`{"metadata":{"finalizers":null}}`)
			admin.CoreV1().Nodes().Patch(context.Background(), n, types.MergePatchType, patch, metav1.PatchOptions{})
			admin.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		})
	}
	return f
}

// pod creates a pod bound to node (as the scheduler would have) in the
// fixture's namespace.
func (f *fixture) pod(t *testing.T, ctx context.Context, name, node string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "c", Image: "mcr.microsoft.com/windows/nanoserver:ltsc2022"}},
		},
	}
	got, err := f.admin.CoreV1().Pods(f.ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// waitForEvictionPolicy waits until the eviction policy, as it is in
// deploy/, is in force for agent, the agent of node A. The probe is one only
// its latest rule denies (an eviction without a UID precondition), of a
// pod on A made for it; until then the probe may evict that pod.
func (f *fixture) waitForEvictionPolicy(t *testing.T, ctx context.Context, agent kubernetes.Interface, name string) {
	t.Helper()
	probe := f.pod(t, ctx, name, f.nodeA)
	kubetest.WaitForPolicy(t, "eviction policy", "with its UID as precondition", func() error { return evict(ctx, agent, probe, "-") })
}

// evict evicts p through cs the way the agent does: with p's UID as
// precondition (uid overrides it; "-" sends none).
func evict(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod, uid types.UID) error {
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
	switch uid {
	case "":
		uid = p.UID
		fallthrough
	default:
		ev.DeleteOptions = &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	case "-":
	}
	return cs.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)
}

// wantDenied fails unless err is the admission policy's refusal, a 403 (or
// 422 for reason Invalid) whose message contains want.
func wantDenied(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: allowed, want denied (%q)", what, want)
	case !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err):
		t.Errorf("%s: %v, want Forbidden or Invalid", what, err)
	case !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") || !strings.Contains(err.Error(), want):
		t.Errorf("%s: %v, want the admission policy's refusal containing %q", what, err, want)
	}
}

func TestDeployEvictionOwnNodeOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := kubetest.Config(t)
	kubetest.ApplyDeploy(t, ctx, admin)
	f := newFixture(t, ctx, kubetest.Client(t, admin))
	agentA := kubetest.Client(t, kubetest.AgentConfig(admin, f.nodeA))

	f.waitForEvictionPolicy(t, ctx, agentA, "probe")

	onA := f.pod(t, ctx, "on-a", f.nodeA)
	onA2 := f.pod(t, ctx, "on-a-2", f.nodeA)
	onB := f.pod(t, ctx, "on-b", f.nodeB)
	unscheduled := f.pod(t, ctx, "unscheduled", "")

	wantDenied(t, "agent of A evicts a pod on B", evict(ctx, agentA, onB, ""), "pod "+f.ns+"/on-b is on node "+f.nodeB)
	wantDenied(t, "agent of A evicts an unscheduled pod", evict(ctx, agentA, unscheduled, ""), "is on no node")
	wantDenied(t, "agent of A evicts a pod on A without a UID precondition", evict(ctx, agentA, onA, "-"), "with its UID as precondition")
	wantDenied(t, "agent of A evicts a pod on A naming another UID", evict(ctx, agentA, onA, onB.UID), "with its UID as precondition")
	wantDenied(t, "agent of B evicts a pod on A", evict(ctx, kubetest.Client(t, kubetest.AgentConfig(admin, f.nodeB)), onA, ""), "is on node "+f.nodeA)
	wantDenied(t, "agent with a token bound to no node evicts a pod on A", evict(ctx, kubetest.Client(t, kubetest.AgentConfig(admin, "")), onA, ""), "its token names no node")

	if err := evict(ctx, agentA, onA, ""); err != nil {
		t.Errorf("agent of A evicts a pod on A: %v", err)
	}
	// The agent's own drain, as the replace runs it: it evicts everything
	// on A (only on-a-2 is left running), and nothing on B.
	pending, err := kube.New(agentA, nil, f.nodeA).Evict(ctx)
	if err != nil {
		t.Errorf("agent of A drains A: %v (pending %v)", err, pending)
	}
	for _, p := range []*corev1.Pod{onA, onA2} {
		got, err := f.admin.CoreV1().Pods(f.ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err == nil && got.DeletionTimestamp == nil {
			t.Errorf("pod %s on A: not evicted", p.Name)
		}
	}
	for _, p := range []*corev1.Pod{onB, unscheduled} {
		got, err := f.admin.CoreV1().Pods(f.ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil || got.DeletionTimestamp != nil {
			t.Errorf("pod %s not on A: evicted (%v)", p.Name, err)
		}
	}
	// Other identities are not the policy's business: the admin may evict
	// anywhere.
	if err := evict(ctx, f.admin, onB, ""); err != nil {
		t.Errorf("admin evicts a pod on B: %v", err)
	}
}

// nodePatch is a merge patch of a node, as JSON.
func nodePatch(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDeployNodePatchOwnNodeOwnFields(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := kubetest.Config(t)
	kubetest.ApplyDeploy(t, ctx, admin)
	f := newFixture(t, ctx, kubetest.Client(t, admin))
	agentA := kubetest.Client(t, kubetest.AgentConfig(admin, f.nodeA))
	patch := func(cs kubernetes.Interface, node string, v any) error {
		_, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, nodePatch(t, v), metav1.PatchOptions{})
		return err
	}
	meta := func(m map[string]any) map[string]any { return map[string]any{"metadata": m} }
	ann := func(k string, v any) map[string]any { return meta(map[string]any{"annotations": map[string]any{k: v}}) }
	spec := func(k string, v any) map[string]any { return map[string]any{"spec": map[string]any{k: v}} }

	// The probe is one only this version of the policy denies (an earlier
	// one allowed every hnsplan.io/ annotation), and changes the node each
	// time while it is allowed: a policy that was just updated takes effect
	// a moment later.
	kubetest.WaitForPolicy(t, "node policy", "may change only its own annotations", func() error {
		return patch(agentA, f.nodeA, ann("hnsplan.io/probe", time.Now().String()))
	})

	// What the agent writes, through its own code: status, tunnel, cordon.
	agent := kube.New(agentA, nil, f.nodeA)
	// Every field of its status: each annotation the agent writes must
	// pass the policy (applied-routes and readback-mismatch once did not).
	if err := agent.SetStatus(ctx, kube.Status{Digest: "sha256:" + strings.Repeat("ab", 32), Routes: "sha256:" + strings.Repeat("ef", 32),
		State: kube.StateReadbackMismatch, Error: "boom", Mismatch: "network Calico VNI: sent 4096, read 0", Audit: "2 problems: duplicate-ip 1 (Calico 10.244.1.5); orphan-endpoint 1 (gone 10.244.1.9)"}); err != nil {
		t.Errorf("agent of A sets its status: %v", err)
	}
	if err := agent.SetStatus(ctx, kube.Status{Digest: "sha256:" + strings.Repeat("cd", 32), State: kube.StateConverged}); err != nil {
		t.Errorf("agent of A clears its last error: %v", err)
	}
	if err := agent.PublishTunnel(ctx, "00-15-5D-7A-00-22", netip.MustParseAddr("10.244.7.0")); err != nil {
		t.Errorf("agent of A publishes its VXLAN tunnel: %v", err)
	}
	if err := agent.Cordon(ctx); err != nil {
		t.Errorf("agent of A cordons A: %v", err)
	}
	if n, err := f.admin.CoreV1().Nodes().Get(ctx, f.nodeA, metav1.GetOptions{}); err != nil || !n.Spec.Unschedulable {
		t.Errorf("after Cordon node A is not unschedulable (%v)", err)
	}
	if err := agent.Uncordon(ctx); err != nil {
		t.Errorf("agent of A uncordons A: %v", err)
	}
	n, err := f.admin.CoreV1().Nodes().Get(ctx, f.nodeA, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Spec.Unschedulable || n.Annotations[kube.AnnotationState] != "converged" ||
		n.Annotations[kube.AnnotationTunnelMAC] != "00:15:5d:7a:00:22" || n.Annotations[kube.AnnotationTunnelAddr] != "10.244.7.0" {
		t.Errorf("node A after the agent's writes: unschedulable %v, annotations %v", n.Spec.Unschedulable, n.Annotations)
	}

	// Another node: nothing, not even the agent's own annotations.
	if err := kube.New(agentA, nil, f.nodeB).SetStatus(ctx, kube.Status{State: kube.StateConverged}); err == nil ||
		!strings.Contains(err.Error(), "may patch only the node its token is bound to ("+f.nodeA+"), not "+f.nodeB) {
		t.Errorf("agent of A sets the status of B: %v, want the policy's refusal", err)
	}
	wantDenied(t, "agent of A cordons B", patch(agentA, f.nodeB, spec("unschedulable", true)), "not "+f.nodeB)
	wantDenied(t, "agent bound to no node patches A", patch(kubetest.Client(t, kubetest.AgentConfig(admin, "")), f.nodeA, ann(kube.AnnotationState, "converged")), "bound to (none)")

	// Its own node: only its annotations, only spec.unschedulable.
	const own = "may change only its own annotations"
	for _, c := range []struct {
		what  string
		patch map[string]any
		want  string
	}{
		{"another hnsplan.io annotation", ann("hnsplan.io/owner", "me"), own},
		{"someone else's annotation", ann("node.alpha.kubernetes.io/ttl", "0"), own},
		{"another Calico annotation", ann("projectcalico.org/IPv4Address", "10.0.0.9/24"), own},
		{"a tunnel address that is no IPv4 address", ann(kube.AnnotationTunnelAddr, "fd00::1"), "only to an IPv4 address"},
		{"a tunnel address that is no address", ann(kube.AnnotationTunnelAddr, "evil"), "only to an IPv4 address"},
		{"a tunnel MAC in another form", ann(kube.AnnotationTunnelMAC, "00-15-5D-7A-00-22"), "only to a MAC address"},
		{"a label", meta(map[string]any{"labels": map[string]any{"node-role.kubernetes.io/control-plane": ""}}), "labels"},
		{"an owner reference", meta(map[string]any{"ownerReferences": []any{map[string]any{
			"apiVersion": "v1", "kind": "Namespace", "name": f.ns, "uid": "0b5e0c4e-54a6-4b2b-9d1e-1f3f0d3b8a11"}}}), "owner references"},
		{"a finalizer", meta(map[string]any{"finalizers": []any{"example.com/keep"}}), "finalizers"},
		{"a taint", spec("taints", []any{map[string]any{"key": "k", "effect": "NoSchedule"}}), "spec.unschedulable"},
		{"the pod CIDR", spec("podCIDR", "10.244.9.0/24"), "spec.unschedulable"},
		{"the provider ID", spec("providerID", "azure:///x"), "spec.unschedulable"},
	} {
		wantDenied(t, "agent of A changes "+c.what+" of A", patch(agentA, f.nodeA, c.patch), c.want)
	}
	// The denials are the policy's alone: the admin may do each of them
	// (and here sets what the agent must leave alone).
	if err := patch(f.admin, f.nodeA, meta(map[string]any{
		"annotations": map[string]any{"example.com/keep": "x"},
		"finalizers":  []any{"example.com/keep"},
	})); err != nil {
		t.Fatalf("admin patches A: %v", err)
	}
	wantDenied(t, "agent of A removes a finalizer of A", patch(agentA, f.nodeA, meta(map[string]any{"finalizers": nil})), "finalizers")
	wantDenied(t, "agent of A removes someone else's annotation of A", patch(agentA, f.nodeA, ann("example.com/keep", nil)), own)
	// ... and the agent's own writes still pass beside them.
	if err := patch(agentA, f.nodeA, ann(kube.AnnotationLastError, "x")); err != nil {
		t.Errorf("agent of A writes %s with foreign annotations and finalizers present: %v", kube.AnnotationLastError, err)
	}
}

// TestDeployAgentTokens checks the premise of both policies with real
// tokens: that the API server puts the node's name in the user info of a
// token bound to a Node (how the install guide makes one today) and of a
// token bound to a Pod on that node (the agent as a DaemonSet), and that
// such a token evicts on its node only.
func TestDeployAgentTokens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if kubetest.NodeNameExtra != nodeNameExtra {
		t.Fatalf("kubetest impersonates agents with the extra %q; the agent reads %q", kubetest.NodeNameExtra, nodeNameExtra)
	}
	admin := kubetest.Config(t)
	kubetest.ApplyDeploy(t, ctx, admin)
	f := newFixture(t, ctx, kubetest.Client(t, admin))
	nodeA, err := f.admin.CoreV1().Nodes().Get(ctx, f.nodeA, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The agent's pod, as a DaemonSet would place it on node A.
	agentPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: kubetest.UniqueName("hnsplan-agent"), Namespace: deployNamespace},
		Spec: corev1.PodSpec{
			NodeName:           f.nodeA,
			ServiceAccountName: "hnsplan-agent",
			SecurityContext:    &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "agent", Image: "hnsplan-agent", SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			}}},
		},
	}
	agentPod, err = f.admin.CoreV1().Pods(deployNamespace).Create(ctx, agentPod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.admin.CoreV1().Pods(deployNamespace).Delete(context.Background(), agentPod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})

	for _, bound := range []authenticationv1.BoundObjectReference{
		{Kind: "Node", APIVersion: "v1", Name: nodeA.Name, UID: nodeA.UID},
		{Kind: "Pod", APIVersion: "v1", Name: agentPod.Name, UID: agentPod.UID},
	} {
		t.Run(bound.Kind, func(t *testing.T) {
			tr, err := f.admin.CoreV1().ServiceAccounts(deployNamespace).CreateToken(ctx, "hnsplan-agent", &authenticationv1.TokenRequest{
				Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &bound, ExpirationSeconds: ptr.To[int64](600)},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("request a token bound to %s %s: %v", bound.Kind, bound.Name, err)
			}
			cfg := rest.AnonymousClientConfig(admin)
			cfg.BearerToken = tr.Status.Token
			cs := kubetest.Client(t, cfg)
			// What the agent asks at start (hnsplan-agent run).
			id, err := kube.WhoAmI(ctx, cs)
			if err != nil {
				t.Fatalf("who am I, with a token bound to %s: %v", bound.Kind, err)
			}
			if id.User != kubetest.AgentUser {
				t.Fatalf("token bound to %s authenticates as %q, want %q", bound.Kind, id.User, kubetest.AgentUser)
			}
			if id.Node == "" {
				t.Skipf("this API server puts no %s in the user info of a token bound to a %s: "+
					"it needs Kubernetes 1.32+ (feature gate ServiceAccountTokenPodNodeInfo) for a Pod, "+
					"1.31+ (ServiceAccountTokenNodeBinding) for a Node", nodeNameExtra, bound.Kind)
			}
			if id.Node != f.nodeA {
				t.Fatalf("token bound to %s on %s: extra %s = %q, want %q", bound.Kind, f.nodeA, nodeNameExtra, id.Node, f.nodeA)
			}
			f.waitForEvictionPolicy(t, ctx, cs, "probe-"+strings.ToLower(bound.Kind))
			onA := f.pod(t, ctx, "on-a-"+strings.ToLower(bound.Kind), f.nodeA)
			if err := evict(ctx, cs, onA, ""); err != nil {
				t.Errorf("token bound to %s evicts a pod on its node: %v", bound.Kind, err)
			}
			if err := kube.New(cs, nil, f.nodeA).SetStatus(ctx, kube.Status{State: kube.StateConverged}); err != nil {
				t.Errorf("token bound to %s sets its node's status: %v", bound.Kind, err)
			}
			wantDenied(t, "token bound to "+bound.Kind+" on A patches B",
				kube.New(cs, nil, f.nodeB).SetStatus(ctx, kube.Status{State: kube.StateConverged}), "not "+f.nodeB)
		})
	}
}
