//go:build integration

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/rollout"
)

// TestRolloutStalls: on the real kube-apiserver, every stall an agent
// cannot end by itself halts the rollout (status exit 4, with its reason)
// and rollout resume frees it without --force, with a message true to
// it: a slot Lease made by hand for a name that is no node, a slot whose
// holder stopped renewing it, and a node cordoned by hnsplan's agent that
// holds no slot (its agent died after its slot was taken over).
//
//	go test -tags integration -run RolloutStalls ./cmd/hnsplan/
func TestRolloutStalls(t *testing.T) {
	f := newRolloutFixture(t)
	ctx := context.Background()
	// b is a live holder (replacing, the fixture's slot): not halted.
	f.run(0, "rollout", "status")

	// A Lease made by hand, as the fault probe did: hnsplan-rollout-1 for
	// "intruder", for an hour.
	hour, intruder := int32(3600), "intruder"
	now := metav1.NewMicroTime(time.Now())
	if _, err := f.cs.CoordinationV1().Leases(f.ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: rollout.NamePrefix + "1", Labels: map[string]string{rollout.SlotLabel: "1"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &intruder, LeaseDurationSeconds: &hour, AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, _ := f.run(exitHalted, "rollout", "status")
	if !strings.Contains(out, `rollout halted by intruder: hnsplan-rollout-1 is held by "intruder", and no Node of that name exists`) ||
		!strings.Contains(out, "1 halted") {
		t.Errorf("status with a foreign Lease:\n%s", out)
	}
	out, _ = f.run(0, "rollout", "resume", "intruder")
	if !strings.Contains(out, "node intruder: freed hnsplan-rollout-1, held by a name that is no Windows node") {
		t.Errorf("resume intruder:\n%s", out)
	}
	f.run(0, "rollout", "status")

	// b's agent dies: its slot is not renewed for more than twice its
	// duration (written back, as a clock would have it).
	l, err := f.cs.CoordinationV1().Leases(f.ns).Get(ctx, rollout.NamePrefix+"0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := metav1.NewMicroTime(time.Now().Add(-3 * time.Minute))
	l.Spec.RenewTime = &old
	if _, err := f.cs.CoordinationV1().Leases(f.ns).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.cordonByAgent(f.b)
	out, _ = f.run(exitHalted, "rollout", "status")
	if !strings.Contains(out, "rollout halted by "+f.b+": hnsplan-rollout-0 is last renewed 3m") ||
		!strings.Contains(out, "more than twice its 60s: "+f.b+"'s agent stopped renewing it") {
		t.Errorf("status with an abandoned slot:\n%s", out)
	}
	out, _ = f.run(0, "rollout", "resume")
	if !strings.Contains(out, "node "+f.b+": freed hnsplan-rollout-0, which its agent had stopped renewing (was replacing); let go of its cordon") ||
		!strings.Contains(out, "freed 1 rollout slot of 1 node in "+f.ns+"; let go of 1 node cordoned by hnsplan's agent") {
		t.Errorf("resume of an abandoned slot:\n%s", out)
	}
	f.run(0, "rollout", "status")
	if n, _ := f.cs.CoreV1().Nodes().Get(ctx, f.b, metav1.GetOptions{}); !n.Spec.Unschedulable || n.Annotations[kube.AnnotationLetGo] == "" {
		t.Errorf("%s after resume: unschedulable %v, annotations %v; want still cordoned, let go of", f.b, n.Spec.Unschedulable, n.Annotations)
	}

	// c was cordoned by its agent, which died after its slot was taken
	// over: stranded, with no slot.
	f.cordonByAgent(f.c)
	out, _ = f.run(exitHalted, "rollout", "status")
	if !strings.Contains(out, "rollout halted by "+f.c+": it is cordoned by hnsplan's agent and holds no rollout slot") ||
		!strings.Contains(out, "hnsplan rollout resume "+f.c+" to let go of it") {
		t.Errorf("status with a stranded node:\n%s", out)
	}
	out, _ = f.run(0, "rollout", "resume", f.c)
	if !strings.Contains(out, "node "+f.c+": held no rollout slot (its agent is gone in the middle of a replace); let go of its cordon") {
		t.Errorf("resume of a stranded node:\n%s", out)
	}
	f.run(0, "rollout", "status")
	events, err := f.cs.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + f.c})
	if err != nil || len(events.Items) != 1 || !strings.Contains(events.Items[0].Message, "let go of this node, cordoned by hnsplan's agent with no rollout slot") {
		t.Errorf("events on %s: %+v, %v", f.c, events, err)
	}
}

// cordonByAgent cordons node as its agent does: unschedulable, with the
// agent's marker.
func (f *rolloutFixture) cordonByAgent(node string) {
	f.t.Helper()
	n, err := f.cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	n.Spec.Unschedulable = true
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[kube.AnnotationCordoned] = "true"
	delete(n.Annotations, kube.AnnotationLetGo)
	if _, err := f.cs.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}
