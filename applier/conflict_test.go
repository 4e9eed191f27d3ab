package applier_test

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// podsOf is the example's cluster as the pod cache shows it.
func podsOf(c *applier.Cluster) []kube.Pod {
	var out []kube.Pod
	for _, p := range c.Pods {
		out = append(out, kube.Pod{Namespace: p.Namespace, Name: p.Name, Node: c.PodNode(p), Labels: p.Labels,
			ServiceAccount: p.ServiceAccount, IPs: []netip.Addr{p.IP}, Phase: "Running"})
	}
	return out
}

// aclCalls counts the calls that wrote an endpoint's ACLs.
func aclCalls(h *hnsmem.HNS) int {
	n := 0
	for _, c := range h.Calls() {
		if c.Method == "hcnModifyEndpoint" {
			n++
		}
	}
	return n
}

func (k *fakeKube) setPods(pods []kube.Pod) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pods = pods
}

func (k *fakeKube) eventsSeen() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.events)
}

// TestAgentConflictWithCompetitorPod: a calico-node-windows pod on the
// node stops every write (no ACL for the pods the CNI adds meanwhile, no
// tunnel); the state is conflict with the pod named, one Warning Event;
// once the pod terminates the next pass programs the pods, and says so.
// A competitor on another node, or completed, changes nothing.
func TestAgentConflictWithCompetitorPod(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	h := hnsmem.New(hnsmem.ManagementAddress(mgmt(t, p)))
	cfg := agentConfig(t, h, chanSource(nil))
	k := &fakeKube{node: kube.Node{Name: "win-1"}, synced: true}
	cfg.Kube = k
	a, err := applier.NewAgent(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pods := podsOf(ex.cluster)
	calico := kube.Pod{Namespace: "calico-system", Name: "calico-node-windows-x7k2p", Node: "win-1", HostNetwork: true, Phase: "Running",
		Competitor: kube.CalicoNodeWindows}
	elsewhere := calico
	elsewhere.Name, elsewhere.Node = "calico-node-windows-other", "win-2"
	done := calico
	done.Name, done.Phase = "calico-node-windows-old", "Succeeded"
	k.setPods(append(slices.Clone(pods), elsewhere, done))
	a.TakePlan(planwatch.Update{Plan: p, Source: "test"})
	for a.Pass(ctx, 0) != applier.Wait {
	}
	if st := a.Status(); st.State != kube.StateConverged {
		t.Fatalf("with competitors elsewhere or completed: %+v; want converged", st)
	}

	k.setPods(append(slices.Clone(pods), calico, elsewhere, done))
	cni(t, h, p, ex.cluster) // the CNI networks the pods meanwhile
	h.ResetCalls()
	tunnels := len(k.tunnels)
	for range 3 {
		if next := a.Pass(ctx, 0); next != applier.Wait {
			t.Fatalf("in conflict: next %s; want wait (the pod's departure triggers a pass)", next)
		}
	}
	st := a.Status()
	if st.State != kube.StateConflict || !strings.Contains(st.Error, "calico-node-windows pod calico-system/calico-node-windows-x7k2p") ||
		strings.Contains(st.Error, "other") || strings.Contains(st.Error, "old") {
		t.Fatalf("status %+v; want conflict naming calico-system/calico-node-windows-x7k2p alone", st)
	}
	if h.MutatingCalls() != 0 || aclCalls(h) != 0 || len(k.tunnels) != tunnels {
		t.Fatalf("in conflict: %d mutating calls (%d ACL), %d tunnels published; want none", h.MutatingCalls(), aclCalls(h), len(k.tunnels)-tunnels)
	}
	if last := k.statuses[len(k.statuses)-1]; last.State != kube.StateConflict || last.Error != st.Error || last.Digest != p.Digest {
		t.Errorf("node status %+v; want conflict, the error, the digest last applied", last)
	}
	var warned []string
	for _, e := range k.eventsSeen() {
		if strings.HasPrefix(e, "Warning DataplaneConflict:") {
			warned = append(warned, e)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "calico-system/calico-node-windows-x7k2p") {
		t.Errorf("Events %q; want one DataplaneConflict naming the pod", k.eventsSeen())
	}

	// The DaemonSet leaves the node: its pod terminates.
	calico.Terminating = true
	k.setPods(append(slices.Clone(pods), calico))
	if next := a.Pass(ctx, 0); next != applier.Requeue || a.Status().State != kube.StateConverged || aclCalls(h) != 2 {
		t.Fatalf("competitor gone: %s, %+v, %d ACL calls; want requeue, converged, the 2 pods' ACLs", next, a.Status(), aclCalls(h))
	}
	if ev := k.eventsSeen(); !strings.HasPrefix(ev[len(ev)-1], "Normal DataplaneConflictResolved:") {
		t.Errorf("last Event %q; want DataplaneConflictResolved", ev[len(ev)-1])
	}
}

// fight rewrites endpoint name's ACLs as another controller would: the
// list it holds minus its last rule.
func fight(t *testing.T, h *hnsmem.HNS, name string) {
	t.Helper()
	e := h.Held().Endpoint(name)
	if e == nil || len(e.ACLs) < 2 {
		t.Fatalf("endpoint %s: %+v; want one with ACLs to rewrite", name, e)
	}
	if err := h.Apply(ctx, hns.Op{Action: hns.Update, Kind: hns.KindACL, Name: e.Name, ID: e.ID, Network: e.Network,
		ACLs: slices.Clone(e.ACLs[:len(e.ACLs)-1])}); err != nil {
		t.Fatal(err)
	}
}

// TestFightOverACLs: an endpoint's ACLs rewritten by someone else once,
// or every other pass, are mended; rewritten FightPasses passes in a row
// they are a fight: the pass writes nothing and reports conflict naming
// the endpoint, until the endpoint is gone. Under every quirk of HNS's
// read-back, passes that nobody disturbs never report one.
func TestFightOverACLs(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	for _, q := range append([]hnsmem.Quirk{""}, hnsmem.Quirks...) {
		t.Run(cmp.Or(string(q), "none"), func(t *testing.T) {
			var opts []hnsmem.Option
			if q != "" {
				opts = append(opts, hnsmem.WithQuirks(q))
			}
			h := hnsmem.New(opts...)
			reg := prometheus.NewRegistry()
			r := &applier.Reconciler{HNS: h, Metrics: applier.NewMetrics(reg)}
			r.SetPlan(p)
			pass := func(what string) applier.Status {
				t.Helper()
				st, err := r.Pass(ctx, ex.cluster)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				return st
			}
			pass("network")
			cni(t, h, p, ex.cluster)
			pass("pods")
			for i := range 2 * applier.FightPasses {
				if st := pass("undisturbed"); st.State == kube.StateConflict {
					t.Fatalf("undisturbed pass %d: %+v", i, st)
				}
			}
			target := h.Held().EndpointsOn(p.Network.Name)[1].Name
			if target == p.Network.Name+"_ep" {
				target = h.Held().EndpointsOn(p.Network.Name)[2].Name
			}
			// Every other pass: an operator's edits, mended each time.
			for i := range 2 * applier.FightPasses {
				if i%2 == 0 {
					fight(t, h, target)
				}
				if st := pass("edit"); st.State == kube.StateConflict {
					t.Fatalf("pass %d, edits every other pass: %+v", i, st)
				}
			}
			// In a row: mended FightPasses-1 times, then a conflict.
			for i := range applier.FightPasses {
				fight(t, h, target)
				h.ResetCalls()
				st := pass("fight")
				if i < applier.FightPasses-1 {
					if st.State == kube.StateConflict || aclCalls(h) != 1 {
						t.Fatalf("fight, pass %d: %+v, %d ACL calls; want the list mended", i, st, aclCalls(h))
					}
					continue
				}
				if st.State != kube.StateConflict || !strings.Contains(st.LastError, "an unknown writer of endpoint "+target+"'s ACLs") || h.MutatingCalls() != 0 {
					t.Fatalf("fight, pass %d: %+v, %d mutating calls; want conflict naming %s, no call", i, st, h.MutatingCalls(), target)
				}
			}
			if got := gauge(t, reg, "hnsplan_dataplane_conflict"); got != 1 {
				t.Errorf("hnsplan_dataplane_conflict = %v in conflict, want 1", got)
			}
			h.ResetCalls()
			if st := pass("held"); st.State != kube.StateConflict || h.MutatingCalls() != 0 {
				t.Fatalf("held: %+v, %d calls; want conflict, no call", st, h.MutatingCalls())
			}
			// The pod goes (the CNI deletes its endpoint): the hold ends.
			if err := h.RemoveEndpoint(target); err != nil {
				t.Fatal(err)
			}
			if st := pass("endpoint gone"); st.State == kube.StateConflict {
				t.Fatalf("endpoint gone: %+v", st)
			}
			if got := gauge(t, reg, "hnsplan_dataplane_conflict"); got != 0 {
				t.Errorf("hnsplan_dataplane_conflict = %v after, want 0", got)
			}
		})
	}
}

// gauge is the value of the gauge name in reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// TestCompetingDependsOnThePlan: flanneld competes with a plan that
// programs the routes itself (calico-vxlan), and is the partner of one
// that leaves them to it (flannel-host-gw: routing "flanneld");
// calico-node-windows competes with both. In conflict nothing is written,
// not even the network.
func TestCompetingDependsOnThePlan(t *testing.T) {
	vxlan := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml").plans["win-1"]
	hostgw := compile(t, "../examples/flannel-host-gw")
	var gw *plan.NodePlan
	for _, p := range hostgw.plans {
		gw = p
	}
	if gw == nil || gw.Routing != "flanneld" || vxlan.Routing == "flanneld" {
		t.Fatalf("the examples changed: flannel-host-gw routing %q, calico-vxlan %q", gw.Routing, vxlan.Routing)
	}
	flanneld := applier.Competing{What: kube.Flanneld, Pod: "kube-flannel/kube-flannel-ds-windows-amd64-q2x9z"}
	calico := applier.Competing{What: kube.CalicoNodeWindows, Pod: "calico-system/calico-node-windows-x7k2p"}
	for _, tc := range []struct {
		name     string
		p        *plan.NodePlan
		who      []applier.Competing
		conflict string
	}{
		{"flanneld beside calico-vxlan", vxlan, []applier.Competing{flanneld}, "flanneld pod kube-flannel/kube-flannel-ds-windows-amd64-q2x9z"},
		{"flanneld beside flannel-host-gw", gw, []applier.Competing{flanneld}, ""},
		{"calico-node-windows beside flannel-host-gw", gw, []applier.Competing{flanneld, calico}, "calico-node-windows pod calico-system/calico-node-windows-x7k2p"},
		{"calico-node-windows beside calico-vxlan", vxlan, []applier.Competing{calico}, "calico-node-windows pod calico-system/calico-node-windows-x7k2p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hnsmem.New()
			r := &applier.Reconciler{HNS: h}
			r.SetPlan(tc.p)
			st, err := r.Pass(ctx, &applier.Cluster{Competitors: tc.who, TunnelMACs: map[string]string{}})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.conflict == "" && (st.State == kube.StateConflict || h.MutatingCalls() == 0):
				t.Errorf("%+v, %d mutating calls; want the plan applied", st, h.MutatingCalls())
			case tc.conflict != "" && (st.State != kube.StateConflict || !strings.Contains(st.LastError, tc.conflict) || strings.Contains(st.LastError, "flanneld") != strings.Contains(tc.conflict, "flanneld") || h.MutatingCalls() != 0):
				t.Errorf("%+v, %d mutating calls; want conflict naming %s alone, no call", st, h.MutatingCalls(), tc.conflict)
			}
		})
	}
}
