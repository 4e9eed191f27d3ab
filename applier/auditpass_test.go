package applier_test

import (
	"context"
	"io"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/audit"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// auditRig is an agent for calico-vxlan's win-1 with a cluster holding
// the plan's pods, converged; orphan is an address of the node's block
// no pod has, dup one a pod has.
type auditRig struct {
	p         *plan.NodePlan
	h         *hnsmem.HNS
	k         *fakeKube
	a         *applier.Agent
	orphan    netip.Prefix
	dup       netip.Prefix
	clock     time.Time
	mu        sync.Mutex
	reachable bool
}

func newAuditRig(t *testing.T, edit func(*applier.Config, *auditRig)) *auditRig {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	r := &auditRig{p: ex.plans["win-1"], clock: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), reachable: true}
	r.h = hnsmem.New(hnsmem.ManagementAddress(mgmt(t, r.p)))
	r.k = &fakeKube{synced: true, node: kube.Node{Name: "win-1"}}
	for _, e := range r.p.Endpoints {
		ns, name, _ := strings.Cut(e.Pod, "/")
		ip := e.IpConfigurations[0]
		r.k.pods = append(r.k.pods, kube.Pod{Namespace: ns, Name: name, Node: "win-1", Phase: "Running", IPs: []netip.Addr{ip.IpAddress}})
		r.dup = netip.PrefixFrom(ip.IpAddress, int(ip.PrefixLength))
	}
	block := r.p.Network.Ipams[0].Subnets[0].IpAddressPrefix
	r.orphan = netip.PrefixFrom(block.Addr().Next().Next().Next().Next().Next().Next().Next().Next().Next(), block.Bits())
	cfg := agentConfig(t, r.h, chanSource(nil))
	cfg.Kube = r.k
	cfg.Reachable = func(context.Context) bool { r.mu.Lock(); defer r.mu.Unlock(); return r.reachable }
	cfg.Now = func() time.Time { r.mu.Lock(); defer r.mu.Unlock(); return r.clock }
	if edit != nil {
		edit(&cfg, r)
	}
	a, err := applier.NewAgent(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.a = a
	a.TakePlan(planwatch.Update{Plan: r.p, Source: "test"})
	r.settle(t)
	// The CNI networks the pods (their ACLs follow), unless the HNS is
	// a restarted agent's.
	if len(r.h.Held().Endpoints) == 1 {
		cni(t, r.h, r.p, ex.cluster)
	}
	r.settle(t)
	return r
}

// settle runs passes until one waits.
func (r *auditRig) settle(t *testing.T) {
	t.Helper()
	for i := 0; r.a.Pass(ctx, 0) != applier.Wait; i++ {
		if i == 10 {
			t.Fatalf("no wait after 10 passes: %+v", r.a.Status())
		}
	}
}

// leave seeds what a CNI leaves: an endpoint whose pod is gone and a
// stale one on a live pod's address.
func (r *auditRig) leave(t *testing.T) {
	t.Helper()
	net := r.p.Network.Name
	if err := r.h.Seed(&hns.State{Endpoints: []hns.Endpoint{
		{Name: "gone_" + net, Network: net, IP: r.orphan},
		{Name: "stale_" + net, Network: net, IP: r.dup},
	}}); err != nil {
		t.Fatal(err)
	}
}

func (r *auditRig) events(reason string) []string {
	r.k.mu.Lock()
	defer r.k.mu.Unlock()
	var out []string
	for _, e := range r.k.events {
		if strings.Contains(e, " "+reason+": ") {
			out = append(out, e)
		}
	}
	return out
}

func metrics(t *testing.T, a *applier.Agent) string {
	t.Helper()
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// TestAgentAudit: what a CNI leaves (an orphan, a stale endpoint on a
// live pod's address) is found from the pass's own snapshot — a pass
// with nothing to do still reads HNS once, three enumerations — and
// reported: /status, the metrics, the Node annotation, one Event however
// many passes see it, and one Event once it is gone. Nothing is removed
// without --clean-orphans.
func TestAgentAudit(t *testing.T) {
	r := newAuditRig(t, nil)
	if st := r.a.Status(); st.Audit == nil || st.Audit.Problems != 0 {
		t.Fatalf("converged node: audit %+v, want clean", st.Audit)
	}
	r.leave(t)
	r.settle(t)
	r.h.ResetCalls()
	for range 3 {
		if next := r.a.Pass(ctx, 0); next != applier.Wait {
			t.Fatalf("pass: %s", next)
		}
	}
	if calls := r.h.Calls(); len(calls) != 9 || r.h.MutatingCalls() != 0 {
		t.Errorf("3 passes made %d calls (%d mutating), want 9 reads: one snapshot each, the audit none: %v", len(calls), r.h.MutatingCalls(), calls)
	}
	st := r.a.Status()
	if st.Audit == nil || st.Audit.Finding(audit.KindOrphan).Count != 1 || st.Audit.Finding(audit.KindDuplicateIP).Count != 1 || st.Audit.Problems != 2 {
		t.Fatalf("/status audit %+v, want the orphan and the duplicate", st.Audit)
	}
	if o := st.Audit.Finding(audit.KindOrphan).Items[0]; o.Endpoint != "gone_"+r.p.Network.Name || o.IP != r.orphan.Addr() {
		t.Errorf("orphan %+v", o)
	}
	m := metrics(t, r.a)
	for _, line := range []string{`hnsplan_hns_audit_findings{kind="orphan-endpoint"} 1`, `hnsplan_hns_audit_findings{kind="duplicate-ip"} 1`,
		`hnsplan_hns_audit_findings{kind="foreign-network"} 0`, `hnsplan_hns_load_balancers 0`} {
		if !strings.Contains(m, line+"\n") {
			t.Errorf("metrics lack %q", line)
		}
	}
	r.k.mu.Lock()
	last := r.k.statuses[len(r.k.statuses)-1]
	r.k.mu.Unlock()
	if !strings.HasPrefix(last.Audit, "2 problems: duplicate-ip 1 (") || !strings.Contains(last.Audit, "orphan-endpoint 1 (gone_") {
		t.Errorf("node annotation %q", last.Audit)
	}
	if ev := r.events("HNSAuditProblems"); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning ") {
		t.Errorf("events %q, want one HNSAuditProblems over four passes", ev)
	}
	if held := r.h.Held(); held.Endpoint("gone_"+r.p.Network.Name) == nil {
		t.Error("the orphan was removed without --clean-orphans")
	}

	// The CNI cleans up.
	for _, n := range []string{"gone_", "stale_"} {
		if err := r.h.RemoveEndpoint(n + r.p.Network.Name); err != nil {
			t.Fatal(err)
		}
	}
	r.a.Pass(ctx, 0)
	r.a.Pass(ctx, 0)
	if ev := r.events("HNSAuditResolved"); len(ev) != 1 || !strings.HasPrefix(ev[0], "Normal ") {
		t.Errorf("events %q, want one HNSAuditResolved", ev)
	}
	if m := metrics(t, r.a); !strings.Contains(m, `hnsplan_hns_audit_findings{kind="orphan-endpoint"} 0`+"\n") {
		t.Error("the orphan metric stays after the orphan went")
	}
	if st := r.a.Status(); st.Audit.Summary() != "clean" {
		t.Errorf("audit %q, want clean", st.Audit.Summary())
	}
}

// TestAgentCleanOrphans: with --clean-orphans an orphan goes once it has
// been orphaned for the age, by the record in the state directory (a
// restarted agent keeps the age), and only while the API server answers;
// the stale endpoint on a live pod's address stays.
func TestAgentCleanOrphans(t *testing.T) {
	var dir string
	r := newAuditRig(t, func(c *applier.Config, _ *auditRig) {
		c.CleanOrphans = &audit.Cleanup{Age: 10 * time.Minute, Max: 5}
		dir = c.StateDir
	})
	gone := "gone_" + r.p.Network.Name
	r.leave(t)
	r.settle(t)
	r.mu.Lock()
	r.clock = r.clock.Add(5 * time.Minute)
	r.mu.Unlock()
	r.a.Pass(ctx, 0)
	if r.h.Held().Endpoint(gone) == nil {
		t.Fatal("removed before its age")
	}

	// A restarted agent on the same state directory: the age holds.
	r2 := newAuditRig(t, func(c *applier.Config, r2 *auditRig) {
		c.CleanOrphans = &audit.Cleanup{Age: 10 * time.Minute, Max: 5}
		c.StateDir = dir
		c.HNS = r.h
		r2.h = r.h
		r2.clock = r.clock.Add(6 * time.Minute)
		r2.reachable = false
	})
	if r.h.Held().Endpoint(gone) == nil {
		t.Fatal("removed while the API server did not answer")
	}
	r2.mu.Lock()
	r2.reachable = true
	r2.mu.Unlock()
	r2.a.Pass(ctx, 0)
	held := r.h.Held()
	if held.Endpoint(gone) != nil {
		t.Error("the orphan stays past its age with every guard holding")
	}
	if held.Endpoint("stale_"+r.p.Network.Name) == nil {
		t.Error("the stale endpoint on a live pod's address was removed")
	}
	if ev := r2.events("HNSOrphanEndpointRemoved"); len(ev) != 1 || !strings.Contains(ev[0], gone) {
		t.Errorf("events %q", ev)
	}
	if st := r2.a.Status(); st.Audit.Finding(audit.KindOrphan).Count != 0 {
		t.Errorf("/status still names the removed orphan: %+v", st.Audit.Finding(audit.KindOrphan))
	}
}

// TestCleanOrphansNeedsCluster: the clean-up without the cluster's pods
// is refused at start.
func TestCleanOrphansNeedsCluster(t *testing.T) {
	cfg := agentConfig(t, hnsmem.New(), chanSource(nil))
	cfg.CleanOrphans = &audit.Cleanup{Age: time.Hour, Max: 1}
	if _, err := applier.NewAgent(cfg); err == nil || !strings.Contains(err.Error(), "never a plan's") {
		t.Errorf("NewAgent: %v", err)
	}
}
