package applier_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/applier/rollout"
	"github.com/hnsplan/hnsplan/applier/statedir"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// slotKube is fakeKube with the cluster's nodes and a cordon that shows.
type slotKube struct {
	*fakeKube
	nodes    []kube.Node
	cordoned bool
	cordons  int
}

func (k *slotKube) Nodes() []kube.Node { return k.nodes }
func (k *slotKube) Cordon(context.Context) error {
	k.cordoned = true
	k.cordons++
	return nil
}
func (k *slotKube) Uncordon(context.Context) error { k.cordoned = false; return nil }

func windowsNode(name string, labels ...string) kube.Node {
	l := map[string]string{applier.WindowsLabel: "windows"}
	for i := 0; i+1 < len(labels); i += 2 {
		l[labels[i]] = labels[i+1]
	}
	return kube.Node{Name: name, Labels: l, Annotations: map[string]string{}}
}

const slotNS = "hnsplan-system"

func holderOf(t *testing.T, cs *fake.Clientset, name string) string {
	t.Helper()
	l, err := cs.CoordinationV1().Leases(slotNS).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return *l.Spec.HolderIdentity
}

func heldLease(name, holder string) *coordinationv1.Lease {
	secs := int32(60)
	now := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: slotNS, Labels: map[string]string{rollout.SlotLabel: "0"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now}}
}

// TestReplaceTakesARolloutSlot: with the slots of a cluster, a network
// replace waits (rollout-waiting, not cordoned) while none is free, takes
// one before it cordons and releases it once done; a replace that ends
// blocked keeps it; a slot freed by the operator (rollout resume) halts
// the node's replace for that plan (rollout-halted) until --retry; --abort
// uncordons, drops the journal, releases the slot and leaves the node
// replace-pending until --retry.
func TestReplaceTakesARolloutSlot(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	h := hnsmem.New(hnsmem.ManagementAddress(mgmt(t, p)))
	cs := fake.NewClientset()
	k := &slotKube{fakeKube: &fakeKube{synced: true, node: kube.Node{Name: "win-1"}},
		nodes: []kube.Node{windowsNode("win-1"), windowsNode("win-2")}}
	cfg := agentConfig(t, h, chanSource(nil))
	cfg.Kube, cfg.Leases, cfg.DrainTimeout = k, cs.CoordinationV1(), time.Millisecond
	a, err := applier.NewAgent(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pass := func(want kube.NodeState) applier.Next {
		t.Helper()
		next := a.Pass(ctx, 0)
		for next == applier.Requeue {
			next = a.Pass(ctx, 0)
		}
		if st := a.Status(); st.State != want {
			t.Fatalf("state %s (%s), want %s", st.State, st.Error, want)
		}
		return next
	}
	request := func(file string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(cfg.StateDir, file), []byte(a.Status().Plan+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	journal := func() *replace.Journal {
		t.Helper()
		j, err := replace.LoadJournal(filepath.Join(cfg.StateDir, statedir.JournalFile))
		if err != nil {
			t.Fatal(err)
		}
		return j
	}

	a.TakePlan(planwatch.Update{Plan: p, Source: "test"})
	pass(kube.StateConverged)

	// The one slot (1 of 2 Windows nodes) is win-2's.
	if _, err := cs.CoordinationV1().Leases(slotNS).Create(ctx, heldLease(rollout.NamePrefix+"0", "win-2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	moved := withVNI(p, 5000)
	a.TakePlan(planwatch.Update{Plan: moved, Source: "test"})
	if next := pass(kube.StateRolloutWaiting); next != applier.Poll {
		t.Errorf("waiting for a slot: next %s, want poll", next)
	}
	if st := a.Status(); k.cordons != 0 || !strings.Contains(st.Error, "win-2") || journal() != nil {
		t.Fatalf("waiting for a slot: %d cordons, error %q, journal %+v; want none, naming win-2's slot", k.cordons, st.Error, journal())
	}

	// win-2 releases it: win-1 takes it, replaces, gives it back.
	if err := cs.CoordinationV1().Leases(slotNS).Delete(ctx, rollout.NamePrefix+"0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pass(kube.StateConverged)
	if k.cordons != 1 || k.cordoned || holderOf(t, cs, rollout.NamePrefix+"0") != "" {
		t.Fatalf("after the replace: %d cordons, cordoned %v, slot held by %q; want one cordon lifted, the slot released", k.cordons, k.cordoned, holderOf(t, cs, rollout.NamePrefix+"0"))
	}
	var took bool
	for _, act := range cs.Actions() {
		if c, ok := act.(k8stesting.CreateAction); ok && act.GetResource().Resource == "leases" {
			if l, ok := c.GetObject().(*coordinationv1.Lease); ok && *l.Spec.HolderIdentity == "win-1" {
				took = true
			}
		}
	}
	if !took {
		t.Error("win-1 never created a slot Lease of its own")
	}

	// Back to the first VNI, with pods that do not leave: blocked, and the
	// slot stays held (the rollout halts).
	cni(t, h, moved, ex.cluster)
	a.TakePlan(planwatch.Update{Plan: p, Source: "test"})
	if next := pass(kube.StateBlocked); next != applier.Backoff {
		t.Errorf("blocked: next %s, want backoff", next)
	}
	if holderOf(t, cs, rollout.NamePrefix+"0") != "win-1" || !k.cordoned {
		t.Fatalf("blocked: slot held by %q, cordoned %v; want win-1's, cordoned", holderOf(t, cs, rollout.NamePrefix+"0"), k.cordoned)
	}

	// The operator frees the slot (hnsplan rollout resume): halted for
	// this plan, no slot taken again.
	if freed, err := rollout.Free(ctx, cs.CoordinationV1(), slotNS, "win-1"); err != nil || len(freed) != 1 {
		t.Fatalf("Free: %v, %v", freed, err)
	}
	for range 2 {
		if next := pass(kube.StateRolloutHalted); next != applier.Poll {
			t.Errorf("halted: next %s, want poll", next)
		}
	}
	if h := holderOf(t, cs, rollout.NamePrefix+"0"); h != "" {
		t.Fatalf("halted: slot held by %q; want nobody", h)
	}

	// --retry: the slot again, and the drain again.
	request(statedir.RetryFile)
	pass(kube.StateBlocked)
	if holderOf(t, cs, rollout.NamePrefix+"0") != "win-1" {
		t.Fatal("after --retry: win-1 holds no slot")
	}

	// --abort: uncordoned, no journal, no slot, replace-pending until
	// --retry.
	request(statedir.AbortFile)
	for range 2 {
		if next := pass(kube.StateReplacePending); next != applier.Poll {
			t.Errorf("aborted: next %s, want poll", next)
		}
		if k.cordoned || journal() != nil || holderOf(t, cs, rollout.NamePrefix+"0") != "" {
			t.Fatalf("aborted: cordoned %v, journal %+v, slot held by %q; want none of them", k.cordoned, journal(), holderOf(t, cs, rollout.NamePrefix+"0"))
		}
	}
	request(statedir.RetryFile)
	pass(kube.StateBlocked)
	if j := journal(); j == nil || j.Step != replace.StepWaitDrained || holderOf(t, cs, rollout.NamePrefix+"0") != "win-1" {
		t.Fatalf("after --retry: journal %+v, slot held by %q; want wait-drained, win-1's", j, holderOf(t, cs, rollout.NamePrefix+"0"))
	}
}

// TestRolloutOrder: with rollout.order, a node of a later group waits
// while a node of an earlier one is in the rollout; a node without the
// label goes last.
func TestRolloutOrder(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	const zone = "topology.kubernetes.io/zone"
	for _, tc := range []struct {
		name  string
		me    []string // win-1's labels
		other kube.Node
		wait  bool
	}{
		{"earlier group replacing", []string{zone, "b"}, withState(windowsNode("win-2", zone, "a"), kube.StateReplacing), true},
		{"earlier group blocked", []string{zone, "b"}, withState(windowsNode("win-2", zone, "a"), kube.StateBlocked), true},
		{"earlier group done", []string{zone, "b"}, withState(windowsNode("win-2", zone, "a"), kube.StateConverged), false},
		{"later group replacing", []string{zone, "a"}, withState(windowsNode("win-2", zone, "b"), kube.StateReplacing), false},
		{"unlabelled goes last", nil, withState(windowsNode("win-2", zone, "z"), kube.StateRolloutWaiting), true},
		{"unlabelled other", []string{zone, "a"}, withState(windowsNode("win-2"), kube.StateReplacing), false},
		{"a Linux node is not in the rollout", []string{zone, "b"}, withState(kube.Node{Name: "lin", Labels: map[string]string{zone: "a"}}, kube.StateError), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hnsmem.New(hnsmem.ManagementAddress(mgmt(t, p)))
			cs := fake.NewClientset()
			k := &slotKube{fakeKube: &fakeKube{synced: true, node: kube.Node{Name: "win-1"}},
				nodes: []kube.Node{windowsNode("win-1", tc.me...), tc.other}}
			cfg := agentConfig(t, h, chanSource(nil))
			cfg.Kube, cfg.Leases = k, cs.CoordinationV1()
			a, err := applier.NewAgent(cfg)
			if err != nil {
				t.Fatal(err)
			}
			a.TakePlan(planwatch.Update{Plan: p, Source: "test"})
			for a.Pass(ctx, 0) == applier.Requeue {
			}
			moved := withVNI(p, 5000)
			moved.Rollout = &plan.Rollout{MaxUnavailable: "2", Order: zone}
			a.TakePlan(planwatch.Update{Plan: moved, Source: "test"})
			for a.Pass(ctx, 0) == applier.Requeue {
			}
			st := a.Status()
			if got := st.State == kube.StateRolloutWaiting; got != tc.wait {
				t.Fatalf("state %s (%s); want waiting %v", st.State, st.Error, tc.wait)
			}
			if tc.wait && (k.cordons != 0 || !strings.Contains(st.Error, "rollout.order")) {
				t.Errorf("waiting: %d cordons, error %q; want none, naming rollout.order", k.cordons, st.Error)
			}
		})
	}
}

func withState(n kube.Node, s kube.NodeState) kube.Node {
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[kube.AnnotationState] = string(s)
	return n
}

// TestRolloutAllAtOnce: with rollout.vxlanChange all-at-once, a replace
// whose only cause is the VXLAN identity takes a slot whatever the other
// Windows nodes hold (up to one each) and waits for no earlier order
// group; one with another cause too (a renamed network), or without the
// setting, keeps maxUnavailable.
func TestRolloutAllAtOnce(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	const zone = "topology.kubernetes.io/zone"
	all := &plan.Rollout{MaxUnavailable: "1", VXLANChange: plan.VXLANAllAtOnce}
	renamed := func(q *plan.NodePlan) *plan.NodePlan { q.Network.Name = "Calico2"; return q }
	for _, tc := range []struct {
		name    string
		rollout *plan.Rollout
		change  func(*plan.NodePlan) *plan.NodePlan
		held    []string // the other nodes holding a slot
		others  []kube.Node
		wait    bool
		slot    string
	}{
		{"rolling waits for the slot", &plan.Rollout{MaxUnavailable: "1"}, nil, []string{"win-2"}, nil, true, ""},
		{"all at once takes a slot beside three", all, nil, []string{"win-2", "win-3", "win-4"}, nil, false, rollout.NamePrefix + "3"},
		{"all at once ignores the order", &plan.Rollout{MaxUnavailable: "1", Order: zone, VXLANChange: plan.VXLANAllAtOnce}, nil, nil,
			[]kube.Node{withState(windowsNode("win-2", zone, "a"), kube.StateReplacing)}, false, rollout.NamePrefix + "0"},
		{"another cause keeps maxUnavailable", all, renamed, []string{"win-2"}, nil, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hnsmem.New(hnsmem.ManagementAddress(mgmt(t, p)))
			cs := fake.NewClientset()
			nodes := []kube.Node{windowsNode("win-1", zone, "b")}
			for _, n := range []string{"win-2", "win-3", "win-4"} {
				if !slices.ContainsFunc(tc.others, func(o kube.Node) bool { return o.Name == n }) {
					nodes = append(nodes, windowsNode(n))
				}
			}
			nodes = append(nodes, tc.others...)
			k := &slotKube{fakeKube: &fakeKube{synced: true, node: kube.Node{Name: "win-1"}}, nodes: nodes}
			for i, holder := range tc.held {
				l := heldLease(rollout.NamePrefix+strconv.Itoa(i), holder)
				if _, err := cs.CoordinationV1().Leases(slotNS).Create(ctx, l, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			cfg := agentConfig(t, h, chanSource(nil))
			cfg.Kube, cfg.Leases, cfg.DrainTimeout = k, cs.CoordinationV1(), time.Millisecond
			a, err := applier.NewAgent(cfg)
			if err != nil {
				t.Fatal(err)
			}
			a.TakePlan(planwatch.Update{Plan: p, Source: "test"})
			for a.Pass(ctx, 0) == applier.Requeue {
			}
			moved := withVNI(p, 5000)
			if tc.change != nil {
				moved = tc.change(moved)
			}
			moved.Rollout = tc.rollout
			a.TakePlan(planwatch.Update{Plan: moved, Source: "test"})
			var took string
			cs.PrependReactor("create", "leases", func(act k8stesting.Action) (bool, runtime.Object, error) {
				if l, ok := act.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease); ok && *l.Spec.HolderIdentity == "win-1" {
					took = l.Name
				}
				return false, nil, nil
			})
			for a.Pass(ctx, 0) == applier.Requeue {
			}
			st := a.Status()
			if tc.wait {
				if st.State != kube.StateRolloutWaiting || k.cordons != 0 || took != "" {
					t.Fatalf("state %s (%s), %d cordons, took %q; want rollout-waiting, not cordoned, no slot", st.State, st.Error, k.cordons, took)
				}
				return
			}
			if st.State != kube.StateConverged || k.cordons != 1 || took != tc.slot {
				t.Fatalf("state %s (%s), %d cordons, took %q; want converged after one cordon, slot %s", st.State, st.Error, k.cordons, took, tc.slot)
			}
			snap, err := h.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n := snap.Network(p.Network.Name); n == nil || n.Subnets[0].VNI != 5000 {
				t.Errorf("network %+v, want VNI 5000", n)
			}
		})
	}
}

// slotRig is the agent of win-1 (of two Windows nodes) with rollout
// slots on a fake API server, over the calico-vxlan example's plan, its
// drain timeout a millisecond; pass runs passes until one does not
// requeue and checks the state it ends in.
type slotRig struct {
	ex   compiled
	p    *plan.NodePlan
	h    *hnsmem.HNS
	cs   *fake.Clientset
	k    *slotKube
	cfg  applier.Config
	a    *applier.Agent
	pass func(want kube.NodeState)
}

func newSlotRig(t *testing.T) *slotRig {
	r := &slotRig{ex: compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml"), cs: fake.NewClientset()}
	r.p = r.ex.plans["win-1"]
	r.h = hnsmem.New(hnsmem.ManagementAddress(mgmt(t, r.p)))
	r.k = &slotKube{fakeKube: &fakeKube{synced: true, node: kube.Node{Name: "win-1"}},
		nodes: []kube.Node{windowsNode("win-1"), windowsNode("win-2")}}
	r.cfg = agentConfig(t, r.h, chanSource(nil))
	r.cfg.Kube, r.cfg.Leases, r.cfg.DrainTimeout = r.k, r.cs.CoordinationV1(), time.Millisecond
	a, err := applier.NewAgent(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.a = a
	r.pass = func(want kube.NodeState) {
		t.Helper()
		for next := a.Pass(ctx, 0); next == applier.Requeue; next = a.Pass(ctx, 0) {
		}
		if st := a.Status(); st.State != want {
			t.Fatalf("state %s (%s), want %s", st.State, st.Error, want)
		}
	}
	return r
}

// TestAbortNamesItsPlan: replace --abort and --retry name the plan they
// are about; a request for another plan (one published after the operator
// asked) is dropped with a ReplaceRequestIgnored Event and the plan in
// force goes on. Before, an abort asked for one plan was applied to the
// next, which then stayed replace-pending until --retry.
func TestAbortNamesItsPlan(t *testing.T) {
	r := newSlotRig(t)
	ex, p, h, cs, k, cfg, a, pass := r.ex, r.p, r.h, r.cs, r.k, r.cfg, r.a, r.pass
	request := func(file, digest string) {
		t.Helper()
		if err := statedir.WriteRequest(cfg.StateDir, file, digest); err != nil {
			t.Fatal(err)
		}
	}
	ignored := func() int {
		n := 0
		for _, e := range k.events {
			if strings.Contains(e, "ReplaceRequestIgnored") {
				n++
			}
		}
		return n
	}
	a.TakePlan(planwatch.Update{Plan: p, Source: "test"})
	pass(kube.StateConverged)
	cni(t, h, p, ex.cluster) // pods that do not leave: the replace blocks

	first := withVNI(p, 5000)
	first.Digest = "sha256:first"
	a.TakePlan(planwatch.Update{Plan: first, Source: "test"})
	pass(kube.StateBlocked)

	// The operator asks to abort the first plan's replace; a second plan
	// is published before the agent's next pass.
	request(statedir.AbortFile, first.Digest)
	second := withVNI(p, 6000)
	second.Digest = "sha256:second"
	a.TakePlan(planwatch.Update{Plan: second, Source: "test"})
	pass(kube.StateBlocked)
	if ignored() != 1 {
		t.Fatalf("events %q: want one ReplaceRequestIgnored", k.events)
	}
	if _, err := os.Stat(filepath.Join(cfg.StateDir, statedir.AbortFile)); err == nil {
		t.Fatal("the ignored request is still there: it would be read again")
	}
	if holderOf(t, cs, rollout.NamePrefix+"0") != "win-1" || !k.cordoned {
		t.Fatalf("the second plan's replace: slot held by %q, cordoned %v; want win-1's, cordoned", holderOf(t, cs, rollout.NamePrefix+"0"), k.cordoned)
	}

	// A retry naming the first plan is dropped too; one naming the
	// second is taken, and so is an abort naming it.
	request(statedir.RetryFile, first.Digest)
	pass(kube.StateBlocked)
	if ignored() != 2 {
		t.Fatalf("events %q: want a second ReplaceRequestIgnored", k.events)
	}
	request(statedir.AbortFile, second.Digest)
	pass(kube.StateReplacePending)
	if k.cordoned || holderOf(t, cs, rollout.NamePrefix+"0") != "" {
		t.Fatalf("aborted: cordoned %v, slot held by %q; want neither", k.cordoned, holderOf(t, cs, rollout.NamePrefix+"0"))
	}
	request(statedir.RetryFile, second.Digest)
	pass(kube.StateBlocked)
	if ignored() != 2 {
		t.Fatalf("events %q: a request for the plan in force was ignored", k.events)
	}
}

// TestSlotFreedDuringAdmit: an operator frees a blocked node's slot
// (rollout resume) between the agent's look at it and its hold on it:
// the slot is lost and the replace halts (rollout-halted), as if freed
// before. Before, the agent took a new slot of the same name as if it had
// none, and its replace never halted.
func TestSlotFreedDuringAdmit(t *testing.T) {
	r := newSlotRig(t)
	ex, p, h, cs, a, pass := r.ex, r.p, r.h, r.cs, r.a, r.pass
	a.TakePlan(planwatch.Update{Plan: p, Source: "test"})
	pass(kube.StateConverged)
	cni(t, h, p, ex.cluster) // pods that do not leave: the replace blocks
	a.TakePlan(planwatch.Update{Plan: withVNI(p, 5000), Source: "test"})
	pass(kube.StateBlocked)
	if holderOf(t, cs, rollout.NamePrefix+"0") != "win-1" {
		t.Fatal("the blocked node holds no slot")
	}
	// The slot is freed right after the agent's next look at it (its
	// Get), before it lists the slots.
	freed := false
	cs.PrependReactor("list", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if !freed {
			freed = true
			if err := cs.Tracker().Delete(coordinationv1.SchemeGroupVersion.WithResource("leases"), slotNS, rollout.NamePrefix+"0"); err != nil {
				t.Error(err)
			}
		}
		return false, nil, nil
	})
	pass(kube.StateRolloutHalted)
	if !freed {
		t.Fatal("the agent did not list the slots: the race was not run")
	}
	if h := holderOf(t, cs, rollout.NamePrefix+"0"); h != "" {
		t.Fatalf("the freed slot is held again by %q; want it lost", h)
	}
}
