//go:build integration

package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hnsplan/hnsplan/applier/control"
	"github.com/hnsplan/hnsplan/applier/rollout"
	"github.com/hnsplan/hnsplan/fleet"
)

// TestRolloutSuspendReconcile: suspend, unsuspend and reconcile write
// their own keys of hnsplan-control and nothing else; status shows
// suspended nodes as their own phase, says when every agent is, and
// --wait does not end while a node is suspended; a node held for its
// Windows build halts the rollout, and resume says why it frees nothing.
//
//	go test -tags integration -run RolloutSuspend ./cmd/hnsplan/
func TestRolloutSuspendReconcile(t *testing.T) {
	f := newRolloutFixture(t)
	ctx := context.Background()
	cms := f.cs.CoreV1().ConfigMaps(f.ns)

	_, stderr := f.run(exitInvalid, "rollout", "suspend", f.a)
	if !strings.Contains(stderr, "the ConfigMap "+f.ns+"/hnsplan-control does not exist: apply deploy/") {
		t.Errorf("suspend without the ConfigMap: %s", stderr)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: control.Name, Namespace: f.ns},
		Data: map[string]string{"note": "an operator's"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	data := func() map[string]string {
		t.Helper()
		cm, err := cms.Get(ctx, control.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.Data
	}

	out, _ := f.run(0, "rollout", "suspend", f.a, "--reason", "KB5040437\nunder investigation")
	d := data()
	st := control.For(d, f.a)
	if !st.Suspended || st.Key != control.SuspendKey(f.a) || st.Reason != "KB5040437 under investigation" || d["note"] != "an operator's" || len(d) != 2 {
		t.Errorf("after suspend: %v (%+v); want suspend.%s with its reason, and the other key kept", d, st, f.a)
	}
	if !strings.Contains(out, f.a+": suspended") {
		t.Errorf("suspend: %q", out)
	}

	// The agents' side, as they report it. b and c converge; a is
	// suspended: status shows it, and --wait does not end.
	if _, err := rollout.Free(ctx, f.cs.CoordinationV1(), f.ns, f.b); err != nil {
		t.Fatal(err)
	}
	f.annotate(f.b, map[string]any{fleet.AnnotationState: "converged", fleet.AnnotationApplied: "sha256:bbbb000000000000000000000000000000000000000000000000000000000002"})
	f.annotate(f.c, map[string]any{fleet.AnnotationState: "converged", fleet.AnnotationApplied: "sha256:cccc000000000000000000000000000000000000000000000000000000000003"})
	f.annotate(f.a, map[string]any{fleet.AnnotationState: "suspended", fleet.AnnotationLastError: control.For(d, f.a).Message()})
	out, _ = f.run(0, "rollout", "status")
	if !strings.Contains(out, "3 nodes: 2 converged, 0 pending, 0 halted, 1 suspended; 0 rollout slots held") || !strings.Contains(out, "suspended: "+f.a) {
		t.Errorf("status with %s suspended:\n%s", f.a, out)
	}
	f.run(exitTimeout, "rollout", "status", "--wait", "--timeout", "1s", "--interval", "200ms")

	// Every agent suspended.
	f.run(0, "rollout", "suspend", "--all")
	for _, n := range []string{f.b, f.c} {
		f.annotate(n, map[string]any{fleet.AnnotationState: "suspended"})
	}
	out, _ = f.run(0, "rollout", "status")
	if !strings.Contains(out, "every agent is suspended") {
		t.Errorf("status with every agent suspended:\n%s", out)
	}
	out, _ = f.run(0, "rollout", "unsuspend", "--all")
	if d := data(); d[control.KeySuspend] != "" || d[control.SuspendKey(f.a)] == "" || !strings.Contains(out, "still suspended by their own key: "+f.a) {
		t.Errorf("unsuspend --all: %v\n%s; want suspend gone, suspend.%s kept and named", d, out, f.a)
	}
	f.run(0, "rollout", "unsuspend", f.a)
	if d := data(); len(d) != 1 || d["note"] != "an operator's" {
		t.Errorf("after unsuspend: %v, want the operator's key only", d)
	}

	// reconcile writes its key with the time.
	f.run(0, "rollout", "reconcile", f.b, f.c)
	if d := data(); control.For(d, f.b).Reconcile.IsZero() || control.For(d, f.c).ReconcileKey != control.ReconcileKey(f.c) || !control.For(d, f.a).Reconcile.IsZero() {
		t.Errorf("after reconcile %s %s: %v", f.b, f.c, d)
	}

	// A node held for its Windows build halts the rollout; resume frees
	// nothing for it and says why.
	for _, n := range []string{f.a, f.b} {
		f.annotate(n, map[string]any{fleet.AnnotationState: "converged", fleet.AnnotationLastError: nil})
	}
	held := "rollout held: this node runs Windows build 10.0.20348.2582, which has a known container-networking regression since KB5040437 (20348.2582, 2024-07-09), and the plan's rollout.buildRegression is hold"
	f.annotate(f.c, map[string]any{fleet.AnnotationState: "rollout-held", fleet.AnnotationLastError: held})
	out, _ = f.run(exitHalted, "rollout", "status")
	if !strings.Contains(out, "1 halted") || !strings.Contains(out, "rollout held on "+f.c+": rollout held: this node runs Windows build 10.0.20348.2582") {
		t.Errorf("status with %s held:\n%s", f.c, out)
	}
	out, _ = f.run(0, "rollout", "resume")
	if !strings.Contains(out, "node "+f.c+" is rollout-held: it holds no rollout slot, so resume frees nothing for it") {
		t.Errorf("resume with %s held:\n%s", f.c, out)
	}
	_, stderr = f.run(exitInvalid, "rollout", "resume", f.c)
	if !strings.Contains(stderr, "is rollout-held") {
		t.Errorf("resume %s: %s", f.c, stderr)
	}
}
