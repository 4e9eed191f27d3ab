package fleet

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/rollout"
)

// TestStatusStalls: every stall status knows halts the rollout with its
// own kind and reason, and a live rollout does not: a slot held by a name
// that is no node or by a Linux node, a slot unrenewed past twice its
// duration (but not one within it, whatever the skew up to a duration),
// a blocked holder, and a node cordoned by the agent with no slot and not
// let go of.
func TestStatusStalls(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	windows := map[string]string{"kubernetes.io/os": "windows"}
	node := func(name string, labels, ann map[string]string, cordoned bool) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: ann}, Spec: corev1.NodeSpec{Unschedulable: cordoned}}
	}
	lease := func(i int, holder string, renewed time.Time, secs int32) *coordinationv1.Lease {
		t := metav1.NewMicroTime(renewed)
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: rollout.NamePrefix + string(rune('0'+i)), Namespace: Namespace,
			Labels: map[string]string{rollout.SlotLabel: string(rune('0' + i))}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &t, RenewTime: &t}}
	}
	for _, c := range []struct {
		name    string
		objects []any
		want    map[string]string // node -> stall kind ("" for none)
	}{
		{"live holder, renewed within twice its duration (clock skew)", []any{
			node("win-a", windows, map[string]string{AnnotationState: "replacing", kube.AnnotationCordoned: "true"}, true),
			lease(0, "win-a", now.Add(-119*time.Second), 60),
		}, map[string]string{"win-a": ""}},
		{"abandoned slot", []any{
			node("win-a", windows, map[string]string{AnnotationState: "replacing", kube.AnnotationCordoned: "true"}, true),
			lease(0, "win-a", now.Add(-121*time.Second), 60),
		}, map[string]string{"win-a": StallAbandoned}},
		{"a Lease made by hand, held by no node", []any{
			lease(0, "intruder", now, 300),
		}, map[string]string{"intruder": StallForeignHolder}},
		{"a slot held by a Linux node", []any{
			node("linux-1", map[string]string{"kubernetes.io/os": "linux"}, nil, false),
			lease(0, "linux-1", now, 60),
		}, map[string]string{"linux-1": StallForeignHolder}},
		{"two slots held in one node's name", []any{
			node("win-a", windows, map[string]string{AnnotationState: "replacing", kube.AnnotationCordoned: "true"}, true),
			lease(0, "win-a", now, 60), lease(1, "win-a", now, 60),
		}, map[string]string{"win-a": StallSeveralSlots}},
		{"blocked holder", []any{
			node("win-a", windows, map[string]string{AnnotationState: "blocked", kube.AnnotationCordoned: "true"}, true),
			lease(0, "win-a", now, 60),
		}, map[string]string{"win-a": StallState}},
		{"stranded: cordoned by the agent, no slot", []any{
			node("win-a", windows, map[string]string{AnnotationState: "replacing", kube.AnnotationCordoned: "true"}, true),
		}, map[string]string{"win-a": StallStranded}},
		{"let go of", []any{
			node("win-a", windows, map[string]string{AnnotationState: "replacing", kube.AnnotationCordoned: "true", kube.AnnotationLetGo: "x"}, true),
		}, map[string]string{}},
		{"cordoned by an operator", []any{
			node("win-a", windows, map[string]string{AnnotationState: "converged"}, true),
		}, map[string]string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs := fake.NewClientset()
			ctx := context.Background()
			for _, o := range c.objects {
				var err error
				switch o := o.(type) {
				case *corev1.Node:
					_, err = cs.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{})
				case *coordinationv1.Lease:
					_, err = cs.CoordinationV1().Leases(Namespace).Create(ctx, o, metav1.CreateOptions{})
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			st, err := gather(ctx, cs, Namespace, now)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			halted := 0
			for _, r := range st.Nodes {
				got[r.Node] = ""
				if r.Stall != nil {
					got[r.Node] = r.Stall.Kind
					halted++
					if r.Phase != PhaseHalted || r.Stall.Reason == "" || !strings.Contains(r.Stall.Fix, "hnsplan rollout resume "+r.Node) {
						t.Errorf("%s: phase %s, stall %+v", r.Node, r.Phase, r.Stall)
					}
				}
			}
			for n, k := range c.want {
				if got[n] != k {
					t.Errorf("%s: stall %q, want %q (status %+v)", n, got[n], k, st.Nodes)
				}
			}
			if len(got) != len(c.want) || halted != st.Summary.Halted {
				t.Errorf("rows %v, want %v; halted %d", got, c.want, st.Summary.Halted)
			}
			var out bytes.Buffer
			if err := st.Write(&out, "text"); err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(out.String(), "rollout halted by "); n != halted {
				t.Errorf("%d halt lines, want %d:\n%s", n, halted, out.String())
			}
		})
	}
}
