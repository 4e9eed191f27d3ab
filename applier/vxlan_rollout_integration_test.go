//go:build integration

package applier_test

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// TestRolloutVXLANAllAtOnce runs five agents against a real kube-apiserver,
// each over its own in-memory HNS with a pod and a PodDisruptionBudget
// that allows its eviction. A VNI change under rollout.vxlanChange
// all-at-once (maxUnavailable 1) takes a slot on every node at once: all
// five are cordoned together, and Windows nodes sit on different VNIs
// only as long as their recreates are apart. The next VNI change, at
// maxUnavailable 1 without the setting, goes node by node. Each phase's
// split (first old network deleted to last new one created) and rollout
// (plans published to every node converged) are logged: the measurement
// against a real API server beside make bench's BenchmarkVXLANChangeWindow.
func TestRolloutVXLANAllAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newRolloutRig(t, ctx, "win-v")
	cs, ns, base, block, tl, nodes := r.cs, r.ns, r.base, r.block, r.tl, r.nodes
	w := &window{}
	var vni atomic.Uint32
	r.start(20*time.Second, func(n *rolloutNode) hns.Client { return &windowHNS{HNS: n.hns, vni: vni.Load, w: w} })
	send := func(p *plan.NodePlan) {
		for _, n := range nodes {
			q := *p
			q.Node = n.name
			n.src <- &q
		}
	}
	all := &plan.Rollout{MaxUnavailable: "1", VXLANChange: plan.VXLANAllAtOnce}
	first := clonePlan(base, "sha256:first", "1")
	first.Rollout = all
	send(first)
	for _, n := range nodes {
		waitState(t, ctx, cs, n.name, first.Digest, kube.StateConverged)
	}
	// A pod on each node, its endpoint in the node's HNS, a budget that
	// lets it go; the kubelet and the CNI delete evicted pods at once.
	pods := func() {
		for _, n := range nodes {
			ip := netip.PrefixFrom(block.Addr().Next().Next().Next(), block.Bits())
			if err := n.hns.AddPodEndpoint(base.Network.Name, n.endpoint, ip, "", nil); err != nil {
				t.Fatal(err)
			}
			for ctx.Err() == nil { // the previous pod of the name may still be going
				pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n.pod, Labels: map[string]string{"app": n.pod}},
					Spec: corev1.PodSpec{NodeName: n.name, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
				if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
	}
	// An eviction spends the budget's one disruption (the API server
	// records it in the status; no disruption controller runs here to
	// give it back): each phase gets a fresh budget.
	budgets := func() {
		for _, n := range nodes {
			err := cs.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, n.pod, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			budget(t, ctx, cs, ns, n.pod, 1)
		}
	}
	pods()
	budgets()
	r.kubelet()

	// phase rolls p out and returns its rollout and split.
	phase := func(p *plan.NodePlan, v uint32) (rolloutTime, split time.Duration) {
		w.reset()
		vni.Store(v)
		tl.resetPeak()
		published := time.Now()
		send(p)
		for _, n := range nodes {
			waitState(t, ctx, cs, n.name, p.Digest, kube.StateConverged)
		}
		done := time.Now()
		for _, n := range nodes {
			snap, err := n.hns.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if net := snap.Network(base.Network.Name); net == nil || net.Subnets[0].VNI != v {
				t.Errorf("node %s: network %+v, want VNI %d", n.name, net, v)
			}
		}
		if held := slotsOf(t, ctx, cs, ns); len(held) != 0 {
			t.Errorf("slots still held after the rollout: %v", held)
		}
		return done.Sub(published), w.span()
	}

	moved := withVNI(first, 5000)
	moved.Rollout = all
	allRollout, allSplit := phase(moved, 5000)
	if peak := tl.peak(); peak != len(nodes) {
		t.Errorf("all-at-once: at most %d nodes cordoned at once, want all %d", peak, len(nodes))
	}
	tl.note("test: all-at-once done; pods back, then VNI 6000 at maxUnavailable 1")
	pods()
	budgets()
	rolled := withVNI(first, 6000)
	rolled.Digest, rolled.Rollout = "sha256:rolled", &plan.Rollout{MaxUnavailable: "1"}
	rollRollout, rollSplit := phase(rolled, 6000)
	if peak := tl.peak(); peak != 1 {
		t.Errorf("maxUnavailable 1: at most %d nodes cordoned at once, want 1", peak)
	}
	t.Logf("5 nodes, a pod each, drain poll 2 s, slot poll 200 ms:\n  all-at-once: rollout %s, split %s\n  maxUnavailable 1: rollout %s, split %s\n%s",
		allRollout.Round(time.Millisecond), allSplit.Round(time.Millisecond), rollRollout.Round(time.Millisecond), rollSplit.Round(time.Millisecond), tl.String())
}
