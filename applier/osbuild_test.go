package applier_test

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// TestRolloutBuildRegression: with rollout.buildRegression hold, a node
// whose Node reports a build with a known regression does not start a
// replace (rollout-held: no slot, no cordon, no HNS write); the hold ends
// by itself once the Node reports the fixed build. With proceed (and with
// hold on an unknown build) the replace goes on.
func TestRolloutBuildRegression(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	for _, tc := range []struct {
		name, kernel, hold string
		held               bool
	}{
		{"hold on a bad build", "10.0.20348.2582", plan.BuildHold, true},
		{"proceed on a bad build", "10.0.20348.2582", plan.BuildProceed, false},
		{"hold on an unknown build", "", plan.BuildHold, false},
		{"hold on a Linux kernel", "5.15.0-1057-azure", plan.BuildHold, false},
		{"hold on the fixed build", "10.0.20348.2762", plan.BuildHold, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hnsmem.New(hnsmem.ManagementAddress(mgmt(t, p)))
			cs := fake.NewClientset()
			self := windowsNode("win-1")
			self.KernelVersion = tc.kernel
			k := &slotKube{fakeKube: &fakeKube{synced: true, node: self}, nodes: []kube.Node{self, windowsNode("win-2")}}
			cfg := agentConfig(t, h, chanSource(nil))
			cfg.Kube, cfg.Leases = k, cs.CoordinationV1()
			cfg.OSBuild = func() (string, error) { return "", errors.New("no registry here") }
			a, err := applier.NewAgent(cfg)
			if err != nil {
				t.Fatal(err)
			}
			pass := func() {
				for a.Pass(ctx, 0) == applier.Requeue {
				}
			}
			a.TakePlan(planwatch.Update{Plan: p, Source: "test"})
			pass()
			moved := withVNI(p, 5000)
			moved.Rollout = &plan.Rollout{BuildRegression: tc.hold}
			a.TakePlan(planwatch.Update{Plan: moved, Source: "test"})
			writes := h.MutatingCalls()
			pass()
			st := a.Status()
			if !tc.held {
				if st.State != kube.StateConverged || k.cordons != 1 {
					t.Fatalf("state %s (%s), %d cordons; want converged after one cordon", st.State, st.Error, k.cordons)
				}
				return
			}
			if st.State != kube.StateRolloutHeld || k.cordons != 0 || h.MutatingCalls() != writes || len(cs.Actions()) != 0 {
				t.Fatalf("state %s, %d cordons, %d HNS calls, %d API actions; want rollout-held, none of them", st.State, k.cordons, h.MutatingCalls()-writes, len(cs.Actions()))
			}
			if !strings.Contains(st.Error, "10.0.20348.2582") || !strings.Contains(st.Error, "KB5044281") {
				t.Errorf("last error %q: want the build and the update that fixes it", st.Error)
			}
			if st.OSBuild == nil || st.OSBuild.From != "node" || st.OSBuild.UBR != 2582 || st.OSBuild.Regression == nil {
				t.Errorf("/status osBuild %+v: want 20348.2582 from the node, with its regression", st.OSBuild)
			}
			if got := strings.Join(k.events, "\n"); strings.Count(got, "WindowsBuildRegression") != 1 || !strings.Contains(got, "RolloutHeld") {
				t.Errorf("events:\n%s\nwant one WindowsBuildRegression and a RolloutHeld", got)
			}
			if got := buildInfo(t, a); got != "10.0.20348.2582 ws2022-2024-07-container-networking" {
				t.Errorf("hnsplan_windows_build_info: %q", got)
			}
			// The node is updated: the hold ends by itself.
			k.mu.Lock()
			k.node.KernelVersion = "10.0.20348.2762"
			k.mu.Unlock()
			pass()
			if st := a.Status(); st.State != kube.StateConverged || k.cordons != 1 || st.OSBuild.Regression != nil {
				t.Fatalf("after the update: state %s (%s), %d cordons, osBuild %+v; want converged after one cordon, no regression", st.State, st.Error, k.cordons, st.OSBuild)
			}
			if got := buildInfo(t, a); got != "10.0.20348.2762 none" {
				t.Errorf("hnsplan_windows_build_info after the update: %q, want the one new series", got)
			}
		})
	}
}

// buildInfo is the labels of hnsplan_windows_build_info's series,
// "build regression", "; "-separated.
func buildInfo(t *testing.T, a *applier.Agent) string {
	t.Helper()
	mfs, err := a.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != "hnsplan_windows_build_info" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out = append(out, l["build"]+" "+l["regression"])
		}
	}
	return strings.Join(out, "; ")
}
