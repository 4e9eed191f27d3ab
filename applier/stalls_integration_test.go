//go:build integration

package applier_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/fleet"
)

// TestRolloutStalledAgents runs five agents on the real kube-apiserver
// (maxUnavailable 1) and stalls the rollout twice, each time visible in
// rollout status (halted, the status the CLI exits 4 on) and ended by
// rollout resume:
//
//   - node 0's drain is blocked by a PodDisruptionBudget past
//     --drain-timeout: its agent stays blocked from the drain's start at
//     every later pass (never replacing again), and status says so;
//
//   - node 0's agent then dies holding its slot, cordoned: once the slot
//     is unrenewed past twice its duration, status shows it abandoned;
//     the slot expires, but no other agent takes a slot while node 0 is
//     cordoned by hnsplan with none (it counts against maxUnavailable,
//     and their wait names it);
//
//   - resume frees the slot and lets go of node 0; the others converge,
//     never two cordoned by hnsplan at once besides node 0.
//
//     go test -tags integration -run RolloutStalledAgents ./applier/
func TestRolloutStalledAgents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newRolloutRig(t, ctx, "win-s")
	cs, ns, base, tl, nodes := r.cs, r.ns, r.base, r.tl, r.nodes
	r.start(2*time.Second, func(n *rolloutNode) hns.Client { return n.hns })
	first := clonePlan(base, "sha256:first", "1")
	r.converge(first)
	r.podsBlockingNode0()
	r.kubelet()
	moved := withVNI(first, 5000)
	send := func(n *rolloutNode) {
		q := *moved
		q.Node = n.name
		n.src <- &q
	}
	status := func() *fleet.Status {
		t.Helper()
		st, err := fleet.Gather(ctx, cs, ns)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	stallOf := func(st *fleet.Status, node string) *fleet.Stall {
		for _, row := range st.Nodes {
			if row.Node == node {
				return row.Stall
			}
		}
		return nil
	}

	// 1. The blocked drain.
	send(nodes[0])
	waitState(t, ctx, cs, nodes[0].name, "", kube.StateBlocked)
	tl.note("test: node 0 (%s) blocked", nodes[0].name)
	for _, n := range nodes[1:] {
		send(n)
	}
	for _, n := range nodes[1:] {
		waitState(t, ctx, cs, n.name, "", kube.StateRolloutWaiting)
	}
	// Later passes (each change of its Node is one) stay blocked: the
	// drain's timeout runs from its start, not from each pass.
	states := watchStates(t, ctx, cs, nodes[0].name)
	for i := range 4 {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"test.hnsplan.io/poke":"%d"}}}`, i)
		if _, err := cs.CoreV1().Nodes().Patch(ctx, nodes[0].name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond)
	}
	if seen := states(); slices.Contains(seen, string(kube.StateReplacing)) {
		t.Errorf("node 0 went back to replacing after its drain was blocked: states %v", seen)
	}
	st := status()
	if s := stallOf(st, nodes[0].name); !st.Halted() || s == nil || s.Kind != fleet.StallState || !strings.Contains(s.Reason, "in state blocked") {
		t.Fatalf("status of the blocked drain: halted %v, stall %+v", st.Halted(), s)
	}

	// 2. Node 0's agent dies, cordoned, holding its slot.
	nodes[0].stop()
	tl.exclude(nodes[0].name, true)
	tl.note("test: node 0's agent stopped")
	deadline := time.Now().Add(30 * time.Second)
	for s := stallOf(status(), nodes[0].name); s == nil || s.Kind != fleet.StallAbandoned; s = stallOf(status(), nodes[0].name) {
		if time.Now().After(deadline) {
			t.Fatalf("node 0's slot not shown abandoned: %+v", s)
		}
		time.Sleep(300 * time.Millisecond)
	}
	// Its slot has expired for the others; none takes one, and their wait
	// names node 0.
	time.Sleep(2 * time.Second)
	for _, n := range nodes[1:] {
		if tl.cordoned(n.name) {
			t.Errorf("node %s cordoned while node 0 is stranded with maxUnavailable 1", n.name)
		}
	}
	if !waitingNames(t, ctx, cs, nodes[1].name, nodes[0].name) {
		t.Errorf("node 1's wait does not name the stranded node 0")
	}

	// 3. The operator lets go of node 0.
	var out bytes.Buffer
	if err := fleet.Resume(ctx, cs, fleet.ResumeOptions{Namespace: ns, Out: &out, ErrOut: &out}); err != nil {
		t.Fatalf("resume: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "node "+nodes[0].name+": freed hnsplan-rollout-0, which its agent had stopped renewing") ||
		!strings.Contains(out.String(), "let go of its cordon") {
		t.Errorf("resume said:\n%s", out.String())
	}
	tl.note("test: rollout resume: %s", strings.TrimSpace(out.String()))
	for _, n := range nodes[1:] {
		waitState(t, ctx, cs, n.name, moved.Digest, kube.StateConverged)
	}
	if st := status(); st.Halted() {
		t.Errorf("still halted after resume: %+v", st.Nodes)
	}
	peak := tl.peak()
	t.Logf("at most %d nodes cordoned by hnsplan at once besides node 0\n%s", peak, tl.String())
	if peak > 1 {
		t.Errorf("%d nodes cordoned by hnsplan at once besides node 0, with maxUnavailable 1", peak)
	}
}

// watchStates follows node's hnsplan.io/state; the returned func gives
// every value seen so far.
func watchStates(t *testing.T, ctx context.Context, cs kubernetes.Interface, node string) func() []string {
	t.Helper()
	w, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + node})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan []string, 1)
	seen <- nil
	go func() {
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok {
				s := <-seen
				seen <- append(s, n.Annotations[kube.AnnotationState])
			}
		}
	}()
	t.Cleanup(w.Stop)
	return func() []string { s := <-seen; seen <- s; return slices.Clone(s) }
}

// waitingNames says whether node's agent said it waits for a slot because
// of stranded, in a RolloutWaiting Event or its last error.
func waitingNames(t *testing.T, ctx context.Context, cs kubernetes.Interface, node, stranded string) bool {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if msg := n.Annotations[kube.AnnotationLastError]; strings.Contains(msg, "cordoned by hnsplan's agent") && strings.Contains(msg, stranded) {
			return true
		}
	}
	n, _ := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	b, _ := json.Marshal(n.Annotations)
	t.Logf("node %s annotations: %s", node, b)
	return false
}
