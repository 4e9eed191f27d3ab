package applier_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/policy"
)

var ctx = context.Background()

// podNodes is a Cluster's PodNode for the nodes of pods by key.
func podNodes(nodes map[string]string) func(*acl.Pod) string {
	return func(p *acl.Pod) string { return nodes[p.Key()] }
}

// podNodesOf are the nodes of c's pods by key.
func podNodesOf(c *applier.Cluster) map[string]string {
	out := map[string]string{}
	for _, p := range c.Pods {
		if n := c.PodNode(p); n != "" {
			out[p.Key()] = n
		}
	}
	return out
}

// compiled is an intent compiled as `hnsplan compile` does, with the
// cluster its inventory describes, as the agent's informers would see it.
type compiled struct {
	plans   map[string]*plan.NodePlan
	cluster *applier.Cluster
}

func compile(t testing.TB, dir string, inventory ...string) compiled {
	t.Helper()
	res, findings, err := compiler.Build(dir, compiler.Options{Inventory: inventory})
	if err != nil {
		t.Fatal(err)
	}
	if findings.HasErrors() || !res.Compiled() {
		var b strings.Builder
		_ = findings.WriteText(&b, false)
		t.Fatalf("%s is invalid:\n%s", dir, b.String())
	}
	if _, err := compiler.EncodePlans(res.Plans); err != nil { // sets the digests
		t.Fatal(err)
	}
	in := res.Intent
	c := compiled{plans: map[string]*plan.NodePlan{}, cluster: &applier.Cluster{
		Pods: policy.Pods(&in.Inventory), Namespaces: policy.NamespaceLabels(in), TunnelMACs: map[string]string{}}}
	for _, p := range res.Plans {
		c.plans[p.Node] = p
	}
	nodes := map[string]string{}
	for _, p := range in.Inventory.Pods {
		nodes[p.Namespace+"/"+p.Name] = p.Spec.NodeName
	}
	c.cluster.PodNode = podNodes(nodes)
	for _, n := range in.Inventory.Nodes {
		if mac := n.Annotations["projectcalico.org/VXLANTunnelMACAddr"]; mac != "" {
			c.cluster.TunnelMACs[n.Name] = strings.ToUpper(strings.ReplaceAll(mac, ":", "-"))
		}
	}
	return c
}

// cni creates the node's pod endpoints as the CNI does: with the
// template's policies and no ACLs.
func cni(t testing.TB, h *hnsmem.HNS, p *plan.NodePlan, c *applier.Cluster) int {
	t.Helper()
	n := 0
	for _, pod := range c.Pods {
		if c.PodNode(pod) != p.Node {
			continue
		}
		bits := p.Network.Ipams[0].Subnets[0].IpAddressPrefix.Bits()
		if err := h.AddPodEndpoint(p.Network.Name, fmt.Sprintf("%s_%s", pod.Name, p.Network.Name), netip.PrefixFrom(pod.IP, bits), compiler.PodMAC(pod.IP), p.PodEndpoint.Policies); err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// TestPassMatchesCompileTime: the agent renders the live pods' ACLs
// exactly as the compiler rendered them from the same inventory, so a
// node converged by the agent matches `hnsplan plan --inventory`.
func TestPassMatchesCompileTime(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	h := hnsmem.New()
	r := &applier.Reconciler{HNS: h}
	r.SetPlan(p)
	if st, err := r.Pass(ctx, ex.cluster); err != nil || st.State != kube.StateConverged || len(st.Pending) != 0 {
		t.Fatalf("first pass: %+v, %v", st, err)
	}
	if n := cni(t, h, p, ex.cluster); n != 2 {
		t.Fatalf("%d pods on win-1, want 2", n)
	}
	st, err := r.Pass(ctx, ex.cluster)
	if err != nil || st.Ops != 2 || st.Digest != p.Digest {
		t.Fatalf("second pass: %+v, %v; want 2 ACL updates", st, err)
	}
	have, _ := h.Snapshot(ctx)
	if len(p.Endpoints) != 2 {
		t.Fatalf("the plan renders %d endpoints, want 2", len(p.Endpoints))
	}
	for _, ep := range p.Endpoints { // rendered at compile time
		var want []plan.ACL
		for _, pol := range ep.Policies {
			if a, ok := pol.Settings.(plan.ACL); ok {
				want = append(want, a)
			}
		}
		var got []plan.ACL
		for _, e := range have.EndpointsOn("Calico") {
			if e.IP.Addr() == ep.IpConfigurations[0].IpAddress {
				got = e.ACLs
			}
		}
		if diff := cmp.Diff(hns.CanonicalACLs(want), got); diff != "" {
			t.Errorf("pod %s: live ACLs differ from the compiled ones (-compiled +live):\n%s", ep.Pod, diff)
		}
	}
	// A restart with nothing changed: a new reconciler, no mutating call.
	h.ResetCalls()
	r2 := &applier.Reconciler{HNS: h}
	r2.SetPlan(p)
	if st, err := r2.Pass(ctx, ex.cluster); err != nil || st.Ops != 0 || h.MutatingCalls() != 0 {
		t.Errorf("after a restart: %+v, %v, %d mutating calls", st, err, h.MutatingCalls())
	}
}

// withVNI is p with its VXLAN VNI changed (network and routes), under the
// digest "sha256:moved"; p is left as it was.
func withVNI(p *plan.NodePlan, vni uint32) *plan.NodePlan {
	moved := *p
	moved.Network.Ipams = slices.Clone(p.Network.Ipams)
	moved.Network.Ipams[0].Subnets = slices.Clone(p.Network.Ipams[0].Subnets)
	moved.Network.Ipams[0].Subnets[0].Policies = []plan.Policy{plan.NewPolicy(plan.VSID{IsolationId: vni})}
	if p.Routes != nil {
		routes := *p.Routes
		routes.IsolationId = vni
		moved.Routes = &routes
	}
	moved.Digest = "sha256:moved"
	return &moved
}

// TestReplaceWithoutReplacer: a VNI change with no replacer is reported
// as replace-pending and changes nothing.
func TestReplaceWithoutReplacer(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	h := hnsmem.New()
	r := &applier.Reconciler{HNS: h}
	r.SetPlan(p)
	if _, err := r.Pass(ctx, ex.cluster); err != nil {
		t.Fatal(err)
	}
	moved := withVNI(p, 5000)
	r.SetPlan(moved)
	h.ResetCalls()
	st, err := r.Pass(ctx, ex.cluster)
	if err != nil || st.State != kube.StateReplacePending || !strings.Contains(st.LastError, "vni-changed") || st.Digest != p.Digest {
		t.Errorf("status %+v, %v; want replace-pending, still at the old digest", st, err)
	}
	if h.MutatingCalls() != 0 {
		t.Errorf("%d mutating calls; want none", h.MutatingCalls())
	}
}

// TestMetrics: a pass counts its ops and reports the applied digest.
func TestMetrics(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	reg := prometheus.NewRegistry()
	r := &applier.Reconciler{HNS: hnsmem.New(), Metrics: applier.NewMetrics(reg)}
	r.SetPlan(ex.plans["win-1"])
	if _, err := r.Pass(ctx, ex.cluster); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			got[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	for k, v := range map[string]float64{
		"hnsplan_hns_ops_total{action=create,kind=network,result=ok}":   1,
		"hnsplan_hns_ops_total{action=create,kind=routes,result=ok}":    1, // 3 routes, one batched call
		"hnsplan_hns_ops_total{action=create,kind=route,result=ok}":     0,
		"hnsplan_hns_ops_total{action=create,kind=endpoint,result=ok}":  1,
		"hnsplan_applied_plan{digest=" + ex.plans["win-1"].Digest + "}": 1,
		"hnsplan_drift_ops{}": 5,
	} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// writeIntent writes a one-Windows-node intent with pods pods (5 of
// them app=api) and a policy allowing port to app=api.
func writeIntent(t testing.TB, dir string, pods, port int) (string, string) {
	t.Helper()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "manifests"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "cluster.cue"), []byte(`package cluster

cluster: {
	name:       "perf"
	datastore:  "kubernetes"
	networking: "calico-vxlan"
	serviceCIDRs: ["10.96.0.0/12"]
	ipam: strictAffinity: true
	vxlan: vni: 4096
	pools: default: {cidr: "192.168.0.0/16", blockSize: 25}
	nodes: {
		"linux-1": {os: "linux", address: "10.240.0.10/24"}
		"win-1": {os: "windows", address: "10.240.0.21/24", maxPods: 120, windows: build: "10.0.20348.1000"}
	}
}
`), 0o644))
	must(os.WriteFile(filepath.Join(dir, "manifests", "policy.yaml"), []byte(fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: api, namespace: shop}
spec:
  podSelector: {matchLabels: {app: api}}
  ingress:
  - from: [{podSelector: {matchLabels: {app: web}}}]
    ports: [{protocol: TCP, port: %d}]
`, port)), 0o644))
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Namespace, metadata: {name: shop, labels: {kubernetes.io/metadata.name: shop}}}\n")
	for i := range pods {
		app := "web"
		if i < 5 {
			app = "api"
		}
		fmt.Fprintf(&b, "- {apiVersion: v1, kind: Pod, metadata: {name: p%03d, namespace: shop, labels: {app: %s}}, spec: {nodeName: win-1, containers: [{name: c, image: x}]}, status: {podIP: 192.168.0.%d}}\n", i, app, 3+i)
	}
	inv := filepath.Join(t.TempDir(), "inventory.yaml")
	must(os.WriteFile(inv, []byte(b.String()), 0o644))
	return dir, inv
}

// TestPolicyEditTouchesOnlyItsEndpoints: a policy edit that changes the
// ACLs of 5 of 110 endpoints makes exactly 5 ACL updates (Felix sends
// all of them).
func TestPolicyEditTouchesOnlyItsEndpoints(t *testing.T) {
	dir, inv := writeIntent(t, t.TempDir(), 110, 80)
	before := compile(t, dir, inv)
	h := hnsmem.New()
	r := &applier.Reconciler{HNS: h}
	p := before.plans["win-1"]
	r.SetPlan(p)
	if _, err := r.Pass(ctx, before.cluster); err != nil {
		t.Fatal(err)
	}
	cni(t, h, p, before.cluster)
	if st, err := r.Pass(ctx, before.cluster); err != nil || st.Ops != 110 {
		t.Fatalf("programming 110 pods: %+v, %v", st, err)
	}

	dir, _ = writeIntent(t, dir, 110, 8080)
	after := compile(t, dir, inv)
	r.SetPlan(after.plans["win-1"])
	h.ResetCalls()
	if _, err := r.Pass(ctx, after.cluster); err != nil {
		t.Fatal(err)
	}
	var updated []string
	for _, c := range h.Calls() {
		if c.Method == "hcnModifyEndpoint" {
			updated = append(updated, c.Object)
		}
	}
	slices.Sort(updated)
	if h.MutatingCalls() != 5 || !slices.Equal(updated, []string{"p000_Calico", "p001_Calico", "p002_Calico", "p003_Calico", "p004_Calico"}) {
		t.Errorf("%d mutating calls, ACL updates of %v; want the 5 app=api endpoints", h.MutatingCalls(), updated)
	}
}

// drainer is the kubelet and the CNI of a drain: an eviction removes the
// node's pod endpoints from HNS.
type drainer struct {
	h                  *hnsmem.HNS
	cordoned, evicted  bool
	uncordons, cordons int
}

func (d *drainer) Cordon(context.Context) error   { d.cordoned = true; d.cordons++; return nil }
func (d *drainer) Uncordon(context.Context) error { d.cordoned = false; d.uncordons++; return nil }
func (d *drainer) Evict(ctx context.Context) ([]string, error) {
	d.evicted = true
	have, err := d.h.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	for _, e := range have.Endpoints {
		if !e.Remote && e.Name != "Calico_ep" && e.Network == "Calico" {
			if err := d.h.RemoveEndpoint(e.Name); err != nil {
				return nil, err
			}
		}
	}
	return nil, nil
}

// TestPassReplaces: a VNI change goes through the drain replacer, and the
// same pass then leaves HNS matching the plan; the pods come back and
// their ACLs are programmed at the next pass.
func TestPassReplaces(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	h := hnsmem.New()
	d := &drainer{h: h}
	r := &applier.Reconciler{HNS: h, Replacer: &applier.DrainReplacer{Base: replace.Config{
		HNS: h, Drainer: d, HostRoutes: replace.NewMemRoutes(), JournalPath: filepath.Join(t.TempDir(), "journal.json"),
		Sleep: func(context.Context, time.Duration) error { return nil }}}}
	r.SetPlan(p)
	if _, err := r.Pass(ctx, ex.cluster); err != nil {
		t.Fatal(err)
	}
	cni(t, h, p, ex.cluster)
	if _, err := r.Pass(ctx, ex.cluster); err != nil {
		t.Fatal(err)
	}

	moved := withVNI(p, 5000)
	r.SetPlan(moved)
	st, err := r.Pass(ctx, ex.cluster)
	if err != nil || st.State != kube.StateConverged || st.Digest != "sha256:moved" {
		t.Fatalf("replace pass: %+v, %v", st, err)
	}
	if !d.evicted || d.cordoned || d.uncordons != 1 {
		t.Errorf("drain: %+v; want evicted and uncordoned once", d)
	}
	have, _ := h.Snapshot(ctx)
	if n := have.Network("Calico"); n == nil || n.Subnets[0].VNI != 5000 || len(n.RemoteRoutes) != 3 {
		t.Fatalf("network after the replace:\n%s", h.String())
	}
	cni(t, h, moved, ex.cluster) // the pods are scheduled again
	if st, err := r.Pass(ctx, ex.cluster); err != nil || st.Ops != 2 {
		t.Errorf("after the pods return: %+v, %v; want their 2 ACL updates", st, err)
	}
	h.ResetCalls()
	if st, err := r.Pass(ctx, ex.cluster); err != nil || st.Ops != 0 || h.MutatingCalls() != 0 {
		t.Errorf("then: %+v, %v, %d mutating calls; want none", st, err, h.MutatingCalls())
	}
}

// TestLiveRoutes: routes the plan leaves to the live cluster (a Linux
// node's block, tunnel MACs) are made from the cluster, and equal what a
// compile with the same facts as inventory gives.
func TestLiveRoutes(t *testing.T) {
	bare := compile(t, "../examples/calico-vxlan") // no inventory: cp-1's block unknown
	withInv := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := bare.plans["win-1"]
	c := &applier.Cluster{
		TunnelMACs: withInv.cluster.TunnelMACs,
		Blocks:     map[string][]netip.Prefix{"cp-1": {netip.MustParsePrefix("192.168.1.0/26")}},
		NodeAddrs:  map[string]netip.Addr{"cp-1": netip.MustParseAddr("10.240.0.10")},
	}
	got, pending, err := applier.WantOf(p, c)
	if err != nil || len(pending) != 0 {
		t.Fatalf("WantOf: pending %q, %v", pending, err)
	}
	want, _, _ := applier.WantOf(withInv.plans["win-1"], withInv.cluster)
	sortRoutes := func(rs []hns.RemoteRoute) []string {
		var out []string
		for _, r := range rs {
			out = append(out, fmt.Sprintf("%s %d %s %s", r.Prefix, r.VNI, r.ProviderAddress, r.DRMAC))
		}
		slices.Sort(out)
		return out
	}
	if diff := cmp.Diff(sortRoutes(want.Network.RemoteRoutes), sortRoutes(got.Network.RemoteRoutes)); diff != "" {
		t.Errorf("live routes differ from the inventory's (-inventory +live):\n%s", diff)
	}

	delete(c.TunnelMACs, "cp-1")
	if _, pending, _ := applier.WantOf(p, c); len(pending) != 1 || !strings.Contains(pending[0], "192.168.1.0/26") {
		t.Errorf("without cp-1's MAC: pending %q", pending)
	}
	c.Blocks = nil
	if _, pending, _ := applier.WantOf(p, c); len(pending) != 1 || !strings.Contains(pending[0], "cp-1: it holds no block") {
		t.Errorf("without cp-1's block: pending %q", pending)
	}
}

// TestGC: a pod endpoint no pod explains is removed after the grace
// period, only while the API server answers; kube-proxy's remote
// endpoints, other networks and explained pods are never touched.
func TestGC(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	h := hnsmem.New()
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	reachable := true
	gc := &applier.GC{Grace: 10 * time.Minute, Now: func() time.Time { return now }, Reachable: func(context.Context) bool { return reachable }}
	r := &applier.Reconciler{HNS: h, GC: gc}
	r.SetPlan(p)
	if _, err := r.Pass(ctx, ex.cluster); err != nil {
		t.Fatal(err)
	}
	cni(t, h, p, ex.cluster)
	if err := h.AddPodEndpoint("Calico", "leaked_Calico", netip.MustParsePrefix("192.168.0.40/26"), "", nil); err != nil {
		t.Fatal(err)
	}
	if err := h.AddRemoteEndpoint("Calico", "kube-proxy-remote", netip.MustParsePrefix("192.168.0.70/32"), "02-11-22-33-44-55", nil); err != nil {
		t.Fatal(err)
	}
	if err := h.AddNetwork(hns.Network{Name: "nat", Type: "NAT", Subnets: []hns.Subnet{{Prefix: netip.MustParsePrefix("172.16.0.0/24"), Gateway: netip.MustParseAddr("172.16.0.1")}}}); err != nil {
		t.Fatal(err)
	}
	if err := h.AddPodEndpoint("nat", "other_nat", netip.MustParsePrefix("172.16.0.9/24"), "", nil); err != nil {
		t.Fatal(err)
	}
	gone := func() bool {
		have, _ := h.Snapshot(ctx)
		return have.Endpoint("leaked_Calico") == nil
	}
	for _, step := range []struct {
		advance   time.Duration
		reachable bool
		gone      bool
	}{
		{0, true, false},               // first seen
		{9 * time.Minute, true, false}, // within the grace period
		{2 * time.Minute, false, false},
		{0, true, true},
	} {
		now, reachable = now.Add(step.advance), step.reachable
		if _, err := r.Pass(ctx, ex.cluster); err != nil {
			t.Fatal(err)
		}
		if gone() != step.gone {
			t.Fatalf("after %v (API server answering: %v): leaked endpoint gone = %v, want %v", step.advance, step.reachable, gone(), step.gone)
		}
	}
	have, _ := h.Snapshot(ctx)
	for _, name := range []string{"kube-proxy-remote", "other_nat", "Calico_ep", "iis-1_Calico", "shop-1_Calico"} {
		if have.Endpoint(name) == nil {
			t.Errorf("GC removed %s:\n%s", name, h)
		}
	}
	// Without a cluster view there is no GC at all.
	if err := h.AddPodEndpoint("Calico", "leaked2_Calico", netip.MustParsePrefix("192.168.0.41/26"), "", nil); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		now = now.Add(time.Hour)
		if _, err := r.Pass(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	if have, _ := h.Snapshot(ctx); have.Endpoint("leaked2_Calico") == nil {
		t.Error("GC ran without a cluster view")
	}
}

// TestLoopRecoversFromFaults: whichever HNS call fails once (transient or
// not), the loop retries with backoff until HNS matches the plan, and the
// pods' ACLs are programmed.
func TestLoopRecoversFromFaults(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	for n := 1; n <= 8; n++ {
		for _, fault := range []*hns.Error{
			{Call: "injected", Code: 0x80070102, Msg: "timeout", Transient: true},
			{Call: "injected", Code: hns.CodeInvalidPolicy, Msg: "refused"},
		} {
			h := hnsmem.New()
			if err := h.AddNetwork(hns.Network{Name: "nat", Type: "NAT"}); err != nil {
				t.Fatal(err)
			}
			h.FailCall(n, fault)
			r := &applier.Reconciler{HNS: h, Attempts: 1}
			r.SetPlan(p)
			loop := &applier.Loop{Pass: func(ctx context.Context, _ int) applier.Next { return applier.NextAfter(r.Pass(ctx, ex.cluster)) },
				RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond)}
			loop.Init()
			want, _, _ := applier.WantOf(p, ex.cluster) // before the loop: it shares the cluster
			runCtx, stop := context.WithTimeout(ctx, 20*time.Second)
			done := make(chan struct{})
			go func() { loop.Run(runCtx); close(done) }()
			networked := false
			for runCtx.Err() == nil {
				if !networked && r.Status().State == kube.StateConverged {
					cni(t, h, p, ex.cluster) // the CNI, once the network is there
					networked = true
					loop.Trigger()
				} else if networked && len(hns.Diff(h.Held(), want)) == 0 {
					break // the loop requeues and backs off by itself
				}
				time.Sleep(time.Millisecond)
			}
			stop()
			<-done
			have, _ := h.Snapshot(ctx)
			if ops := hns.Diff(have, want); len(ops) != 0 || runCtx.Err() == context.DeadlineExceeded {
				t.Fatalf("call %d failing with %v: not converged: %v", n, fault, ops)
			}
		}
	}
}

// memOwned is an OwnedStore in memory.
type memOwned struct {
	o     *hns.Owned
	saves int
}

func (m *memOwned) Load() (*hns.Owned, error) { return m.o, nil }
func (m *memOwned) Save(o hns.Owned, _ string) error {
	m.o = &o
	m.saves++
	return nil
}

// withName is p with its network and host endpoint renamed, under the
// digest "sha256:renamed"; p is left as it was.
func withName(p *plan.NodePlan, name string) *plan.NodePlan {
	r := *p
	r.Network.Name, r.HostEndpoint.Name = name, name+"_ep"
	r.Digest = "sha256:renamed"
	return &r
}

// TestPassRenames: a plan that renames the network (issue 13: the agent
// created Calico2 beside Calico, same block and VNI) drains the node and
// replaces the network, whether the reconciler keeps a record of the
// network it owns or, with none, recognises it by its identity; the
// record follows the rename.
func TestPassRenames(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	for _, withRecord := range []bool{true, false} {
		t.Run(fmt.Sprintf("record=%v", withRecord), func(t *testing.T) {
			h := hnsmem.New()
			d := &drainer{h: h}
			r := &applier.Reconciler{HNS: h, Replacer: &applier.DrainReplacer{Base: replace.Config{
				HNS: h, Drainer: d, HostRoutes: replace.NewMemRoutes(), JournalPath: filepath.Join(t.TempDir(), "journal.json"),
				Sleep: func(context.Context, time.Duration) error { return nil }}}}
			rec := &memOwned{}
			if withRecord {
				r.Owned = rec
			}
			r.SetPlan(p)
			if _, err := r.Pass(ctx, ex.cluster); err != nil {
				t.Fatal(err)
			}
			cni(t, h, p, ex.cluster)
			if _, err := r.Pass(ctx, ex.cluster); err != nil {
				t.Fatal(err)
			}
			if withRecord && (rec.o == nil || *rec.o != (hns.Owned{Network: "Calico", HostEndpoint: "Calico_ep"}) || rec.saves != 1) {
				t.Fatalf("record after converging: %+v, %d saves", rec.o, rec.saves)
			}

			renamed := withName(p, "Calico2")
			r.SetPlan(renamed)
			st, err := r.Pass(ctx, ex.cluster)
			if err != nil || st.State != kube.StateConverged || st.Digest != "sha256:renamed" {
				t.Fatalf("rename pass: %+v, %v", st, err)
			}
			if !d.evicted || d.cordoned {
				t.Errorf("drain: %+v; want evicted and uncordoned", d)
			}
			have, _ := h.Snapshot(ctx)
			if len(have.Networks) != 1 || have.Network("Calico2") == nil || have.Endpoint("Calico_ep") != nil || have.Endpoint("Calico2_ep") == nil {
				t.Fatalf("HNS after the rename, want Calico2 alone with its host endpoint:\n%s", h.String())
			}
			if withRecord && (rec.o == nil || rec.o.Network != "Calico2" || rec.o.HostEndpoint != "Calico2_ep") {
				t.Errorf("record after the rename: %+v", rec.o)
			}
			h.ResetCalls()
			if st, err := r.Pass(ctx, ex.cluster); err != nil || st.Ops != 0 || h.MutatingCalls() != 0 {
				t.Errorf("then: %+v, %v, %d mutating calls; want none", st, err, h.MutatingCalls())
			}
		})
	}
}
