package applier_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/control"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/planwatch"
)

// TestAgentSuspended: a suspended agent makes no HNS write, for a new
// plan or a network replace, and says so (state, /status, one Event);
// unsuspended, it converges. A reconcile request is said once, and one
// older than the agent is not.
func TestAgentSuspended(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	for _, key := range []string{control.SuspendKey("win-1"), control.KeySuspend} {
		t.Run(key, func(t *testing.T) {
			h := hnsmem.New(hnsmem.ManagementAddress(mgmt(t, p)))
			k := &fakeKube{synced: true, node: kube.Node{Name: "win-1"}}
			cfg := agentConfig(t, h, chanSource(nil))
			cfg.Kube = k
			a, err := applier.NewAgent(cfg)
			if err != nil {
				t.Fatal(err)
			}
			pass := func() {
				for a.Pass(ctx, 0) == applier.Requeue {
				}
			}
			reason := "KB rollout\tunder way\x1b[31m"
			a.TakeControl(map[string]string{key: control.Value{At: time.Now(), Reason: reason}.Format(), control.SuspendKey("win-2"): "x"})
			a.TakePlan(planwatch.Update{Plan: p, Source: "test"})
			pass()
			pass()
			a.TakePlan(planwatch.Update{Plan: withVNI(p, 5000), Source: "test"})
			pass()
			st := a.Status()
			if n := h.MutatingCalls(); n != 0 || st.State != kube.StateSuspended {
				t.Fatalf("suspended: %d HNS writes, state %s; want none, suspended", n, st.State)
			}
			if st.Suspended == nil || st.Suspended.Key != key || st.Suspended.Reason != "KB rollout under way [31m" || !strings.Contains(st.Error, key) {
				t.Errorf("/status suspended %+v, error %q: want key %s and the reason, printable", st.Suspended, st.Error, key)
			}
			if got := strings.Join(k.events, "\n"); strings.Count(got, "AgentSuspended") != 1 {
				t.Errorf("events:\n%s\nwant one AgentSuspended", got)
			}
			if got := gauge(t, a.Registry(), "hnsplan_agent_suspended"); got != 1 {
				t.Errorf("hnsplan_agent_suspended = %v while suspended, want 1", got)
			}
			if last := k.statuses[len(k.statuses)-1]; last.State != kube.StateSuspended {
				t.Errorf("the Node's state %s, want suspended", last.State)
			}

			a.TakeControl(map[string]string{control.SuspendKey("win-2"): "x"})
			pass()
			if st := a.Status(); st.State != kube.StateConverged || h.MutatingCalls() == 0 || st.Suspended != nil {
				t.Fatalf("unsuspended: state %s (%s), %d HNS writes; want converged", st.State, st.Error, h.MutatingCalls())
			}
			if got := gauge(t, a.Registry(), "hnsplan_agent_suspended"); got != 0 {
				t.Errorf("hnsplan_agent_suspended = %v after, want 0", got)
			}
			if got := strings.Join(k.events, "\n"); !strings.Contains(got, "AgentUnsuspended") {
				t.Errorf("events:\n%s\nwant AgentUnsuspended", got)
			}
		})
	}
}

func TestAgentReconcileRequested(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	h := hnsmem.New(hnsmem.ManagementAddress(mgmt(t, ex.plans["win-1"])))
	k := &fakeKube{synced: true, node: kube.Node{Name: "win-1"}}
	cfg := agentConfig(t, h, chanSource(nil))
	cfg.Kube = k
	a, err := applier.NewAgent(cfg)
	if err != nil {
		t.Fatal(err)
	}
	count := func() int { return strings.Count(strings.Join(k.events, "\n"), "ReconcileRequested") }
	old := control.Value{At: time.Now().Add(-time.Hour)}.Format()
	a.TakeControl(map[string]string{control.KeyReconcile: old})
	if n := count(); n != 0 {
		t.Fatalf("a request older than the agent: %d ReconcileRequested, want 0", n)
	}
	now := control.Value{At: time.Now().Add(time.Second), Reason: "look now"}.Format()
	a.TakeControl(map[string]string{control.KeyReconcile: old, control.ReconcileKey("win-1"): now})
	a.TakeControl(map[string]string{control.KeyReconcile: old, control.ReconcileKey("win-1"): now})
	if n := count(); n != 1 {
		t.Fatalf("one new request, seen twice: %d ReconcileRequested, want 1", n)
	}
}
