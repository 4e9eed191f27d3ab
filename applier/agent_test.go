package applier_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// fakeKube is the cluster as the agent sees it, without an API server:
// caches it is given, and what the agent writes, recorded.
type fakeKube struct {
	mu       sync.Mutex
	synced   bool
	node     kube.Node
	pods     []kube.Pod
	statuses []kube.Status
	tunnels  []string // "mac vtep"
	events   []string // "type reason: message"
	changes  chan struct{}
}

func (k *fakeKube) Synced() bool                          { return k.synced }
func (k *fakeKube) NodeName() string                      { return k.node.Name }
func (k *fakeKube) Pods() []kube.Pod                      { return k.pods }
func (k *fakeKube) Namespaces() []kube.Namespace          { return nil }
func (k *fakeKube) Nodes() []kube.Node                    { return []kube.Node{k.node} }
func (k *fakeKube) BlockAffinities() []kube.BlockAffinity { return nil }
func (k *fakeKube) TunnelMACs() map[string]string         { return map[string]string{} }
func (k *fakeKube) Start(context.Context)                 {}
func (k *fakeKube) Changes() <-chan struct{}              { return k.changes }
func (k *fakeKube) Cordon(context.Context) error          { return nil }
func (k *fakeKube) Uncordon(context.Context) error        { return nil }
func (k *fakeKube) Evict(context.Context) ([]string, error) {
	return nil, nil
}

func (k *fakeKube) Node() (kube.Node, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.node, k.synced
}

func (k *fakeKube) SetStatus(_ context.Context, st kube.Status) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.statuses = append(k.statuses, st)
	return nil
}

// PublishTunnel records the values and, as the API server and the cache
// would, shows them on the node.
func (k *fakeKube) PublishTunnel(_ context.Context, mac string, vtep netip.Addr) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.tunnels = append(k.tunnels, mac+" "+vtep.String())
	k.node.TunnelMAC, k.node.TunnelAddr = mac, vtep
	return nil
}

func (k *fakeKube) Event(eventtype, reason, message string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.events = append(k.events, eventtype+" "+reason+": "+message)
}

// chanSource is a plan source that delivers the plans it is sent.
type chanSource chan *plan.NodePlan

func (s chanSource) Run(ctx context.Context, updates chan<- planwatch.Update) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case p := <-s:
			select {
			case updates <- planwatch.Update{Plan: p, Source: "test"}:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// agentConfig is a valid Config for win-1 of calico-vxlan on h.
func agentConfig(t *testing.T, h hns.Client, src planwatch.Source) applier.Config {
	return applier.Config{Node: "win-1", HNS: h, Plans: src, StateDir: t.TempDir(), HostRoutes: replace.NewMemRoutes(),
		Listen: "127.0.0.1:0"}
}

// mgmt is the host endpoint's ProviderAddress in p: the in-memory HNS
// plays the node with this management address.
func mgmt(t testing.TB, p *plan.NodePlan) netip.Addr {
	pa, ok := plan.Find[plan.ProviderAddress](p.HostEndpoint.Policies)
	if !ok {
		t.Fatal("the plan's host endpoint has no ProviderAddress")
	}
	return pa.ProviderAddress
}

// TestAgentRequeuesAfterSimulatedCNI: the agent's pass says what comes
// next: verify after ops, requeue once the simulated CNI networked pods
// (with no op counted for them), then wait; /status never counts the
// CNI's pods as ops.
func TestAgentRequeuesAfterSimulatedCNI(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	h := hnsmem.New(hnsmem.ManagementAddress(mgmt(t, p)))
	cfg := agentConfig(t, h, chanSource(nil))
	networked := 0
	cfg.CNI = func(_ context.Context, q *plan.NodePlan) (int, error) {
		if q != p {
			t.Errorf("the CNI was given plan %s, want %s", q.Digest, p.Digest)
		}
		if networked > 0 {
			return 0, nil
		}
		networked = cni(t, h, p, ex.cluster)
		return networked, nil
	}
	a, err := applier.NewAgent(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if next := a.Pass(ctx, 0); next != applier.Wait || a.Status().State != kube.StateWaiting {
		t.Fatalf("no plan: %s, %+v; want wait, state waiting", next, a.Status())
	}
	a.TakePlan(planwatch.Update{Plan: p, Source: "test"})
	var nexts []applier.Next
	var ops []int
	for range 4 {
		nexts = append(nexts, a.Pass(ctx, 0))
		ops = append(ops, a.Status().Ops)
	}
	// The network; the verify pass, after which the CNI networks 2 pods;
	// their ACLs (pods are the plan's: no cluster); the verify pass.
	want := []applier.Next{applier.Requeue, applier.Requeue, applier.Requeue, applier.Wait}
	if !slices.Equal(nexts, want) || ops[1] != 0 || ops[2] != 2 || ops[3] != 0 {
		t.Errorf("passes said %v with ops %v; want %v, and 0 ops where the CNI networked pods", nexts, ops, want)
	}
	if networked != 2 {
		t.Errorf("the CNI networked %d pods, want 2", networked)
	}
	if st := a.Status(); st.State != kube.StateConverged || st.Applied != p.Digest || st.Plan != p.Digest {
		t.Errorf("status %+v; want converged at %s", st, p.Digest)
	}
}

// TestAgentBacksOffOnError: a pass that fails backs off; /status says
// error; the next pass resumes.
func TestAgentBacksOffOnError(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	h := hnsmem.New()
	h.FailCall(1, &hns.Error{Call: "injected", Code: hns.CodeInvalidPolicy, Msg: "refused"})
	a, err := applier.NewAgent(agentConfig(t, h, chanSource(nil)))
	if err != nil {
		t.Fatal(err)
	}
	a.TakePlan(planwatch.Update{Plan: p, Source: "test"})
	if next := a.Pass(ctx, 0); next != applier.Backoff || a.Status().State != kube.StateError || !strings.Contains(a.Status().Error, "refused") {
		t.Fatalf("failing pass: %s, %+v; want backoff, state error", next, a.Status())
	}
	if next := a.Pass(ctx, 1); next != applier.Requeue || a.Status().State != kube.StateConverged {
		t.Fatalf("next pass: %s, %+v; want requeue (verify), converged", next, a.Status())
	}
	if next := a.Pass(ctx, 0); next != applier.Wait {
		t.Fatalf("verify pass: %s; want wait", next)
	}
}

// TestAgentWaitsForCaches: with a cluster whose caches are not synced,
// the pass backs off and changes nothing.
func TestAgentWaitsForCaches(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	h := hnsmem.New()
	cfg := agentConfig(t, h, chanSource(nil))
	cfg.Kube = &fakeKube{node: kube.Node{Name: "win-1"}}
	a, err := applier.NewAgent(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.TakePlan(planwatch.Update{Plan: ex.plans["win-1"], Source: "test"})
	if next := a.Pass(ctx, 0); next != applier.Backoff || h.MutatingCalls() != 0 {
		t.Errorf("caches syncing: %s, %d mutating calls; want backoff, none", next, h.MutatingCalls())
	}
}

// TestNextAfter is the requeue policy of a reconciler pass.
func TestNextAfter(t *testing.T) {
	for _, tt := range []struct {
		st   applier.Status
		err  error
		want applier.Next
	}{
		{applier.Status{State: kube.StateConverged}, nil, applier.Wait},
		{applier.Status{State: kube.StateConverged, Ops: 3}, nil, applier.Requeue},
		{applier.Status{State: kube.StateError, Ops: 2}, errors.New("HNS refused"), applier.Backoff},
		{applier.Status{State: kube.StateBlocked}, nil, applier.Backoff},
		{applier.Status{State: kube.StateReplacePending}, nil, applier.Wait},
		{applier.Status{State: kube.StateReadbackMismatch}, nil, applier.Wait},
		{applier.Status{State: kube.StateReadbackMismatch, Ops: 1}, nil, applier.Requeue},
		{applier.Status{State: kube.StateWaiting}, nil, applier.Wait},
	} {
		if got := applier.NextAfter(tt.st, tt.err); got != tt.want {
			t.Errorf("NextAfter(%+v, %v) = %s, want %s", tt.st, tt.err, got, tt.want)
		}
	}
}

// TestAgentPublishesTunnel: once HNS has the Overlay network up at the
// node's address, the agent publishes its DrMacAddress and the block's
// .1, with the node's status; a pass with the same values publishes
// nothing again.
func TestAgentPublishesTunnel(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	h := hnsmem.New(hnsmem.ManagementAddress(mgmt(t, p)))
	k := &fakeKube{synced: true, node: kube.Node{Name: "win-1"}}
	cfg := agentConfig(t, h, chanSource(nil))
	cfg.Kube = k
	a, err := applier.NewAgent(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.TakePlan(planwatch.Update{Plan: p, Source: "test"})
	for a.Pass(ctx, 0) != applier.Wait {
	}
	have, _ := h.Snapshot(ctx)
	n := have.Network(p.Network.Name)
	block := p.Network.Ipams[0].Subnets[0].IpAddressPrefix
	if n == nil || n.DRMAC == "" || n.Subnets[0].Gateway != block.Addr().Next() {
		t.Fatalf("HNS network %+v; want a DrMacAddress and gateway %s", n, block.Addr().Next())
	}
	want := []string{n.DRMAC + " " + block.Addr().Next().String()}
	if !slices.Equal(k.tunnels, want) {
		t.Errorf("published %q, want %q", k.tunnels, want)
	}
	last := k.statuses[len(k.statuses)-1]
	if last.State != kube.StateConverged || last.Digest != p.Digest || last.Error != "" {
		t.Errorf("last node status %+v; want converged at %s", last, p.Digest)
	}
	a.Pass(ctx, 0)
	if len(k.tunnels) != 1 {
		t.Errorf("published again: %q", k.tunnels)
	}

	// A network at another address is not this node's tunnel.
	other := hnsmem.New(hnsmem.ManagementAddress(netip.MustParseAddr("10.99.0.1")))
	for _, op := range hns.Diff(&hns.State{}, mustWant(t, p)) {
		if err := other.Apply(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	k2 := &fakeKube{synced: true, node: kube.Node{Name: "win-1"}}
	if err := applier.PublishTunnel(ctx, k2, other, p); err != nil || len(k2.tunnels) != 0 {
		t.Errorf("PublishTunnel with another ProviderAddress: %v, published %q; want nothing", err, k2.tunnels)
	}
}

func mustWant(t *testing.T, p *plan.NodePlan) *hns.Want {
	w, _, err := applier.WantOf(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestAgentRunUntilConverged: Run returns nil once HNS matches the plan
// the source delivered; without UntilConverged it keeps running.
func TestAgentRunUntilConverged(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	for _, until := range []bool{true, false} {
		h := hnsmem.New()
		src := make(chanSource, 1)
		src <- p
		cfg := agentConfig(t, h, src)
		cfg.UntilConverged = until
		a, err := applier.NewAgent(cfg)
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = a.Run(runCtx)
		stopped := runCtx.Err() != nil
		cancel()
		if err != nil || stopped == until || a.Status().Applied != p.Digest {
			t.Errorf("UntilConverged %v: Run = %v, ran until the deadline %v, status %+v; want nil, returning by itself only with UntilConverged", until, err, stopped, a.Status())
		}
	}
}

// TestAgentRunStopsOnReadbackMismatch: with UntilConverged, HNS that
// reads back otherwise than written ends Run with the pass's error, and
// the mismatch is an Event once.
func TestAgentRunStopsOnReadbackMismatch(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	h := hnsmem.New(hnsmem.WithQuirks(hnsmem.QuirkVSIDEchoDiffers))
	src := make(chanSource, 1)
	src <- p
	k := &fakeKube{synced: true, node: kube.Node{Name: "win-1"}}
	cfg := agentConfig(t, h, src)
	cfg.UntilConverged, cfg.Kube = true, k
	a, err := applier.NewAgent(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err = a.Run(runCtx)
	if err == nil || !strings.HasPrefix(err.Error(), "hns-readback-mismatch: ") || runCtx.Err() != nil {
		t.Fatalf("Run = %v; want the pass's hns-readback-mismatch error before the deadline", err)
	}
	var said []string
	for _, e := range k.events {
		if strings.HasPrefix(e, "Warning HNSReadbackMismatch: ") {
			said = append(said, e)
		}
	}
	if len(said) != 1 {
		t.Errorf("mismatch Events %q, want one", said)
	}
}

// TestConfigValidate: every missing field is named with the flag that
// sets it; a negative duration is refused.
func TestConfigValidate(t *testing.T) {
	err := applier.Config{Resync: -time.Second}.Validate()
	if err == nil {
		t.Fatal("the zero Config validates")
	}
	for _, want := range []string{"Config.Node is empty: give --node", "Config.HNS is nil: give --hns", "Config.Plans is nil: give --plan FILE, or --plan-source configmap",
		"Config.StateDir is empty: give --state-dir", "Config.HostRoutes is nil", "--resync -1s is negative"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v\nlacks %q", err, want)
		}
	}
	if _, err := applier.NewAgent(applier.Config{}); err == nil {
		t.Error("NewAgent accepts the zero Config")
	}
	if err := agentConfig(t, hnsmem.New(), chanSource(nil)).Validate(); err != nil {
		t.Errorf("a complete Config: %v", err)
	}
}

// TestClusterOf: the caches as a pass reads them.
func TestClusterOf(t *testing.T) {
	k := &fakeKube{node: kube.Node{Name: "win-1", Addresses: []kube.NodeAddress{{Type: "ExternalIP", Addr: netip.MustParseAddr("20.0.0.1")},
		{Type: "InternalIP", Addr: netip.MustParseAddr("fd00::1")}, {Type: "InternalIP", Addr: netip.MustParseAddr("10.0.0.4")}}}}
	k.pods = []kube.Pod{
		{Namespace: "web", Name: "a", Node: "win-1", IPs: []netip.Addr{netip.MustParseAddr("fd00::5"), netip.MustParseAddr("192.168.0.5")},
			Ports: []kube.Port{{Name: "http", Port: 80}, {Name: "dns", Port: 53, Protocol: "UDP"}, {Port: 9000}}, Labels: map[string]string{"app": "web"}},
		{Namespace: "kube-system", Name: "proxy", Node: "win-1", HostNetwork: true, IPs: []netip.Addr{netip.MustParseAddr("10.0.0.4")}},
		{Namespace: "web", Name: "pending", Node: "win-1"},
	}
	if _, ok := applier.ClusterOf(k); ok {
		t.Fatal("ClusterOf of caches not synced")
	}
	k.synced = true
	c, ok := applier.ClusterOf(k)
	if !ok || len(c.Pods) != 1 {
		t.Fatalf("ClusterOf = %+v, %v; want one pod (not the host network's, not the one without an address)", c, ok)
	}
	pod := c.Pods[0]
	if pod.IP != netip.MustParseAddr("192.168.0.5") || pod.ServiceAccount != "default" || c.PodNode(pod) != "win-1" || len(pod.Ports) != 2 ||
		pod.Ports[0].Protocol != 6 || pod.Ports[1].Protocol != 17 {
		t.Errorf("pod %+v (node %q); want its IPv4, the default service account, its named ports TCP and UDP", pod, c.PodNode(pod))
	}
	if c.NodeAddr != netip.MustParseAddr("10.0.0.4") {
		t.Errorf("NodeAddr %s, want the IPv4 InternalIP", c.NodeAddr)
	}
}
