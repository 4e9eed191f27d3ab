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

// policyNode is one Windows node of a test on the real API server with
// deploy/'s RBAC and admission policies applied, whose agent acts as the
// node's own hnsplan-agent (a node-bound identity: its cordon, uncordon,
// slot Leases, Events and Node annotations pass the policies), over an
// in-memory HNS, with its slots in hnsplan-system as in production.
// Operators act as the admin; rollout status reads as deploy/'s
// hnsplan-rollout-status.
type policyNode struct {
	t                     *testing.T
	ctx                   context.Context
	cs, agentCS, statusCS kubernetes.Interface
	name, podNS, stateDir string
	hns                   *hnsmem.HNS
	base                  *plan.NodePlan
	logs                  *lockedLog
	endpoint              string // the blocking pod's HNS endpoint
}

const slotNamespace = kubetest.SystemNamespace

func newPolicyNode(t *testing.T, ctx context.Context, prefix string) *policyNode {
	kubetest.ShareSystemNamespace(t)
	if kubetest.NodeNameExtra != kube.ExtraNodeName {
		t.Fatalf("kubetest impersonates the agent with the extra %q; the agent reads %q", kubetest.NodeNameExtra, kube.ExtraNodeName)
	}
	admin := kubetest.Config(t)
	kubetest.ApplyDeploy(t, ctx, admin)
	n := &policyNode{t: t, ctx: ctx, cs: kubetest.Client(t, admin), name: kubetest.UniqueName(prefix), podNS: kubetest.UniqueName("it-" + prefix),
		stateDir: filepath.Join(t.TempDir(), "state"), logs: &lockedLog{}}
	n.agentCS = kubetest.Client(t, kubetest.AgentConfig(admin, n.name))
	n.statusCS = kubetest.Client(t, kubetest.ServiceAccountConfig(admin, "hnsplan-rollout-status", ""))
	cs := n.cs
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent's log:\n%s", n.logs.String())
		}
	})
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name,
		Labels: map[string]string{applier.WindowsLabel: "windows"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), n.name, metav1.DeleteOptions{}) })
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n.podNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), n.podNS, metav1.DeleteOptions{}) })
	t.Cleanup(func() { // a slot a failed assertion left held
		slots, _ := rollout.Status(context.Background(), cs.CoordinationV1(), slotNamespace)
		for _, s := range slots {
			if s.Holder == n.name {
				_ = cs.CoordinationV1().Leases(slotNamespace).Delete(context.Background(), s.Name, metav1.DeleteOptions{})
			}
		}
	})
	// The policies take a moment to be in force, and so do the agent's
	// RBAC rules: probe both with the agent's identity.
	kubetest.WaitForPolicy(t, "lease policy", "hold a slot only for its own node", func() error {
		name := kubetest.UniqueName(rollout.NamePrefix + "probe")
		t.Cleanup(func() {
			_ = cs.CoordinationV1().Leases(slotNamespace).Delete(context.Background(), name, metav1.DeleteOptions{})
		})
		_, err := n.agentCS.CoordinationV1().Leases(slotNamespace).Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{rollout.SlotLabel: "999"}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("not-" + n.name), LeaseDurationSeconds: ptr.To(int32(5))}}, metav1.CreateOptions{})
		return err
	})
	kubetest.WaitForPolicy(t, "node policy", "may change only its own annotations", func() error {
		_, err := n.agentCS.CoreV1().Nodes().Patch(ctx, n.name, types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"hnsplan.io/probe":"x"}}}`), metav1.PatchOptions{})
		return err
	})

	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	n.base = n.own(ex.plans["win-1"])
	n.hns = hnsmem.New(hnsmem.ManagementAddress(mgmt(t, n.base)))
	if err := statedir.Prepare(n.stateDir); err != nil {
		t.Fatal(err)
	}
	return n
}

// own is p made this node's, with maxUnavailable 50 (other packages'
// tests may hold slots of hnsplan-system meanwhile; these tests are not
// about pacing), and its digest.
func (n *policyNode) own(p *plan.NodePlan) *plan.NodePlan {
	q := *p
	q.Node, q.Rollout = n.name, &plan.Rollout{MaxUnavailable: "50"}
	if _, err := plan.Encode(&q); err != nil { // sets the digest
		n.t.Fatal(err)
	}
	return &q
}

// withVNI is the node's plan with the cluster's VNI changed.
func (n *policyNode) withVNI(vni uint32) *plan.NodePlan { return n.own(withVNI(n.base, vni)) }

// agent is the node's agent, with its plans from src and slots of
// slotDuration; it blocks a drain at once.
func (n *policyNode) agent(src planwatch.Source, slotDuration time.Duration) (*applier.Agent, *kube.Client) {
	kc := kube.New(n.agentCS, nil, n.name, kube.WithoutBlockAffinities())
	a, err := applier.NewAgent(applier.Config{Node: n.name, HNS: n.hns, Plans: src, PlansFrom: "test", StateDir: n.stateDir,
		HostRoutes: replace.NewMemRoutes(), Listen: "127.0.0.1:0", Kube: kc, Leases: n.agentCS.CoordinationV1(),
		RolloutNamespace: slotNamespace, SlotDuration: slotDuration, SlotPoll: 200 * time.Millisecond,
		DrainTimeout: time.Millisecond, Resync: time.Minute,
		Log: slog.New(slog.NewTextHandler(n.logs, nil)).With("agent", n.name)})
	if err != nil {
		n.t.Fatal(err)
	}
	return a, kc
}

// publish writes p's ConfigMap as `hnsplan publish` does: what rollout
// status reads as the node's published plan.
func (n *policyNode) publish(p *plan.NodePlan) {
	t, cs := n.t, n.cs.CoreV1().ConfigMaps(slotNamespace)
	t.Helper()
	b, err := plan.Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleet.ConfigMapName(n.name), Namespace: slotNamespace,
		Labels:      map[string]string{fleet.LabelManagedBy: "hnsplan", fleet.LabelNode: n.name},
		Annotations: map[string]string{fleet.AnnotationDigest: p.Digest}},
		Data: map[string]string{planwatch.ConfigMapKey: string(b)}}
	if _, err := cs.Update(n.ctx, cm, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
		if _, err := cs.Create(n.ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Delete(context.Background(), cm.Name, metav1.DeleteOptions{}) })
	} else if err != nil {
		t.Fatal(err)
	}
}

// blockingPod puts a pod on the node that cannot leave (its budget allows
// no disruption), and its endpoint in HNS.
func (n *policyNode) blockingPod() {
	t, cs := n.t, n.cs
	t.Helper()
	block := n.base.Network.Ipams[0].Subnets[0].IpAddressPrefix
	ip := block.Addr().Next().Next().Next()
	n.endpoint = "web_" + n.base.Network.Name
	if err := n.hns.AddPodEndpoint(n.base.Network.Name, n.endpoint, netip.PrefixFrom(ip, block.Bits()), "", nil); err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods(n.podNS).Create(n.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: n.name, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip.String(), PodIPs: []corev1.PodIP{{IP: ip.String()}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if _, err := cs.CoreV1().Pods(n.podNS).UpdateStatus(n.ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	budget(t, n.ctx, cs, n.podNS, "web", 0)
}

// podLeaves ends what blockingPod made: the budget, the pod, its endpoint.
func (n *policyNode) podLeaves() {
	t, cs := n.t, n.cs
	t.Helper()
	if err := cs.PolicyV1().PodDisruptionBudgets(n.podNS).Delete(n.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(n.podNS).Delete(n.ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if err := n.hns.RemoveEndpoint(n.endpoint); err != nil {
		t.Fatal(err)
	}
}

// request is what hnsplan-agent replace --abort/--retry DIGEST writes.
func (n *policyNode) request(file string, p *plan.NodePlan) {
	n.t.Helper()
	if err := statedir.WriteRequest(n.stateDir, file, p.Digest); err != nil {
		n.t.Fatal(err)
	}
}

// row is the node's row of rollout status, whether the rollout is halted
// (what `hnsplan rollout status` exits 4 on), and status as text.
func (n *policyNode) row() (fleet.NodeRollout, bool, string) {
	n.t.Helper()
	r, ok, halted, out := n.rowOf(n.name)
	if !ok {
		n.t.Fatalf("rollout status has no row for %s:\n%s", n.name, out)
	}
	return r, halted, out
}

// rowOf is node's row of rollout status (ok false: none), whether the
// rollout is halted, and status as text.
func (n *policyNode) rowOf(node string) (r fleet.NodeRollout, ok, halted bool, text string) {
	t := n.t
	t.Helper()
	st, err := fleet.Gather(n.ctx, n.statusCS, slotNamespace)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := st.Write(&out, "text"); err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Nodes {
		if r.Node == node {
			return r, true, st.Halted(), out.String()
		}
	}
	return fleet.NodeRollout{}, false, st.Halted(), out.String()
}

// wantHalted fails unless status shows the node halting the rollout with
// a stall of kind, its text saying it.
func (n *policyNode) wantHalted(when, kind, says string) {
	n.t.Helper()
	r, halted, out := n.row()
	if !halted || r.Phase != fleet.PhaseHalted || r.Stall == nil || r.Stall.Kind != kind || !strings.Contains(out, "rollout halted by "+n.name+": "+says) {
		n.t.Fatalf("%s: rollout status: halted %v, row %+v; want this node halted (%s), saying %q:\n%s", when, halted, r, kind, says, out)
	}
}

func (n *policyNode) wantNotHalted(when string, phase string) {
	n.t.Helper()
	if r, _, out := n.row(); r.Phase != phase || r.Stall != nil {
		n.t.Fatalf("%s: rollout status: row %+v; want phase %s, no stall:\n%s", when, r, phase, out)
	}
}

// slot is the slot the node holds, "" for none.
func (n *policyNode) slot() string {
	n.t.Helper()
	slots, err := rollout.Status(n.ctx, n.cs.CoordinationV1(), slotNamespace)
	if err != nil {
		n.t.Fatal(err)
	}
	held := ""
	for _, s := range slots {
		if s.Holder == n.name {
			held += s.Name
		}
	}
	return held
}

// cordoned says whether the node is cordoned by its agent, and let go of.
func (n *policyNode) cordoned() (cordoned, letGo bool) {
	n.t.Helper()
	node, err := n.cs.CoreV1().Nodes().Get(n.ctx, n.name, metav1.GetOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	_, letGo = node.Annotations[kube.AnnotationLetGo]
	return node.Spec.Unschedulable && node.Annotations[kube.AnnotationCordoned] == "true", letGo
}

func (n *policyNode) wantReplacing(when string) {
	n.t.Helper()
	c, _ := n.cordoned()
	if s := n.slot(); s == "" || !c {
		n.t.Fatalf("%s: slot %q, cordoned %v; want a slot held, cordoned", when, s, c)
	}
}

func (n *policyNode) wantGivenUp(when string) {
	n.t.Helper()
	c, _ := n.cordoned()
	if s := n.slot(); s != "" || c {
		n.t.Fatalf("%s: slot %q, cordoned %v; want no slot, uncordoned", when, s, c)
	}
}

// resume is `hnsplan rollout resume NODE`; what it says must contain each
// of want.
func (n *policyNode) resume(want ...string) {
	n.t.Helper()
	var out bytes.Buffer
	err := fleet.Resume(n.ctx, n.cs, fleet.ResumeOptions{Namespace: slotNamespace, Nodes: []string{n.name}, Out: &out, ErrOut: &out})
	for _, w := range want {
		if err != nil || !strings.Contains(out.String(), w) {
			n.t.Fatalf("rollout resume %s: %v; want it to say %q:\n%s", n.name, err, w, out.String())
		}
	}
}

// TestAbortThenNewPlan is the fault probe's "replace --abort hits the next
// plan" on the real kube-apiserver with deploy/ applied (policyNode),
// the agent driven pass by pass so that the order of the operator's
// request and the new plan is the test's:
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := newPolicyNode(t, ctx, "win-abort")
	planA, planB := n.withVNI(5000), n.withVNI(6000)
	a, kc := n.agent(chanSource(nil), 10*time.Second)
	runCtx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	kc.Start(runCtx)
	if !kc.WaitForSync(ctx) {
		t.Fatal("the agent's caches did not sync")
	}
	// pass runs the agent's passes (as its loop would, back to back) until
	// it reports want, for at most 20 s.
	pass := func(want kube.NodeState) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; {
			if a.Pass(ctx, 0) == applier.Requeue {
				continue
			}
			st := a.Status()
			if st.State == want {
				waitState(t, ctx, n.cs, n.name, "", want) // as the Node says it
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("state %s (%s), want %s", st.State, st.Error, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// publish publishes p and the agent's plan source takes it.
	publish := func(p *plan.NodePlan) {
		t.Helper()
		n.publish(p)
		a.TakePlan(planwatch.Update{Plan: p, Source: "test"})
	}

	publish(n.base)
	pass(kube.StateConverged)
	n.blockingPod()

	// 1. Plan A: the drain is blocked; the node holds its slot, cordoned,
	// and the rollout is halted.
	publish(planA)
	pass(kube.StateBlocked)
	n.wantReplacing("plan A blocked")
	n.wantHalted("plan A blocked", fleet.StallState, "it holds "+n.slot()+" in state blocked")

	// 2. The operator asks to abort A; B is published before the agent's
	// next pass. The request is ignored, and said; B's replace goes on.
	n.request(statedir.AbortFile, planA)
	publish(planB)
	pass(kube.StateBlocked)
	waitEvent(t, ctx, n.cs, n.name, "ReplaceRequestIgnored", "replace --abort was asked for plan \""+planA.Digest+"\", but the plan in force is "+planB.Digest)
	n.wantReplacing("an abort of A with B in force")
	n.wantHalted("an abort of A with B in force", fleet.StallState, "it holds "+n.slot()+" in state blocked")

	// 3. An abort naming B is taken: uncordoned (node policy), the slot
	// released (lease policy), replace-pending; no longer halted.
	n.request(statedir.AbortFile, planB)
	pass(kube.StateReplacePending)
	waitEvent(t, ctx, n.cs, n.name, "ReplaceAborted", "the node is uncordoned")
	n.wantGivenUp("B aborted")
	n.wantNotHalted("B aborted", fleet.PhasePending)

	// 4. replace --retry B: the slot and the drain again, blocked.
	n.request(statedir.RetryFile, planB)
	pass(kube.StateBlocked)
	n.wantReplacing("B retried")
	n.wantHalted("B retried", fleet.StallState, "it holds "+n.slot()+" in state blocked")

	// 5. rollout resume frees the slot and lets go of the node: the
	// agent halts B's replace until --retry, and status does not count
	// it halted.
	n.resume("node "+n.name+": freed ", "let go of its cordon")
	pass(kube.StateRolloutHalted)
	if s := n.slot(); s != "" {
		t.Fatalf("after resume: the agent holds %s again; want no slot until --retry", s)
	}
	n.wantNotHalted("after resume", fleet.PhasePending)

	// 6. The pod left: replace --retry B finishes B's replace.
	n.podLeaves()
	n.request(statedir.RetryFile, planB)
	pass(kube.StateConverged)
	waitState(t, ctx, n.cs, n.name, planB.Digest, kube.StateConverged)
	n.wantGivenUp("B converged")
	n.wantNotHalted("B converged", fleet.PhaseConverged)
	snap, err := n.hns.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if net := snap.Network(n.base.Network.Name); net == nil || net.Subnets[0].VNI != 6000 {
		t.Errorf("network %+v; want plan B's VNI 6000", net)
	}
}

// TestDeadSlotHolderWithPolicies: with deploy/ applied (policyNode), an
// agent whose drain is blocked (halted, state blocked) dies holding its
// slot, cordoned: once the slot is unrenewed past twice its duration,
// rollout status shows it abandoned (halted: exit 4); rollout resume frees
// the slot and lets go of the node, which is then no longer halted; the
// agent started again does not take a slot for that plan by itself
// (rollout-halted) until replace --retry.
//
//	go test -tags integration -run DeadSlotHolderWithPolicies ./applier/
func TestDeadSlotHolderWithPolicies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := newPolicyNode(t, ctx, "win-dead")
	moved := n.withVNI(5000)
	run := func(p *plan.NodePlan) (stop func()) {
		src := make(chanSource)
		a, _ := n.agent(src, 3*time.Second)
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := a.Run(runCtx); err != nil {
				t.Errorf("agent: %v", err)
			}
		}()
		stop = func() { cancel(); <-done }
		t.Cleanup(stop)
		src <- p
		return stop
	}
	n.publish(n.base)
	stop := run(n.base)
	waitState(t, ctx, n.cs, n.name, n.base.Digest, kube.StateConverged)
	stop()
	n.blockingPod()
	n.publish(moved)
	stop = run(moved)
	waitState(t, ctx, n.cs, n.name, "", kube.StateBlocked)
	n.wantReplacing("blocked")
	slot := n.slot()
	n.wantHalted("blocked", fleet.StallState, "it holds "+slot+" in state blocked")

	// The agent dies; its slot is left unrenewed.
	stop()
	deadline := time.Now().Add(20 * time.Second)
	for r, _, _ := n.row(); r.Stall == nil || r.Stall.Kind != fleet.StallAbandoned; r, _, _ = n.row() {
		if time.Now().After(deadline) {
			t.Fatalf("the dead agent's slot is not shown abandoned: state %s, slot %s, stall %+v", r.State, r.Slot, r.Stall)
		}
		time.Sleep(200 * time.Millisecond)
	}
	n.wantHalted("agent dead", fleet.StallAbandoned, slot+" is last renewed")
	n.wantReplacing("agent dead") // its slot and cordon stay as it left them

	n.resume("node "+n.name+": freed "+slot+", which its agent had stopped renewing (was blocked)", "let go of its cordon")
	if c, letGo := n.cordoned(); n.slot() != "" || !c || !letGo {
		t.Fatalf("after resume: slot %q, cordoned %v, let go %v; want no slot, still cordoned, let go of", n.slot(), c, letGo)
	}
	n.wantNotHalted("after resume", fleet.PhasePending)

	// The agent started again waits for the operator: no slot, no halt.
	run(moved)
	waitState(t, ctx, n.cs, n.name, "", kube.StateRolloutHalted)
	if s := n.slot(); s != "" {
		t.Fatalf("the agent started again took %s; want no slot until replace --retry", s)
	}
	n.wantNotHalted("agent started again", fleet.PhasePending)
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

// TestForeignLeaseWithPolicies is the fault probe's hand-made Lease, with
// deploy/ applied (policyNode): the agent's own identity cannot make one
// (a holder that is not its node, or a duration over 300 s, is refused
// by the lease policy), but an admin can; rollout status, read as
// deploy/'s hnsplan-rollout-status, shows the rollout halted by its
// holder (foreign-holder: the exit 4 of `hnsplan rollout status`);
// rollout resume deletes it, saying why, and the halt is gone.
//
//	go test -tags integration -run ForeignLeaseWithPolicies ./applier/
func TestForeignLeaseWithPolicies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := newPolicyNode(t, ctx, "win-fl")
	intruder, name := kubetest.UniqueName("intruder"), kubetest.UniqueName(strings.TrimSuffix(rollout.NamePrefix, "-"))
	lease := func(holder string, secs int32) *coordinationv1.Lease {
		now := metav1.NewMicroTime(time.Now())
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{rollout.SlotLabel: "900"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now}}
	}
	leases := func(cs kubernetes.Interface) interface {
		Create(context.Context, *coordinationv1.Lease, metav1.CreateOptions) (*coordinationv1.Lease, error)
	} {
		return cs.CoordinationV1().Leases(slotNamespace)
	}
	t.Cleanup(func() {
		_ = n.cs.CoordinationV1().Leases(slotNamespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	// The node's own token cannot squat: not for another holder, not for
	// itself for an hour.
	for _, l := range []*coordinationv1.Lease{lease(intruder, 60), lease(n.name, 3600)} {
		if _, err := leases(n.agentCS).Create(ctx, l, metav1.CreateOptions{}); err == nil || !(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) {
			t.Fatalf("the agent of %s made a slot held by %s for %ds: %v; want the lease policy to refuse it", n.name, *l.Spec.HolderIdentity, *l.Spec.LeaseDurationSeconds, err)
		}
	}

	// A Lease made by hand (an admin): held by no node, for an hour.
	if _, err := leases(n.cs).Create(ctx, lease(intruder, 3600), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r, ok, halted, out := n.rowOf(intruder)
	if !ok || !halted || r.Phase != fleet.PhaseHalted || r.Stall == nil || r.Stall.Kind != fleet.StallForeignHolder ||
		!strings.Contains(out, "rollout halted by "+intruder+": "+name+` is held by "`+intruder+`", and no Node of that name exists`) {
		t.Fatalf("rollout status with a hand-made Lease: row %+v (found %v), halted %v; want %s halting it (foreign-holder):\n%s", r, ok, halted, intruder, out)
	}

	var said bytes.Buffer
	err := fleet.Resume(ctx, n.cs, fleet.ResumeOptions{Namespace: slotNamespace, Nodes: []string{intruder}, Out: &said, ErrOut: &said})
	if err != nil || !strings.Contains(said.String(), "node "+intruder+": freed "+name+", held by a name that is no Windows node") {
		t.Fatalf("rollout resume %s: %v:\n%s", intruder, err, said.String())
	}
	if _, err := n.cs.CoordinationV1().Leases(slotNamespace).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after resume the Lease %s is still there: %v", name, err)
	}
	if r, ok, _, out := n.rowOf(intruder); ok && r.Stall != nil {
		t.Fatalf("after resume: %s still halts the rollout (%+v):\n%s", intruder, r.Stall, out)
	}
}
