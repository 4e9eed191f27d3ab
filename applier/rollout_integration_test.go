//go:build integration

package applier_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/applier/rollout"
	"github.com/hnsplan/hnsplan/applier/statedir"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/fleet"
	"github.com/hnsplan/hnsplan/internal/kubetest"
)

// TestRolloutFiveAgents runs five agents in one process against a real
// kube-apiserver, each over its own in-memory HNS, with a pod on each node
// and a PodDisruptionBudget per pod; the test plays the kubelet and the
// CNI. A VNI change goes first to one node whose budget allows no
// eviction: it blocks holding its slot. Then to the other four: with
// maxUnavailable 1 they wait (rollout-waiting, not cordoned) until the
// operator frees the blocked node's slot (rollout.Free, what `hnsplan
// rollout resume` does); then the blocked node, its budget gone, is
// retried (replace --retry). At no instant are more nodes cordoned by
// hnsplan than slots allowed; all five end on the new VNI.
func TestRolloutFiveAgents(t *testing.T) {
	for _, mu := range []string{"1", "2", "40%"} {
		t.Run(strings.TrimSuffix(mu, "%")+map[bool]string{true: "pct", false: ""}[strings.HasSuffix(mu, "%")], func(t *testing.T) { fiveAgents(t, mu) })
	}
}

// rolloutNode is one node of the test: its agent's HNS, state directory
// and pod.
type rolloutNode struct {
	name     string
	hns      *hnsmem.HNS
	stateDir string
	src      chanSource
	pod      string
	endpoint string
	stop     context.CancelFunc // stops this node's agent alone, as if it died
}

// rolloutRig is five agents of one test run against the real API server,
// each over its own in-memory HNS: the namespace their rollout slots and
// pods live in, their Node objects (Windows), the compiled calico-vxlan
// example whose plan they apply, and the timeline of who held which slot
// and who was cordoned. The agents stop, and their log is shown if the
// test failed, at the test's cleanup.
type rolloutRig struct {
	t      *testing.T
	ctx    context.Context
	cs     kubernetes.Interface
	ns     string
	base   *plan.NodePlan
	block  netip.Prefix
	tl     *timeline
	nodes  []*rolloutNode
	runCtx context.Context
	wg     sync.WaitGroup
}

// newRolloutRig makes the namespace, the five nodes (named prefix-<i>)
// and their Node objects, and follows them; start starts the agents.
func newRolloutRig(t *testing.T, ctx context.Context, prefix string) *rolloutRig {
	cfg := kubetest.Config(t)
	r := &rolloutRig{t: t, ctx: ctx, cs: kubetest.Client(t, cfg), ns: kubetest.UniqueName("it-" + prefix)}
	start := time.Now()
	if _, err := r.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.cs.CoreV1().Namespaces().Delete(context.Background(), r.ns, metav1.DeleteOptions{}) })

	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	r.base = ex.plans["win-1"]
	r.block = r.base.Network.Ipams[0].Subnets[0].IpAddressPrefix

	// The timeline: who held which slot, and who was cordoned, when.
	r.tl = &timeline{start: start, cordon: map[string]bool{}, excluded: map[string]bool{}, states: map[string]string{},
		holders: map[string]string{}, windows: map[string]bool{}}
	watchNodes, err := r.cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	watchLeases, err := r.cs.CoordinationV1().Leases(r.ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mine := map[string]bool{}
	for i := range 5 {
		n := &rolloutNode{name: kubetest.UniqueName(fmt.Sprintf("%s%d", prefix, i)), hns: hnsmem.New(hnsmem.ManagementAddress(mgmt(t, r.base))),
			stateDir: filepath.Join(t.TempDir(), "state"), src: make(chanSource), pod: fmt.Sprintf("web-%d", i)}
		n.endpoint = n.pod + "_" + r.base.Network.Name
		mine[n.name] = true
		r.nodes = append(r.nodes, n)
	}
	go r.tl.follow(ctx, watchNodes, watchLeases, mine)
	for _, n := range r.nodes {
		if _, err := r.cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name,
			Labels: map[string]string{applier.WindowsLabel: "windows"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.cs.CoreV1().Nodes().Delete(context.Background(), n.name, metav1.DeleteOptions{}) })
	}
	return r
}

// start runs an agent on each node, its configuration the rig's (slots of
// 3 s polled every 200 ms) with drainTimeout, and hnsOf(n) as its HNS.
func (r *rolloutRig) start(drainTimeout time.Duration, hnsOf func(*rolloutNode) hns.Client) {
	t := r.t
	var logs lockedLog
	runCtx, stop := context.WithCancel(r.ctx)
	r.runCtx = runCtx
	t.Cleanup(func() {
		stop()
		r.wg.Wait()
		if t.Failed() {
			t.Logf("agents' log:\n%s\ntimeline:\n%s", logs.String(), r.tl.String())
		}
	})
	for _, n := range r.nodes {
		if err := statedir.Prepare(n.stateDir); err != nil {
			t.Fatal(err)
		}
		kc := kube.New(r.cs, nil, n.name, kube.WithoutBlockAffinities())
		a, err := applier.NewAgent(applier.Config{Node: n.name, HNS: hnsOf(n), Plans: n.src, PlansFrom: "test", StateDir: n.stateDir,
			HostRoutes: replace.NewMemRoutes(), Listen: "127.0.0.1:0", Kube: kc, Leases: r.cs.CoordinationV1(),
			RolloutNamespace: r.ns, SlotDuration: 3 * time.Second, SlotPoll: 200 * time.Millisecond,
			DrainTimeout: drainTimeout, Resync: time.Minute,
			Log: slog.New(slog.NewTextHandler(&logs, nil)).With("agent", n.name)})
		if err != nil {
			t.Fatal(err)
		}
		nodeCtx, stopNode := context.WithCancel(runCtx)
		n.stop = stopNode
		r.wg.Go(func() {
			if err := a.Run(nodeCtx); err != nil {
				t.Errorf("agent %s: %v", n.name, err)
			}
		})
	}
}

// kubelet plays the kubelet and the CNI for the rig's nodes until the
// agents stop: an evicted pod goes, and its endpoint.
func (r *rolloutRig) kubelet() {
	r.wg.Go(func() { kubelet(r.runCtx, r.cs, r.ns, r.nodes) })
}

func fiveAgents(t *testing.T, mu string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newRolloutRig(t, ctx, "win-r")
	cs, ns, base, tl, nodes := r.cs, r.ns, r.base, r.tl, r.nodes
	r.start(2*time.Second, func(n *rolloutNode) hns.Client { return n.hns })
	first := clonePlan(base, "sha256:first", mu)
	r.converge(first)
	r.podsBlockingNode0()
	// The kubelet and the CNI: an evicted pod goes, and its endpoint.
	r.kubelet()

	// Node 0 first, as a canary: it blocks, holding its slot.
	moved := withVNI(first, 5000)
	send := func(n *rolloutNode) {
		q := *moved
		q.Node = n.name
		n.src <- &q
	}
	send(nodes[0])
	waitState(t, ctx, cs, nodes[0].name, "", kube.StateBlocked)
	held := slotsOf(t, ctx, cs, ns)
	if !held[nodes[0].name] {
		t.Fatalf("node 0 is blocked holding no slot; slots %v", held)
	}
	tl.note("test: node 0 (%s) blocked by its PodDisruptionBudget, holding its slot; the new plan goes to the rest", nodes[0].name)
	for _, n := range nodes[1:] {
		send(n)
	}
	max := tl.slots(t, mu)
	if max == 1 {
		// The rollout is halted: nobody else cordons.
		for _, n := range nodes[1:] {
			waitState(t, ctx, cs, n.name, "", kube.StateRolloutWaiting)
		}
		time.Sleep(2 * time.Second)
		for _, n := range nodes[1:] {
			if c := tl.cordoned(n.name); c {
				t.Errorf("node %s cordoned while the rollout is halted on node 0", n.name)
			}
		}
		if held := slotsOf(t, ctx, cs, ns); len(held) != 1 || !held[nodes[0].name] {
			t.Errorf("halted: slots %v, want node 0's only", held)
		}
	}
	// The operator: hnsplan rollout resume frees node 0's slot.
	// From here node 0 stays cordoned without a slot, as the operator
	// chose: the bound is on the others.
	tl.exclude(nodes[0].name, true)
	// It frees the slot and lets go of the node's cordon: cordoned with no
	// slot and not let go of, node 0 would count against maxUnavailable.
	var out strings.Builder
	if err := fleet.Resume(ctx, cs, fleet.ResumeOptions{Namespace: ns, Nodes: []string{nodes[0].name}, Out: &out, ErrOut: &out}); err != nil ||
		!strings.Contains(out.String(), "freed 1 rollout slot of 1 node") {
		t.Fatalf("resume: %v\n%s", err, out.String())
	}
	tl.note("test: hnsplan rollout resume %s: %s", nodes[0].name, strings.TrimSpace(out.String()))
	for _, n := range nodes[1:] {
		waitState(t, ctx, cs, n.name, moved.Digest, kube.StateConverged)
	}
	waitState(t, ctx, cs, nodes[0].name, "", kube.StateRolloutHalted)
	if tl.cordoned(nodes[0].name) != true {
		t.Errorf("node 0 uncordoned while its replace is halted")
	}
	// Its budget fixed, node 0 is retried.
	if err := cs.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, nodes[0].pod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tl.exclude(nodes[0].name, false)
	if err := statedir.WriteRequest(nodes[0].stateDir, statedir.RetryFile, moved.Digest); err != nil {
		t.Fatal(err)
	}
	tl.note("test: node 0's budget deleted; hnsplan-agent replace --retry")
	waitState(t, ctx, cs, nodes[0].name, moved.Digest, kube.StateConverged)

	for _, n := range nodes {
		snap, err := n.hns.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if net := snap.Network(base.Network.Name); net == nil || net.Subnets[0].VNI != 5000 {
			t.Errorf("node %s: network %+v, want VNI 5000", n.name, net)
		}
		if tl.cordoned(n.name) {
			t.Errorf("node %s is still cordoned", n.name)
		}
	}
	if held := slotsOf(t, ctx, cs, ns); len(held) != 0 {
		t.Errorf("slots still held at the end: %v", held)
	}
	peak := tl.peak()
	max = tl.slots(t, mu)
	t.Logf("maxUnavailable %s: %d slots for %d Windows nodes; at most %d nodes cordoned by hnsplan at once\n%s", mu, max, tl.windowsMax(), peak, tl.String())
	if peak > max {
		t.Errorf("%d nodes were cordoned by hnsplan at once, more than maxUnavailable %s (%d)", peak, mu, max)
	}
	if peak < 1 {
		t.Error("no node was ever seen cordoned: the watch saw nothing")
	}
}

func clonePlan(p *plan.NodePlan, digest, mu string) *plan.NodePlan {
	q := *p
	q.Digest = digest
	q.Rollout = &plan.Rollout{MaxUnavailable: mu}
	return &q
}

func budget(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, app string, allowed int32) {
	t.Helper()
	minAvailable := intstr.FromInt32(1 - allowed)
	pdb, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: app},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvailable, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// As the disruption controller (not running here) would set it.
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: allowed,
		CurrentHealthy: 1, DesiredHealthy: 1 - allowed, ExpectedPods: 1}
	if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// kubelet deletes evicted pods at once and their endpoints with them.
func kubelet(ctx context.Context, cs kubernetes.Interface, ns string, nodes []*rolloutNode) {
	for ctx.Err() == nil {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil {
					continue
				}
				zero := int64(0)
				_ = cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
				for _, n := range nodes {
					if n.pod == p.Name {
						_ = n.hns.RemoveEndpoint(n.endpoint)
					}
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitState waits until node's annotations say state (and, unless "",
// digest applied).
func waitState(t *testing.T, ctx context.Context, cs kubernetes.Interface, node, digest string, state kube.NodeState) {
	t.Helper()
	var last *corev1.Node
	for ctx.Err() == nil {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err == nil {
			last = n
			if n.Annotations[kube.AnnotationState] == string(state) && (digest == "" || n.Annotations[kube.AnnotationDigest] == digest) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("node %s: waiting for %s at %q: annotations %v", node, state, digest, last.GetAnnotations())
}

// slotsOf is the slot Leases' holders.
func slotsOf(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns string) map[string]bool {
	t.Helper()
	slots, err := rollout.Status(ctx, cs.CoordinationV1(), ns)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	for _, s := range slots {
		held[s.Holder] = true
	}
	return held
}

// timeline follows the Nodes and the slot Leases: which of the test's
// nodes are cordoned by hnsplan (spec.unschedulable with the
// hnsplan.io/cordoned-by-agent marker), at most how many at once (but a
// node whose slot the operator freed: it stays cordoned by choice while the
// others go on), how many
// Windows nodes the API server has (the agents count them all), and who
// held which slot when.
type timeline struct {
	start time.Time

	mu       sync.Mutex
	lines    []string
	cordon   map[string]bool
	excluded map[string]bool // freed by the operator: out of the bound
	states   map[string]string
	holders  map[string]string // slot -> holder
	windows  map[string]bool
	maxCount int
	maxWin   int
}

func (tl *timeline) note(format string, args ...any) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.add(format, args...)
}

func (tl *timeline) add(format string, args ...any) {
	tl.lines = append(tl.lines, fmt.Sprintf("%6.2fs ", time.Since(tl.start).Seconds())+fmt.Sprintf(format, args...))
}

func (tl *timeline) follow(ctx context.Context, nodes, leases watch.Interface, mine map[string]bool) {
	defer nodes.Stop()
	defer leases.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-nodes.ResultChan():
			if !ok {
				return
			}
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			tl.mu.Lock()
			if ev.Type != watch.Deleted && n.Labels[applier.WindowsLabel] == "windows" {
				tl.windows[n.Name] = true
			} else {
				delete(tl.windows, n.Name)
			}
			tl.maxWin = max(tl.maxWin, len(tl.windows))
			if mine[n.Name] && ev.Type != watch.Deleted {
				c := n.Spec.Unschedulable && n.Annotations[kube.AnnotationCordoned] == "true"
				if c != tl.cordon[n.Name] {
					tl.add("%s %s", n.Name, map[bool]string{true: "cordoned", false: "uncordoned"}[c])
				}
				tl.cordon[n.Name] = c
				if s := n.Annotations[kube.AnnotationState]; s != tl.states[n.Name] && s != "" {
					tl.add("%s state %s", n.Name, s)
					tl.states[n.Name] = s
				}
				tl.count()
			}
			tl.mu.Unlock()
		case ev, ok := <-leases.ResultChan():
			if !ok {
				return
			}
			l, ok := ev.Object.(*coordinationv1.Lease)
			if !ok || !strings.HasPrefix(l.Name, rollout.NamePrefix) {
				continue
			}
			h := ""
			if l.Spec.HolderIdentity != nil && ev.Type != watch.Deleted {
				h = *l.Spec.HolderIdentity
			}
			tl.mu.Lock()
			if h != tl.holders[l.Name] {
				if h == "" {
					tl.add("slot %s released by %s", l.Name, tl.holders[l.Name])
				} else {
					tl.add("slot %s taken by %s", l.Name, h)
				}
				tl.holders[l.Name] = h
			}
			tl.mu.Unlock()
		}
	}
}

// exclude takes node out of the count (the operator freed its slot) or
// back in (its retry).
func (tl *timeline) exclude(node string, out bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.excluded[node] = out
	tl.count()
}

// count updates the peak of nodes cordoned by hnsplan but excluded ones.
func (tl *timeline) count() {
	n := 0
	for node, c := range tl.cordon {
		if c && !tl.excluded[node] {
			n++
		}
	}
	tl.maxCount = max(tl.maxCount, n)
}

func (tl *timeline) cordoned(node string) bool {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.cordon[node]
}

// resetPeak starts counting the peak again, from the nodes cordoned now.
func (tl *timeline) resetPeak() {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.maxCount = 0
	tl.count()
}

func (tl *timeline) peak() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.maxCount
}

func (tl *timeline) windowsMax() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.maxWin
}

// slots is how many slots maxUnavailable mu gives the most Windows nodes
// the API server has had during the test (other packages' tests share it).
func (tl *timeline) slots(t *testing.T, mu string) int {
	t.Helper()
	n, err := (&plan.Rollout{MaxUnavailable: mu}).Slots(tl.windowsMax())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (tl *timeline) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return strings.Join(tl.lines, "\n")
}

// lockedLog is the agents' log, written by all of them.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// converge gives every node p (made its own) and waits until each has
// applied it.
func (r *rolloutRig) converge(p *plan.NodePlan) {
	for _, n := range r.nodes {
		q := *p
		q.Node = n.name
		n.src <- &q
	}
	for _, n := range r.nodes {
		waitState(r.t, r.ctx, r.cs, n.name, p.Digest, kube.StateConverged)
	}
}

// podsBlockingNode0 puts a pod on each node (its endpoint in the node's
// HNS) and a budget for it: nodes 1-4 may lose theirs, node 0's may not.
func (r *rolloutRig) podsBlockingNode0() {
	t, ctx, cs := r.t, r.ctx, r.cs
	for i, n := range r.nodes {
		ip := netip.PrefixFrom(r.block.Addr().Next().Next().Next(), r.block.Bits())
		if err := n.hns.AddPodEndpoint(r.base.Network.Name, n.endpoint, ip, "", nil); err != nil {
			t.Fatal(err)
		}
		pod, err := cs.CoreV1().Pods(r.ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n.pod, Labels: map[string]string{"app": n.pod}},
			Spec: corev1.PodSpec{NodeName: n.name, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if _, err := cs.CoreV1().Pods(r.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		budget(t, ctx, cs, r.ns, n.pod, map[bool]int32{true: 0, false: 1}[i == 0])
	}
}
