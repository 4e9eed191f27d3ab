//go:build integration

package applier_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/applier/rollout"
	"github.com/hnsplan/hnsplan/applier/statedir"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/fleet"
	"github.com/hnsplan/hnsplan/internal/kubetest"
)

// TestAbortThenNewPlan is the fault probe's "replace --abort hits the next
// plan" on the real kube-apiserver, with deploy/'s RBAC and admission
// policies applied and the agent acting as its node's own hnsplan-agent
// (a node-bound token: its cordon, uncordon, slot Lease, Events and Node
// annotations all pass the policies), driven pass by pass so that the
// order of the operator's request and the new plan is the test's:
//
//   - a VNI change (plan A) whose drain a PodDisruptionBudget blocks: the
//     node holds a slot, is cordoned and blocked; rollout status shows it
//     halted (the status `hnsplan rollout status` exits 4 on);
//
//   - the operator asks to abort A (replace --abort A), and plan B is
//     published before the agent's next pass: the agent ignores the
//     request (Event ReplaceRequestIgnored) and B's replace goes on,
//     slot held, cordoned, halted;
//
//   - an abort naming B is taken: uncordoned, the slot Lease deleted,
//     replace-pending, no longer halted;
//
//   - replace --retry B: blocked again, halted; rollout resume frees the
//     slot and lets go of the node (rollout-halted, not halted in
//     status); with the budget gone and the pod left, --retry B
//     converges on B's VNI, uncordoned, with no slot.
//
//     go test -tags integration -run AbortThenNewPlan ./applier/
func TestAbortThenNewPlan(t *testing.T) {
	kubetest.ShareSystemNamespace(t)
	if kubetest.NodeNameExtra != kube.ExtraNodeName {
		t.Fatalf("kubetest impersonates the agent with the extra %q; the agent reads %q", kubetest.NodeNameExtra, kube.ExtraNodeName)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = kubetest.SystemNamespace
	admin := kubetest.Config(t)
	kubetest.ApplyDeploy(t, ctx, admin)
	cs := kubetest.Client(t, admin)
	node, podNS := kubetest.UniqueName("win-abort"), kubetest.UniqueName("it-abort")
	agentCS := kubetest.Client(t, kubetest.AgentConfig(admin, node))
	// rollout status as deploy/rbac-rollout.yaml's read-only identity.
	statusCS := kubetest.Client(t, kubetest.ServiceAccountConfig(admin, "hnsplan-rollout-status", ""))

	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node,
		Labels: map[string]string{applier.WindowsLabel: "windows"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: podNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), podNS, metav1.DeleteOptions{}) })
	t.Cleanup(func() { // a slot a failed assertion left held
		slots, _ := rollout.Status(context.Background(), cs.CoordinationV1(), ns)
		for _, s := range slots {
			if s.Holder == node {
				_ = cs.CoordinationV1().Leases(ns).Delete(context.Background(), s.Name, metav1.DeleteOptions{})
			}
		}
	})
	// The policies take a moment to be in force, and so do the agent's
	// RBAC rules: probe both with the agent's identity.
	kubetest.WaitForPolicy(t, "lease policy", "hold a slot only for its own node", func() error {
		name := kubetest.UniqueName(rollout.NamePrefix + "probe")
		t.Cleanup(func() { _ = cs.CoordinationV1().Leases(ns).Delete(context.Background(), name, metav1.DeleteOptions{}) })
		_, err := agentCS.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{rollout.SlotLabel: "999"}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("not-" + node), LeaseDurationSeconds: ptr.To(int32(5))}}, metav1.CreateOptions{})
		return err
	})
	kubetest.WaitForPolicy(t, "node policy", "may change only its own annotations", func() error {
		_, err := agentCS.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"hnsplan.io/probe":"x"}}}`), metav1.PatchOptions{})
		return err
	})

	// The plans: the example's for this node, then A and B, each a new
	// VNI. maxUnavailable 50: other packages' tests may hold slots of
	// hnsplan-system meanwhile, and this test is not about pacing.
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	mk := func(p *plan.NodePlan) *plan.NodePlan {
		q := *p
		q.Node, q.Rollout = node, &plan.Rollout{MaxUnavailable: "50"}
		if _, err := plan.Encode(&q); err != nil { // sets the digest
			t.Fatal(err)
		}
		return &q
	}
	base := mk(ex.plans["win-1"])
	planA, planB := mk(withVNI(base, 5000)), mk(withVNI(base, 6000))

	// The agent, with the node's identity.
	var logs lockedLog
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent's log:\n%s", logs.String())
		}
	})
	h := hnsmem.New(hnsmem.ManagementAddress(mgmt(t, base)))
	stateDir := filepath.Join(t.TempDir(), "state")
	if err := statedir.Prepare(stateDir); err != nil {
		t.Fatal(err)
	}
	kc := kube.New(agentCS, nil, node, kube.WithoutBlockAffinities())
	runCtx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	kc.Start(runCtx)
	if !kc.WaitForSync(ctx) {
		t.Fatal("the agent's caches did not sync")
	}
	a, err := applier.NewAgent(applier.Config{Node: node, HNS: h, Plans: chanSource(nil), PlansFrom: "test", StateDir: stateDir,
		HostRoutes: replace.NewMemRoutes(), Listen: "127.0.0.1:0", Kube: kc, Leases: agentCS.CoordinationV1(),
		RolloutNamespace: ns, SlotDuration: 10 * time.Second, SlotPoll: 200 * time.Millisecond,
		DrainTimeout: time.Millisecond, Resync: time.Minute,
		Log: slog.New(slog.NewTextHandler(&logs, nil)).With("agent", node)})
	if err != nil {
		t.Fatal(err)
	}

	// pass runs the agent's passes (as its loop would, back to back) until
	// it reports want, for at most 20 s.
	pass := func(want kube.NodeState) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; {
			next := a.Pass(ctx, 0)
			if next == applier.Requeue {
				continue
			}
			st := a.Status()
			if st.State == want {
				waitState(t, ctx, cs, node, "", want) // as the Node says it
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("state %s (%s), want %s", st.State, st.Error, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// publish is `hnsplan publish` of p (its ConfigMap, which rollout
	// status reads) and the agent's plan source taking it.
	publish := func(p *plan.NodePlan) {
		t.Helper()
		b, err := plan.Encode(p)
		if err != nil {
			t.Fatal(err)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleet.ConfigMapName(node), Namespace: ns,
			Labels:      map[string]string{fleet.LabelManagedBy: "hnsplan", fleet.LabelNode: node},
			Annotations: map[string]string{fleet.AnnotationDigest: p.Digest}},
			Data: map[string]string{planwatch.ConfigMapKey: string(b)}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
			if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cs.CoreV1().ConfigMaps(ns).Delete(context.Background(), cm.Name, metav1.DeleteOptions{}) })
		} else if err != nil {
			t.Fatal(err)
		}
		a.TakePlan(planwatch.Update{Plan: p, Source: "test"})
	}
	// request is what hnsplan-agent replace --abort/--retry DIGEST writes.
	request := func(file string, p *plan.NodePlan) {
		t.Helper()
		if err := statedir.WriteRequest(stateDir, file, p.Digest); err != nil {
			t.Fatal(err)
		}
	}
	// row is this node's row of rollout status, and whether the rollout
	// is halted (what the CLI exits 4 on) and what status says of it.
	row := func() (fleet.NodeRollout, bool, string) {
		t.Helper()
		st, err := fleet.Gather(ctx, statusCS, ns)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := st.Write(&out, "text"); err != nil {
			t.Fatal(err)
		}
		for _, r := range st.Nodes {
			if r.Node == node {
				return r, st.Halted(), out.String()
			}
		}
		t.Fatalf("rollout status has no row for %s:\n%s", node, out.String())
		return fleet.NodeRollout{}, false, ""
	}
	wantHalted := func(when string) {
		t.Helper()
		r, halted, out := row()
		if !halted || r.Phase != fleet.PhaseHalted || r.Stall == nil || r.Stall.Kind != fleet.StallState ||
			!strings.Contains(out, "rollout halted by "+node+": it holds "+r.Slot+" in state blocked") {
			t.Fatalf("%s: rollout status: halted %v, row %+v; want this node halted, in state blocked:\n%s", when, halted, r, out)
		}
	}
	wantNotHalted := func(when string, phase string) {
		t.Helper()
		if r, _, out := row(); r.Phase != phase || r.Stall != nil {
			t.Fatalf("%s: rollout status: row %+v; want phase %s, no stall:\n%s", when, r, phase, out)
		}
	}
	// slot is the slot this node holds, "" for none.
	slot := func() string {
		t.Helper()
		slots, err := rollout.Status(ctx, cs.CoordinationV1(), ns)
		if err != nil {
			t.Fatal(err)
		}
		held := ""
		for _, s := range slots {
			if s.Holder == node {
				held += s.Name
			}
		}
		return held
	}
	cordoned := func() bool {
		t.Helper()
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.Spec.Unschedulable && n.Annotations[kube.AnnotationCordoned] == "true"
	}
	wantReplacing := func(when string) {
		t.Helper()
		if s, c := slot(), cordoned(); s == "" || !c {
			t.Fatalf("%s: slot %q, cordoned %v; want a slot held, cordoned", when, s, c)
		}
	}
	wantGivenUp := func(when string) {
		t.Helper()
		if s, c := slot(), cordoned(); s != "" || c {
			t.Fatalf("%s: slot %q, cordoned %v; want no slot, uncordoned", when, s, c)
		}
	}

	publish(base)
	pass(kube.StateConverged)

	// A pod that cannot leave (its budget allows no disruption), and its
	// endpoint in HNS.
	block := base.Network.Ipams[0].Subnets[0].IpAddressPrefix
	endpoint, ip := "web_"+base.Network.Name, block.Addr().Next().Next().Next()
	if err := h.AddPodEndpoint(base.Network.Name, endpoint, netip.PrefixFrom(ip, block.Bits()), "", nil); err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods(podNS).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip.String(), PodIPs: []corev1.PodIP{{IP: ip.String()}}, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if _, err := cs.CoreV1().Pods(podNS).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	budget(t, ctx, cs, podNS, "web", 0)

	// 1. Plan A: the drain is blocked; the node holds its slot, cordoned,
	// and the rollout is halted.
	publish(planA)
	pass(kube.StateBlocked)
	wantReplacing("plan A blocked")
	wantHalted("plan A blocked")

	// 2. The operator asks to abort A; B is published before the agent's
	// next pass. The request is ignored, and said; B's replace goes on.
	request(statedir.AbortFile, planA)
	publish(planB)
	pass(kube.StateBlocked)
	waitEvent(t, ctx, cs, node, "ReplaceRequestIgnored", "replace --abort was asked for plan \""+planA.Digest+"\", but the plan in force is "+planB.Digest)
	if n, _ := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); n.Annotations[kube.AnnotationState] != string(kube.StateBlocked) {
		t.Fatalf("after an abort asked for A with B in force: state %q; want B's replace blocked, not aborted", n.Annotations[kube.AnnotationState])
	}
	wantReplacing("an abort of A with B in force")
	wantHalted("an abort of A with B in force")

	// 3. An abort naming B is taken: uncordoned (node policy), the slot
	// released (lease policy), replace-pending; no longer halted.
	request(statedir.AbortFile, planB)
	pass(kube.StateReplacePending)
	waitEvent(t, ctx, cs, node, "ReplaceAborted", "the node is uncordoned")
	wantGivenUp("B aborted")
	wantNotHalted("B aborted", fleet.PhasePending)

	// 4. replace --retry B: the slot and the drain again, blocked.
	request(statedir.RetryFile, planB)
	pass(kube.StateBlocked)
	wantReplacing("B retried")
	wantHalted("B retried")

	// 5. rollout resume frees the slot and lets go of the node: the
	// agent halts B's replace until --retry, and status does not count
	// it halted.
	var out bytes.Buffer
	if err := fleet.Resume(ctx, cs, fleet.ResumeOptions{Namespace: ns, Nodes: []string{node}, Out: &out, ErrOut: &out}); err != nil ||
		!strings.Contains(out.String(), "node "+node+": freed ") || !strings.Contains(out.String(), "let go of its cordon") {
		t.Fatalf("rollout resume %s: %v\n%s", node, err, out.String())
	}
	pass(kube.StateRolloutHalted)
	if s := slot(); s != "" {
		t.Fatalf("after resume: the agent holds %s again; want no slot until --retry", s)
	}
	wantNotHalted("after resume", fleet.PhasePending)

	// 6. The pod left (budget deleted, pod gone with its endpoint):
	// replace --retry B finishes B's replace.
	if err := cs.PolicyV1().PodDisruptionBudgets(podNS).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(podNS).Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if err := h.RemoveEndpoint(endpoint); err != nil {
		t.Fatal(err)
	}
	request(statedir.RetryFile, planB)
	pass(kube.StateConverged)
	waitState(t, ctx, cs, node, planB.Digest, kube.StateConverged)
	wantGivenUp("B converged")
	wantNotHalted("B converged", fleet.PhaseConverged)
	snap, err := h.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := snap.Network(base.Network.Name); n == nil || n.Subnets[0].VNI != 6000 {
		t.Errorf("network %+v; want plan B's VNI 6000", n)
	}
}

// waitEvent waits up to 10 s for an Event with reason on node whose
// message contains want (the agent's Events are sent in the background).
func waitEvent(t *testing.T, ctx context.Context, cs kubernetes.Interface, node, reason, want string) {
	t.Helper()
	var last []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		list, err := cs.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + node + ",reason=" + reason})
		if err != nil {
			t.Fatal(err)
		}
		last = last[:0]
		for _, e := range list.Items {
			if strings.Contains(e.Message, want) {
				return
			}
			last = append(last, e.Message)
		}
	}
	t.Fatalf("no Event %s on %s saying %q; those there: %q", reason, node, want, last)
}
