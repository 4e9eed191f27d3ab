//go:build integration

package examples_test

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hnsplan/hnsplan/applier/rollout"
	"github.com/hnsplan/hnsplan/internal/kubetest"
)

// TestDeployLeaseOwnSlotOnly: with deploy/ applied, an agent takes,
// renews and releases its rollout slot through applier/rollout's own code,
// and may neither write a slot for another node, renew or release
// another node's, write a Lease that is not a slot, nor write any with a
// token bound to no node.
func TestDeployLeaseOwnSlotOnly(t *testing.T) {
	// It squats hnsplan-rollout-0 by name: no other test's agent may hold
	// a slot of hnsplan-system meanwhile (its create would fail, or their
	// agents wait on the squatter).
	kubetest.OwnSystemNamespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := kubetest.Config(t)
	kubetest.ApplyDeploy(t, ctx, admin)
	adminCS := kubetest.Client(t, admin)
	nodeA, nodeB := kubetest.UniqueName("win-la"), kubetest.UniqueName("win-lb")
	agentA := kubetest.Client(t, kubetest.AgentConfig(admin, nodeA)).CoordinationV1().Leases(deployNamespace)
	agentB := kubetest.Client(t, kubetest.AgentConfig(admin, nodeB)).CoordinationV1().Leases(deployNamespace)
	unbound := kubetest.Client(t, kubetest.AgentConfig(admin, "")).CoordinationV1().Leases(deployNamespace)
	lease := func(name, holder string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{rollout.SlotLabel: "999"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(int32(5))}}
	}
	var probes []string
	t.Cleanup(func() {
		for _, n := range probes {
			_ = adminCS.CoordinationV1().Leases(deployNamespace).Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	kubetest.WaitForPolicy(t, "lease policy", "hold a slot only for its own node", func() error {
		name := kubetest.UniqueName(rollout.NamePrefix + "probe")
		probes = append(probes, name)
		_, err := agentB.Create(ctx, lease(name, nodeA), metav1.CreateOptions{})
		return err
	})

	// What the agent does, through its own code.
	slots := &rollout.Slots{Leases: kubetest.Client(t, kubetest.AgentConfig(admin, nodeA)).CoordinationV1(), Namespace: deployNamespace,
		Holder: nodeA, Max: 1000, Duration: 5 * time.Second}
	name, ok, err := slots.Acquire(ctx)
	if err != nil || !ok {
		t.Fatalf("agent of A takes a slot: %q, %v, %v", name, ok, err)
	}
	probes = append(probes, name)
	if err := slots.Renew(ctx); err != nil {
		t.Errorf("agent of A renews its slot: %v", err)
	}

	denied := func(what, want string, err error) {
		t.Helper()
		if err == nil || !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want it denied (%q)", what, err, want)
		}
	}
	held, err := adminCS.CoordinationV1().Leases(deployNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	renewed := held.DeepCopy()
	renewed.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
	_, err = agentB.Update(ctx, renewed, metav1.UpdateOptions{})
	denied("agent of B renews A's slot", "hold a slot only for its own node", err)
	err = agentB.Delete(ctx, name, metav1.DeleteOptions{})
	denied("agent of B releases A's slot", "release only a slot its node holds", err)
	other := kubetest.UniqueName("not-a-slot")
	_, err = agentB.Create(ctx, lease(other, nodeB), metav1.CreateOptions{})
	probes = append(probes, other)
	denied("agent of B creates a Lease that is not a slot", "only rollout slot Leases", err)
	forB := kubetest.UniqueName(rollout.NamePrefix + "for-b")
	_, err = agentA.Create(ctx, lease(forB, nodeB), metav1.CreateOptions{})
	probes = append(probes, forB)
	denied("agent of A takes a slot in B's name", "hold a slot only for its own node", err)
	own := kubetest.UniqueName(rollout.NamePrefix + "unbound")
	_, err = unbound.Create(ctx, lease(own, nodeA), metav1.CreateOptions{})
	probes = append(probes, own)
	denied("an agent token bound to no node creates a slot", "token bound to its node", err)

	// (The policy may have just changed: wait for its duration rule.)
	kubetest.WaitForPolicy(t, "lease policy", "leaseDurationSeconds from 1 to 300", func() error {
		long := kubetest.UniqueName(rollout.NamePrefix + "hour")
		hour := lease(long, nodeA)
		hour.Spec.LeaseDurationSeconds = ptr.To(int32(3600))
		probes = append(probes, long)
		_, err := agentA.Create(ctx, hour, metav1.CreateOptions{})
		return err
	})
	held, err = adminCS.CoordinationV1().Leases(deployNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	held.Spec.LeaseDurationSeconds = ptr.To(int32(301))
	_, err = agentA.Update(ctx, held, metav1.UpdateOptions{})
	denied("agent of A renews its slot for 301 s", "every 5 minutes), not 301", err)
	five := kubetest.UniqueName(rollout.NamePrefix + "five")
	ok5 := lease(five, nodeA)
	ok5.Spec.LeaseDurationSeconds = ptr.To(int32(300))
	if _, err = agentA.Create(ctx, ok5, metav1.CreateOptions{}); err != nil {
		t.Errorf("agent of A takes a slot for 300 s: %v", err)
	}
	probes = append(probes, five)
	if err := adminCS.CoordinationV1().Leases(deployNamespace).Delete(ctx, five, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// A slot squatted by hand for a name that is no node, for an hour:
	// A's agent, with its node token, takes it over once it has stayed
	// unrenewed for a minute by A's clock.
	if err := slots.Release(ctx); err != nil { // A holds no other slot
		t.Fatal(err)
	}
	squat := rollout.NamePrefix + "0" // the slot the taker's Max of 1 allows
	sq := lease(squat, "intruder")
	sq.Labels[rollout.SlotLabel] = "0"
	sq.Spec.LeaseDurationSeconds = ptr.To(int32(3600))
	if _, err := adminCS.CoordinationV1().Leases(deployNamespace).Create(ctx, sq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	probes = append(probes, squat)
	clock := time.Now()
	taker := &rollout.Slots{Leases: kubetest.Client(t, kubetest.AgentConfig(admin, nodeA)).CoordinationV1(), Namespace: deployNamespace,
		Holder: nodeA, Max: 1, Duration: 5 * time.Second, Windows: map[string]bool{nodeA: true, nodeB: true},
		Now: func() time.Time { return clock }}
	if got, ok, err := taker.Acquire(ctx); err != nil || ok {
		t.Fatalf("agent of A with a squatted slot: %q %v %v; want it to wait a minute first", got, ok, err)
	}
	clock = clock.Add(rollout.SquatAfter + time.Second)
	got, ok, err := taker.Acquire(ctx)
	if err != nil || !ok || got != squat {
		t.Fatalf("agent of A after a minute: %q %v %v; want the squatted slot %s", got, ok, err, squat)
	}
	if l, err := adminCS.CoordinationV1().Leases(deployNamespace).Get(ctx, squat, metav1.GetOptions{}); err != nil ||
		*l.Spec.HolderIdentity != nodeA || *l.Spec.LeaseDurationSeconds != 5 {
		t.Errorf("the squatted slot after the takeover: %+v, %v", l.Spec, err)
	}
	slots = taker

	if err := slots.Release(ctx); err != nil {
		t.Errorf("agent of A releases its slot: %v", err)
	}
	if _, err := adminCS.CoordinationV1().Leases(deployNamespace).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("A's slot after its release: %v; want it gone", err)
	}
}
