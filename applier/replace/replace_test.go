package replace_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

const (
	netName  = "Calico"
	hostEP   = "Calico_ep"
	remoteEP = "kube-proxy-remote-172.30.0.9"
	nic      = "Ethernet"
	digest   = "sha256:5000"
)

var (
	block    = netip.MustParsePrefix("192.168.0.0/26")
	metadata = netip.MustParsePrefix("169.254.169.254/32")
	podNames = []string{"web-1_Calico", "web-2_Calico", "db-0_Calico"}
)

// want is the node's HNS with VXLAN VNI vni.
func want(vni uint32) *hns.Want {
	w := &hns.Want{PodACLs: map[netip.Addr][]plan.ACL{}}
	w.Network = hns.Network{Name: netName, Type: "Overlay", HostRoute: true, VXLANPort: 4789,
		Subnets: []hns.Subnet{{Prefix: block, Gateway: netip.MustParseAddr("192.168.0.1"), VNI: vni}}}
	for i := range 2 {
		w.Network.RemoteRoutes = append(w.Network.RemoteRoutes, hns.RemoteRoute{
			Prefix: netip.MustParsePrefix(fmt.Sprintf("192.168.1.%d/26", 64*i)), VNI: vni,
			ProviderAddress: netip.MustParseAddr(fmt.Sprintf("10.0.0.%d", 5+i)), DRMAC: fmt.Sprintf("00-15-5D-00-00-%02X", i)})
	}
	w.HostEndpoint = hns.Endpoint{Name: hostEP, Network: netName, IP: netip.PrefixFrom(netip.MustParseAddr("192.168.0.2"), 26),
		Remote: true, Policies: []plan.Policy{plan.NewPolicy(plan.ProviderAddress{ProviderAddress: netip.MustParseAddr("10.0.0.4")})}}
	// One pod's ACLs: after the replace its ACL update is the applier's,
	// not the runner's (verify tolerates it).
	w.PodACLs[podIP(0)] = []plan.ACL{{Id: "allow-80", Protocols: "6", Action: "Allow", Direction: "In", LocalPorts: "80", RuleType: "Switch", Priority: 1000}}
	return w
}

func podIP(i int) netip.Addr {
	a := block.Addr()
	for range 5 + i {
		a = a.Next()
	}
	return a
}

// env is one node: HNS, its host routing table, the cluster's drain, and
// a clock. It outlives runners: a "crash" loses the runner, not the node.
type env struct {
	t       *testing.T
	hns     *hnsmem.HNS
	guard   *guard
	routes  *replace.MemRoutes
	drainer *fakeDrainer
	clock   *fakeClock
	dir     string
	states  []kube.NodeState
	events  []replace.Event
}

func newEnv(t *testing.T, opts ...hnsmem.Option) *env {
	t.Helper()
	ctx := context.Background()
	h := hnsmem.New(opts...)
	e := &env{t: t, hns: h, dir: t.TempDir(), clock: &fakeClock{now: time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)}}
	// The node as it runs today: network with VNI 4096, the host
	// endpoint, pods, kube-proxy's remote endpoint.
	w := want(4096)
	have, _ := h.Snapshot(ctx)
	for _, op := range hns.Diff(have, w) {
		if err := h.Apply(ctx, op); err != nil {
			t.Fatalf("seed %s: %v", op, err)
		}
	}
	for i, name := range podNames {
		if err := h.AddPodEndpoint(netName, name, netip.PrefixFrom(podIP(i), 26), "", []plan.Policy{plan.NewPolicy(plan.OutBoundNAT{})}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.AddRemoteEndpoint(netName, remoteEP, netip.MustParsePrefix("172.30.0.9/32"), "02-11-AC-1E-00-09", nil); err != nil {
		t.Fatal(err)
	}
	h.ResetCalls()
	// The host's table after the first vSwitch bind: the NIC's addresses
	// on vEthernet (Ethernet), the cloud agent's metadata route, and the
	// HNS network's own route (not the host's to restore).
	gw := netip.MustParseAddr("10.0.0.1")
	e.routes = replace.NewMemRoutes(
		replace.Route{Prefix: netip.MustParsePrefix("0.0.0.0/0"), NextHop: gw, IfIndex: 7, IfAlias: "vEthernet (Ethernet)", Metric: 15, Automatic: true},
		replace.Route{Prefix: netip.MustParsePrefix("10.0.0.0/24"), IfIndex: 7, IfAlias: "vEthernet (Ethernet)", Metric: 271, Automatic: true},
		replace.Route{Prefix: netip.MustParsePrefix("10.0.0.4/32"), IfIndex: 7, IfAlias: "vEthernet (Ethernet)", Metric: 271, Automatic: true},
		replace.Route{Prefix: metadata, NextHop: gw, IfIndex: 7, IfAlias: "vEthernet (Ethernet)", Metric: 15},
		replace.Route{Prefix: netip.MustParsePrefix("127.0.0.0/8"), IfIndex: 1, IfAlias: "Loopback Pseudo-Interface 1", Metric: 331, Automatic: true},
		replace.Route{Prefix: block, IfIndex: 9, IfAlias: "vEthernet (Calico)", Metric: 271},
	)
	e.guard = &guard{t: t, inner: replace.VSwitchLosesRoutes(h, e.routes, nic)}
	e.drainer = &fakeDrainer{hns: h, pods: slices.Clone(podNames), blocked: map[string]bool{}}
	return e
}

func (e *env) journal() string { return filepath.Join(e.dir, "replace.json") }

// cfg is a fresh runner's configuration: nothing but the journal file
// carries over from an earlier runner.
func (e *env) cfg() replace.Config {
	return replace.Config{
		HNS: e.guard, Drainer: e.drainer, HostRoutes: e.routes,
		Want: want(5000), PlanDigest: digest, JournalPath: e.journal(),
		DrainTimeout: 5 * time.Minute, ProviderAddressTimeout: time.Minute, PollInterval: time.Second,
		Now: e.clock.Now, Sleep: e.clock.Sleep,
		OnState: func(s kube.NodeState) { e.states = append(e.states, s) },
		OnEvent: func(ev replace.Event) { e.events = append(e.events, ev) },
	}
}

func (e *env) run(cfg replace.Config) (replace.Result, error) {
	return replace.Run(context.Background(), cfg)
}

// assertConverged checks the end state of every replace: the new
// network, its routes and host endpoint, the metadata route restored on
// the NIC's new interface, the node uncordoned, no journal, and the
// network deleted and created exactly once, never with a pod on it.
func (e *env) assertConverged(res replace.Result, err error) {
	t := e.t
	t.Helper()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.State != kube.StateConverged || !res.Replaced {
		t.Fatalf("Run = %+v, want converged and replaced", res)
	}
	have, err := e.hns.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := have.Network(netName)
	if n == nil || n.Subnets[0].VNI != 5000 || len(n.RemoteRoutes) != 2 {
		t.Fatalf("network after replace: %+v", n)
	}
	if ep := have.Endpoint(hostEP); ep == nil || ep.Network != netName {
		t.Fatalf("host endpoint after replace: %+v", ep)
	}
	for _, op := range hns.Diff(have, want(5000)) {
		t.Errorf("left to do: %s", op)
	}
	if pods, _ := podsOn(have); len(pods) != 0 {
		t.Errorf("pod endpoints %v after the replace; the runner never creates them", pods)
	}
	e.assertMetadataRoute()
	if e.drainer.cordoned() {
		t.Error("node left cordoned")
	}
	if _, err := os.Stat(e.journal()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("journal left behind: %v", err)
	}
	if d, c := e.guard.counts(); d != 1 || c != 1 {
		t.Errorf("network deleted %d times and created %d times, want once each", d, c)
	}
	e.guard.check()
}

func (e *env) assertMetadataRoute() {
	e.t.Helper()
	routes, _ := e.routes.List(context.Background())
	for _, r := range routes {
		if r.Prefix == metadata {
			// On the interface that holds the NIC's addresses now.
			for _, o := range routes {
				if o.Prefix == netip.MustParsePrefix("10.0.0.0/24") && o.IfIndex != r.IfIndex {
					e.t.Errorf("metadata route on interface %d, the NIC's subnet on %d", r.IfIndex, o.IfIndex)
				}
			}
			return
		}
	}
	e.t.Errorf("metadata route not restored; table:\n%s", e.routes)
}

func podsOn(s *hns.State) (pods, others []string) {
	for _, e := range s.EndpointsOn(netName) {
		if e.Name == hostEP || e.Remote {
			others = append(others, e.Name)
		} else {
			pods = append(pods, e.Name)
		}
	}
	return pods, others
}

// reschedule creates the pods' endpoints again, as the CNI does once the
// node is schedulable.
func (e *env) reschedule() {
	for i, name := range podNames {
		if err := e.hns.AddPodEndpoint(netName, name, netip.PrefixFrom(podIP(i), 26), "", nil); err != nil {
			e.t.Fatal(err)
		}
	}
}

func TestHappyPath(t *testing.T) {
	e := newEnv(t)
	res, err := e.run(e.cfg())
	e.assertConverged(res, err)
	if res.Reason != "vni-changed" || res.Resumed || len(res.Restored) != 1 || res.Restored[0].Prefix != metadata {
		t.Errorf("result: %+v", res)
	}
	if !slices.Equal(e.states, []kube.NodeState{kube.StateReplacing, kube.StateConverged}) {
		t.Errorf("states %v", e.states)
	}
	if e.drainer.cordons == 0 || e.drainer.uncordons == 0 {
		t.Errorf("cordoned %d, uncordoned %d times", e.drainer.cordons, e.drainer.uncordons)
	}
	// The HNS pod subnet route on vEthernet (Calico) is HNS's, and was not
	// "restored" onto the host.
	if n := e.routes.Adds(); n != 1 {
		t.Errorf("%d host routes added, want 1 (the metadata route)", n)
	}

	// The pods come back; what is left is their ACLs, the applier's.
	e.reschedule()
	have, _ := e.hns.Snapshot(context.Background())
	for _, op := range hns.Diff(have, want(5000)) {
		if op.Kind != hns.KindACL {
			t.Errorf("after rescheduling: %s", op)
		}
	}
	// Nothing more to replace: a second Run does nothing.
	e.hns.ResetCalls()
	res, err = e.run(e.cfg())
	if err != nil || res.State != kube.StateConverged || res.Replaced || res.Reason != "" {
		t.Errorf("second Run = %+v, %v", res, err)
	}
	if n := e.hns.MutatingCalls(); n != 0 {
		t.Errorf("second Run made %d mutating calls", n)
	}
}

var errCrash = errors.New("crash")

// TestCrashAtEveryStep crashes the runner at every step, before it runs
// and after it ran but before the next is journalled, then starts a new
// runner with nothing but the journal, and checks it converges, the
// network is recreated once, and it is never deleted with a pod on it.
// With AllowDeleteWithEndpoints HNS would delete pods' endpoints along
// with the network: only the runner's own check stands between them.
func TestCrashAtEveryStep(t *testing.T) {
	for _, mode := range []struct {
		name string
		opt  hnsmem.Option
	}{{"hns-refuses", hnsmem.RefuseDeleteWithEndpoints(true)}, {"hns-allows", hnsmem.AllowDeleteWithEndpoints()}} {
		for _, step := range replace.Steps {
			for _, after := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/after=%t", mode.name, step, after), func(t *testing.T) {
					e := newEnv(t, mode.opt)
					cfg := e.cfg()
					cfg.Hook = func(s replace.Step, a bool) error {
						if s == step && a == after {
							return errCrash
						}
						return nil
					}
					_, err := e.run(cfg)
					if !errors.Is(err, errCrash) {
						t.Fatalf("first Run: %v, want the crash", err)
					}
					j, err := replace.LoadJournal(e.journal())
					if err != nil || j == nil {
						t.Fatalf("journal after the crash: %v, %v", j, err)
					}
					if j.Step != step || j.PlanDigest != digest || j.Want.Subnets[0].VNI != 5000 || j.Have.Subnets[0].VNI != 4096 {
						t.Fatalf("journal: %+v", j)
					}
					if replace.StepIndex(step) > replace.StepIndex(replace.StepSnapshotRoutes) && !slices.ContainsFunc(j.HostRoutes, func(r replace.Route) bool { return r.Prefix == metadata }) {
						t.Fatalf("journal at %s lacks the host route snapshot: %+v", step, j.HostRoutes)
					}
					res, err := e.run(e.cfg())
					e.assertConverged(res, err)
					if !res.Resumed {
						t.Error("second Run did not resume")
					}
				})
			}
		}
	}
}

// TestJournalAttempts: a step crashed at twice is journalled as started
// twice.
func TestJournalAttempts(t *testing.T) {
	e := newEnv(t)
	cfg := e.cfg()
	cfg.Hook = func(s replace.Step, after bool) error {
		if s == replace.StepDeleteNetwork {
			return errCrash
		}
		return nil
	}
	for range 2 {
		if _, err := e.run(cfg); !errors.Is(err, errCrash) {
			t.Fatal(err)
		}
	}
	j, err := replace.LoadJournal(e.journal())
	if err != nil || j.Step != replace.StepDeleteNetwork || j.Attempts != 2 || !j.StartedAt.Equal(e.clock.start()) {
		t.Fatalf("journal %+v, %v", j, err)
	}
	e.assertConverged(e.run(e.cfg()))
}

// TestPodReappearsBeforeDelete: a pod endpoint shows up again after the
// drain (the CNI re-added it; the drain lied), right before the delete,
// in the same run or after a crash. The runner must not delete the
// network, go back to the drain, and finish once the pod is evicted.
func TestPodReappearsBeforeDelete(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%t", crash), func(t *testing.T) {
			e := newEnv(t, hnsmem.AllowDeleteWithEndpoints())
			cfg := e.cfg()
			done := false
			cfg.Hook = func(s replace.Step, after bool) error {
				if s != replace.StepDeleteNetwork || after || done {
					return nil
				}
				done = true
				if err := e.hns.AddPodEndpoint(netName, "late_Calico", netip.PrefixFrom(podIP(7), 26), "", nil); err != nil {
					t.Fatal(err)
				}
				e.drainer.add("late_Calico")
				if crash {
					return errCrash
				}
				return nil
			}
			res, err := e.run(cfg)
			if crash {
				if !errors.Is(err, errCrash) {
					t.Fatal(err)
				}
				res, err = e.run(e.cfg())
			}
			e.assertConverged(res, err)
			if !slices.ContainsFunc(e.events, func(ev replace.Event) bool {
				return ev.Warning && strings.Contains(ev.Message, "late_Calico")
			}) {
				t.Errorf("no warning about the late pod: %v", e.events)
			}
		})
	}
}

// TestBlockedDrain: a PodDisruptionBudget keeps a pod; the runner reports
// blocked, deletes nothing, keeps its journal, and completes on a later
// Run once the budget allows the eviction.
func TestBlockedDrain(t *testing.T) {
	e := newEnv(t)
	e.drainer.block("db-0_Calico", true)
	res, err := e.run(e.cfg())
	var se *replace.StepError
	if !errors.Is(err, replace.ErrBlocked) || !errors.As(err, &se) || se.Step != replace.StepWaitDrained || !se.Transient() {
		t.Fatalf("Run error %v, want ErrBlocked at wait-drained", err)
	}
	if want := "replace network Calico (vni-changed): step wait-drained: drain blocked"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want prefix %q", err, want)
	}
	if res.State != kube.StateBlocked || !slices.ContainsFunc(res.Pending, func(s string) bool { return strings.Contains(s, "db-0") }) {
		t.Errorf("result %+v", res)
	}
	if n := e.hns.MutatingCalls(); n != 0 {
		t.Errorf("%d mutating HNS calls while blocked: %v", n, e.hns.Calls())
	}
	if !e.drainer.cordoned() {
		t.Error("node uncordoned while the replace waits")
	}
	j, err := replace.LoadJournal(e.journal())
	if err != nil || j == nil || j.Step != replace.StepWaitDrained {
		t.Fatalf("journal %+v, %v", j, err)
	}
	// Still blocked: still nothing deleted.
	if _, err := e.run(e.cfg()); !errors.Is(err, replace.ErrBlocked) {
		t.Fatalf("second Run: %v", err)
	}
	e.drainer.block("db-0_Calico", false)
	res, err = e.run(e.cfg())
	e.assertConverged(res, err)
	if !res.Resumed {
		t.Error("not resumed")
	}
	if !slices.Contains(e.states, kube.StateBlocked) {
		t.Errorf("states %v", e.states)
	}
}

// TestSlowDrain: pods leave only on the third eviction pass; well within
// the timeout, so no block.
func TestSlowDrain(t *testing.T) {
	e := newEnv(t)
	e.drainer.evictFrom = 3
	e.assertConverged(e.run(e.cfg()))
}

// TestHNSFaults fails every mutating call of a replace once: a transient
// failure is retried within the Run; a permanent one stops it with a
// StepError carrying the *hns.Error, and the next Run resumes.
func TestHNSFaults(t *testing.T) {
	clean := newEnv(t)
	clean.assertConverged(clean.run(clean.cfg()))
	calls := clean.hns.MutatingCalls()
	if calls < 5 {
		t.Fatalf("a replace made only %d mutating calls", calls)
	}
	for _, transient := range []bool{true, false} {
		for n := 1; n <= calls; n++ {
			t.Run(fmt.Sprintf("call%d/transient=%t", n, transient), func(t *testing.T) {
				e := newEnv(t)
				e.hns.FailCall(n, &hns.Error{Code: 0x80070102, Msg: "injected", Transient: transient})
				res, err := e.run(e.cfg())
				if transient {
					e.assertConverged(res, err)
					return
				}
				var se *replace.StepError
				var he *hns.Error
				if !errors.As(err, &se) || !errors.As(err, &he) || he.Code != 0x80070102 || se.Transient() {
					t.Fatalf("Run error %v, want a permanent StepError with the HNS error", err)
				}
				if !strings.HasPrefix(err.Error(), "replace network Calico (vni-changed): step "+string(se.Step)+": ") {
					t.Errorf("error %q", err)
				}
				if j, _ := replace.LoadJournal(e.journal()); j == nil || j.Step != se.Step {
					t.Fatalf("journal %+v after a failure at %s", j, se.Step)
				}
				e.assertConverged(e.run(e.cfg()))
			})
		}
	}
}

// TestHostRouteAddFails: the restore fails; the next Run restores.
func TestHostRouteAddFails(t *testing.T) {
	e := newEnv(t)
	e.routes.FailNextAdd(errors.New("New-NetRoute: access denied"))
	_, err := e.run(e.cfg())
	var se *replace.StepError
	if !errors.As(err, &se) || se.Step != replace.StepRestoreRoutes {
		t.Fatalf("Run error %v, want a failure at restore-routes", err)
	}
	e.assertConverged(e.run(e.cfg()))
}

// TestManual: in manual mode nothing happens until the plan's replace is
// confirmed; a confirmation of another plan does not count.
func TestManual(t *testing.T) {
	e := newEnv(t)
	confirm := filepath.Join(e.dir, "confirm")
	cfg := e.cfg()
	cfg.Mode, cfg.ConfirmPath = replace.ModeManual, confirm
	for _, c := range []string{"", "sha256:another-plan"} {
		if c != "" {
			if err := replace.Confirm(confirm, c); err != nil {
				t.Fatal(err)
			}
		}
		res, err := e.run(cfg)
		if err != nil || res.State != kube.StateReplacePending || res.Reason != "vni-changed" {
			t.Fatalf("Run (confirmation %q) = %+v, %v; want replace-pending", c, res, err)
		}
		if n := e.hns.MutatingCalls(); n != 0 || e.drainer.cordons != 0 {
			t.Fatalf("pending, yet %d HNS calls and %d cordons", n, e.drainer.cordons)
		}
		if _, err := os.Stat(e.journal()); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("pending, yet a journal: %v", err)
		}
	}
	if err := replace.Confirm(confirm, digest); err != nil {
		t.Fatal(err)
	}
	e.assertConverged(e.run(cfg))
	if _, err := os.Stat(confirm); !errors.Is(err, os.ErrNotExist) {
		t.Error("the confirmation outlived its replace")
	}
	// Confirmed flag, the other way to confirm.
	e2 := newEnv(t)
	cfg2 := e2.cfg()
	cfg2.Mode, cfg2.Confirmed = replace.ModeManual, true
	e2.assertConverged(e2.run(cfg2))
}

// TestPlanRevertedBeforeDelete: the plan goes back to VNI 4096 while the
// drain is blocked: nothing was deleted, so the runner gives the node
// back instead of replacing.
func TestPlanRevertedBeforeDelete(t *testing.T) {
	e := newEnv(t)
	e.drainer.block("db-0_Calico", true)
	if _, err := e.run(e.cfg()); !errors.Is(err, replace.ErrBlocked) {
		t.Fatal(err)
	}
	cfg := e.cfg()
	cfg.Want, cfg.PlanDigest = want(4096), "sha256:4096"
	res, err := e.run(cfg)
	if err != nil || res.State != kube.StateConverged || res.Replaced {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if e.drainer.cordoned() {
		t.Error("left cordoned")
	}
	if d, c := e.guard.counts(); d+c != 0 {
		t.Errorf("network deleted %d, created %d times", d, c)
	}
	if _, err := os.Stat(e.journal()); !errors.Is(err, os.ErrNotExist) {
		t.Error("journal left")
	}
}

func TestLoadJournalErrors(t *testing.T) {
	dir := t.TempDir()
	if j, err := replace.LoadJournal(filepath.Join(dir, "none.json")); j != nil || err != nil {
		t.Errorf("missing journal: %v, %v", j, err)
	}
	for name, body := range map[string]string{
		"torn":    `{"version":1,"step":"del`,
		"version": `{"version":2,"step":"cordon"}`,
		"step":    `{"version":1,"step":"reboot"}`,
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o600)
		if _, err := replace.LoadJournal(p); err == nil || !strings.Contains(err.Error(), "journal") {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	if _, err := replace.Run(context.Background(), replace.Config{}); err == nil {
		t.Error("Run with an empty Config succeeded")
	}
}

// --- fakes ---

// guard is an hns.Client in front of hnsmem that asserts, before each
// network delete or replace, that no pod endpoint is on the network, and
// counts the successful deletes and creates of the network.
type guard struct {
	t       *testing.T
	inner   hns.Client
	mu      sync.Mutex
	bad     []string
	deletes int
	creates int
}

func (g *guard) Features(ctx context.Context) (hns.Features, error) { return g.inner.Features(ctx) }
func (g *guard) Snapshot(ctx context.Context) (*hns.State, error)   { return g.inner.Snapshot(ctx) }

func (g *guard) Apply(ctx context.Context, op hns.Op) error {
	if op.Kind == hns.KindNetwork && op.Action != hns.Create {
		have, err := g.inner.Snapshot(ctx)
		if err != nil {
			return err
		}
		if pods, _ := podsOn(have); len(pods) > 0 {
			g.mu.Lock()
			g.bad = append(g.bad, fmt.Sprintf("%s with pod endpoints %v", op, pods))
			g.mu.Unlock()
		}
	}
	err := g.inner.Apply(ctx, op)
	if err == nil && op.Kind == hns.KindNetwork && op.Name == netName {
		g.mu.Lock()
		switch op.Action {
		case hns.Delete:
			g.deletes++
		case hns.Create:
			g.creates++
		case hns.Replace:
			g.deletes++
			g.creates++
		}
		g.mu.Unlock()
	}
	return err
}

func (g *guard) counts() (deletes, creates int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.deletes, g.creates
}

func (g *guard) check() {
	g.t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, b := range g.bad {
		g.t.Errorf("INVARIANT BROKEN: %s", b)
	}
}

// fakeDrainer is the cluster's side of a drain: evicting a pod makes the
// kubelet stop it and the CNI delete its endpoint. Pods leave from the
// evictFrom-th Evict on (0 and 1: the first); blocked pods (a
// PodDisruptionBudget) never leave.
type fakeDrainer struct {
	hns       *hnsmem.HNS
	mu        sync.Mutex
	pods      []string
	blocked   map[string]bool
	evictFrom int
	isCordon  bool
	cordons   int
	uncordons int
	evicts    int
}

func (d *fakeDrainer) Cordon(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.isCordon = true
	d.cordons++
	return nil
}

func (d *fakeDrainer) Uncordon(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.isCordon = false
	d.uncordons++
	return nil
}

func (d *fakeDrainer) Evict(ctx context.Context) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.evicts++
	if d.evicts < d.evictFrom {
		return slices.Clone(d.pods), nil
	}
	var pending []string
	for _, p := range d.pods {
		if d.blocked[p] {
			pending = append(pending, p)
			continue
		}
		if err := d.hns.RemoveEndpoint(p); err != nil && !hns.IsNotFound(err) {
			return nil, err
		}
	}
	d.pods = pending
	return slices.Clone(pending), nil
}

func (d *fakeDrainer) cordoned() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.isCordon
}

func (d *fakeDrainer) block(pod string, b bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.blocked[pod] = b
}

func (d *fakeDrainer) add(pod string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pods = append(d.pods, pod)
}

// fakeClock: Sleep moves Now forward at once, so timeouts are exact and
// tests do not wait.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	first time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.first.IsZero() {
		c.first = c.now
	}
	return c.now
}

func (c *fakeClock) start() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

// TestCrashByCancelAndPanic: the two other ways a runner dies: its
// context ends in the middle of a step, or it panics after a step.
func TestCrashByCancelAndPanic(t *testing.T) {
	t.Run("cancel", func(t *testing.T) {
		e := newEnv(t)
		ctx, cancel := context.WithCancel(context.Background())
		cfg := e.cfg()
		cfg.Hook = func(s replace.Step, after bool) error {
			if s == replace.StepDeleteNetwork && !after {
				cancel()
			}
			return nil
		}
		_, err := replace.Run(ctx, cfg)
		var se *replace.StepError
		if !errors.Is(err, context.Canceled) || !errors.As(err, &se) || se.Step != replace.StepDeleteNetwork {
			t.Fatalf("Run: %v", err)
		}
		e.assertConverged(e.run(e.cfg()))
	})
	t.Run("panic", func(t *testing.T) {
		e := newEnv(t)
		cfg := e.cfg()
		cfg.Hook = func(s replace.Step, after bool) error {
			if s == replace.StepCreateNetwork && after {
				panic("agent killed")
			}
			return nil
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			e.run(cfg)
		}()
		e.assertConverged(e.run(e.cfg()))
	})
}

// TestNetworkVanishedDuringDrain: the network is gone (a reboot took a
// NonPersistent network) while the replace waited for the drain; the
// replace goes on and creates it, with nothing to delete.
func TestNetworkVanishedDuringDrain(t *testing.T) {
	e := newEnv(t)
	e.drainer.block("db-0_Calico", true)
	if _, err := e.run(e.cfg()); !errors.Is(err, replace.ErrBlocked) {
		t.Fatal(err)
	}
	for _, n := range append(slices.Clone(podNames), remoteEP, hostEP) {
		e.hns.RemoveEndpoint(n)
	}
	if err := e.guard.Apply(context.Background(), hns.Op{Action: hns.Delete, Kind: hns.KindNetwork, Name: netName}); err != nil {
		t.Fatal(err)
	}
	e.drainer.block("db-0_Calico", false)
	e.assertConverged(e.run(e.cfg()))
}

// TestBlockedDrainStaysBlocked: a drain blocked past its timeout stays
// blocked from its start, whatever runs it next (a later pass, an agent
// restarted with a fresh runner): each Run evicts once more and reports
// blocked at once, never replacing for a moment and never after a new
// timeout. The operator's --retry (RestartDrain) gives a new timeout, and
// a drain that ends meanwhile goes on.
func TestBlockedDrainStaysBlocked(t *testing.T) {
	e := newEnv(t)
	e.drainer.block("db-0_Calico", true)
	start := e.clock.Now()
	if _, err := e.run(e.cfg()); !errors.Is(err, replace.ErrBlocked) {
		t.Fatalf("first Run: %v", err)
	}
	j, err := replace.LoadJournal(e.journal())
	if err != nil || j == nil || j.DrainSince.Before(start) || j.DrainSince.After(start.Add(time.Second)) {
		t.Fatalf("journal %+v, %v: want drainSince at the drain's start %v", j, err, start)
	}
	since := j.DrainSince
	for pass := range 3 { // later passes, each a fresh runner as after a restart
		e.states = nil
		evicts, before := e.drainer.evicts, e.clock.Now()
		res, err := e.run(e.cfg())
		if !errors.Is(err, replace.ErrBlocked) || res.State != kube.StateBlocked {
			t.Fatalf("pass %d: Run = %+v, %v; want blocked", pass, res, err)
		}
		if waited := e.clock.Now().Sub(before); waited >= time.Minute {
			t.Errorf("pass %d waited %v for a drain blocked since %v: want blocked at once", pass, waited, since)
		}
		if e.drainer.evicts == evicts {
			t.Errorf("pass %d did not evict again", pass)
		}
		if slices.Contains(e.states, kube.StateReplacing) {
			t.Errorf("pass %d reported states %v: replacing hides the halt", pass, e.states)
		}
		if !strings.Contains(err.Error(), "since "+since.UTC().Format(time.RFC3339)) {
			t.Errorf("pass %d error %q does not say since when", pass, err)
		}
		e.clock.Sleep(context.Background(), 20*time.Second)
	}
	// --retry: a new timeout, waited in full; the node is cordoned again
	// (an operator's let-go of it, if any, goes: kube.Client.Cordon).
	cfg := e.cfg()
	cfg.RestartDrain = func() bool { return true }
	before, cordons := e.clock.Now(), e.drainer.cordons
	if _, err := e.run(cfg); !errors.Is(err, replace.ErrBlocked) {
		t.Fatalf("Run after --retry: %v", err)
	}
	if e.drainer.cordons != cordons+1 {
		t.Errorf("after --retry: %d cordons, want one more than %d", e.drainer.cordons, cordons)
	}
	if waited := e.clock.Now().Sub(before); waited < 5*time.Minute {
		t.Errorf("after --retry the drain waited %v, want a new timeout of 5m", waited)
	}
	if j, _ := replace.LoadJournal(e.journal()); j == nil || !j.DrainSince.After(since) {
		t.Errorf("journal after --retry: %+v; want a new drainSince", j)
	}
	// The budget allows it: the next pass goes on and converges.
	e.drainer.block("db-0_Calico", false)
	e.assertConverged(e.run(e.cfg()))
}
