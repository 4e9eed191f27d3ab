package audit

import (
	"strings"
	"testing"
	"time"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// orphanNode is a policy-only node (Azure CNI's network "azure") with one
// orphan endpoint, gone-eth0, orphaned for an hour: every guard holds.
func orphanNode(t *testing.T) (*hns.State, *hns.Want, Input, Guards) {
	m, err := plan.NewNetworkMatcher([]string{"azure"})
	if err != nil {
		t.Fatal(err)
	}
	want := &hns.Want{Foreign: m}
	have := &hns.State{
		Networks: []hns.Network{{Name: "azure", Type: "L2Bridge"}, {Name: "nat", Type: "NAT"}},
		Endpoints: []hns.Endpoint{
			{Name: "web-eth0", Network: "azure", IP: prefix("10.224.0.40/16"), Attached: true},
			{Name: "gone-eth0", ID: "id-gone", Network: "azure", IP: prefix("10.224.0.41/16")},
		},
	}
	ps := []Pod{{Name: "shop/web", Node: "akswin0", IP: addr("10.224.0.40")}}
	in := Input{Node: "akswin0", Have: have, Want: want, Pods: ps, PodsFrom: "cluster", Now: t0,
		Seen: map[string]time.Time{"azure/gone-eth0": t0.Add(-time.Hour)}}
	return have, want, in, Guards{Want: want, ClusterSynced: true, Pods: ps, Reachable: true, Have: have}
}

// Every guard, one at a time: with all holding the orphan goes; with any
// one failing it stays, saying why.
func TestCleanupGuards(t *testing.T) {
	c := Cleanup{Age: 30 * time.Minute, Max: 5}
	tests := []struct {
		name string
		edit func(*hns.State, *Input, *Guards, *Cleanup)
		why  string // "" : removed
	}{
		{"every guard holds", func(*hns.State, *Input, *Guards, *Cleanup) {}, ""},
		{"pods from a plan", func(_ *hns.State, in *Input, _ *Guards, _ *Cleanup) { in.PodsFrom = "plan" }, "never a plan's"},
		{"cluster not synced", func(_ *hns.State, _ *Input, g *Guards, _ *Cleanup) { g.ClusterSynced = false }, "not the synced cluster's"},
		{"API server silent", func(_ *hns.State, _ *Input, g *Guards, _ *Cleanup) { g.Reachable = false }, "does not answer"},
		{"on a network the plan does not name", func(_ *hns.State, _ *Input, g *Guards, _ *Cleanup) {
			// A plan that stopped naming it since the report (the
			// report itself names no such orphan: TestAuditPolicyOnly).
			m, _ := plan.NewNetworkMatcher([]string{"azure2"})
			g.Want = &hns.Want{Foreign: m}
		}, "which the plan does not name"},
		{"a pod on another node has the address", func(_ *hns.State, _ *Input, g *Guards, _ *Cleanup) {
			g.Pods = append(g.Pods, Pod{Name: "shop/moved", Node: "akswin1", IP: addr("10.224.0.41")})
		}, "pod shop/moved has 10.224.0.41"},
		{"remote", func(h *hns.State, _ *Input, _ *Guards, _ *Cleanup) { h.Endpoints[1].Remote = true }, "remote endpoint"}, // the report leaves it out too (TestAuditFindings)
		{"the host endpoint", func(h *hns.State, _ *Input, _ *Guards, _ *Cleanup) { h.Endpoints[1].HostAttached = true }, "the host endpoint"},
		{"attached", func(h *hns.State, _ *Input, _ *Guards, _ *Cleanup) { h.Endpoints[1].Attached = true }, "attached to a namespace"},
		{"its name is not unique", func(h *hns.State, _ *Input, _ *Guards, _ *Cleanup) {
			h.Endpoints = append(h.Endpoints, hns.Endpoint{Name: "gone-eth0", Network: "nat", IP: prefix("172.20.0.9/20")})
		}, "2 endpoints are named gone-eth0"},
		{"too young", func(_ *hns.State, in *Input, _ *Guards, _ *Cleanup) {
			in.Seen["azure/gone-eth0"] = t0.Add(-10 * time.Minute)
		}, "orphaned for 10m0s, less than 30m0s"},
		{"first seen now", func(_ *hns.State, in *Input, _ *Guards, _ *Cleanup) { in.Seen = nil }, "first seen now"},
		{"an age below the least", func(_ *hns.State, _ *Input, _ *Guards, c *Cleanup) { c.Age = time.Second }, "--clean-orphans-age 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			have, _, in, g := orphanNode(t)
			c := c
			r := Of(in)
			if len(r.Orphans) != 1 {
				t.Fatalf("orphans %+v, want gone-eth0", r.Orphans)
			}
			// The edit after the report: Select's guards stand on their
			// own, whatever the report says.
			tt.edit(have, &in, &g, &c)
			r.PodsFrom = in.PodsFrom
			if in.Seen["azure/gone-eth0"] != t0.Add(-time.Hour) {
				r.Orphans[0].Since = in.Seen["azure/gone-eth0"]
				if in.Seen == nil {
					r.Orphans[0].Since = t0
				}
			}
			del, refused := c.Select(r, g)
			if tt.why == "" {
				if len(del) != 1 || del[0].Name != "gone-eth0" || del[0].Action != hns.Delete || del[0].Kind != hns.KindEndpoint || len(refused) != 0 {
					t.Errorf("deletes %v, refused %v; want gone-eth0 removed", del, refused)
				}
				return
			}
			if len(del) != 0 || len(refused) != 1 || !strings.Contains(refused[0].Why, tt.why) {
				t.Errorf("deletes %v, refused %+v; want it kept because %q", del, refused, tt.why)
			}
		})
	}
}

// At most Max a pass; the rest wait for the next.
func TestCleanupMax(t *testing.T) {
	have, _, in, g := orphanNode(t)
	for _, n := range []string{"a", "b", "c"} {
		have.Endpoints = append(have.Endpoints, hns.Endpoint{Name: n + "-eth0", Network: "azure", IP: prefix("10.224.1." + map[string]string{"a": "1", "b": "2", "c": "3"}[n] + "/16")})
		in.Seen["azure/"+n+"-eth0"] = t0.Add(-time.Hour)
	}
	del, refused := Cleanup{Age: time.Minute, Max: 2}.Select(Of(in), g)
	if len(del) != 2 || len(refused) != 2 || !strings.Contains(refused[0].Why, "--clean-orphans-max") {
		t.Errorf("deletes %v, refused %+v; want 2 and 2 waiting", del, refused)
	}
}
