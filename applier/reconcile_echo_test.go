package applier_test

import (
	"context"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/applier/statedir"
)

// TestPassUnderQuirks: under every quirk a reconciler converges and its
// next pass makes no mutating call, and the baseline it keeps in its
// state directory carries that across a restart; a VNI change still
// replaces the network once.
func TestPassUnderQuirks(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	for _, q := range hnsmem.Quirks {
		t.Run(string(q), func(t *testing.T) {
			h := hnsmem.New(hnsmem.WithQuirks(q))
			dir := t.TempDir()
			d := &drainer{h: h}
			newR := func() *applier.Reconciler {
				return &applier.Reconciler{HNS: h, Echo: statedir.Baseline(dir), Replacer: &applier.DrainReplacer{Base: replace.Config{
					HNS: h, Drainer: d, HostRoutes: replace.NewMemRoutes(), JournalPath: filepath.Join(dir, "journal.json"),
					Sleep: func(context.Context, time.Duration) error { return nil }}}}
			}
			r := newR()
			r.SetPlan(p)
			mismatch := q == hnsmem.QuirkVSIDEchoDiffers
			wantState := kube.StateConverged
			if mismatch {
				wantState = kube.StateReadbackMismatch
			}
			if st, err := r.Pass(ctx, ex.cluster); err != nil || st.State != wantState {
				t.Fatalf("first pass: %+v, %v", st, err)
			}
			cni(t, h, p, ex.cluster)
			if st, err := r.Pass(ctx, ex.cluster); err != nil || st.State != wantState || st.Ops != 2 {
				t.Fatalf("pods: %+v, %v", st, err)
			}
			for i, rr := range []*applier.Reconciler{r, newR()} { // a restart reads the baseline back
				rr.SetPlan(p)
				h.ResetCalls()
				st, err := rr.Pass(ctx, ex.cluster)
				if err != nil || st.State != wantState || st.Ops != 0 || h.MutatingCalls() != 0 {
					t.Fatalf("pass %d after converging: %+v, %v, %d mutating calls", i, st, err, h.MutatingCalls())
				}
				if mismatch && (len(st.Mismatches) != 1 || st.Mismatches[0].Field != "VNI" || st.Mismatches[0].Sent != "4096" || st.Mismatches[0].Read != "4097" ||
					!strings.Contains(st.LastError, "hns-readback-mismatch: network Calico: VNI sent 4096, read back 4097")) {
					t.Fatalf("mismatch report: %+v", st)
				}
			}
			moved := withVNI(p, 5000)
			r.SetPlan(moved)
			if st, err := r.Pass(ctx, ex.cluster); err != nil || st.State != wantState {
				t.Fatalf("VNI change: %+v, %v", st, err)
			}
			if got := h.Held().Network("Calico").Subnets[0].VNI; got != 5000 {
				t.Fatalf("VNI %d after the replace", got)
			}
			if n := d.uncordons; n != 1 {
				t.Fatalf("%d replaces (uncordons), want 1", n)
			}
			cni(t, h, moved, ex.cluster)
			r.Pass(ctx, ex.cluster)
			h.ResetCalls()
			if st, err := r.Pass(ctx, ex.cluster); err != nil || st.Ops != 0 || h.MutatingCalls() != 0 {
				t.Fatalf("after the replace: %+v, %v, %d calls", st, err, h.MutatingCalls())
			}
		})
	}
}

// forgetful is a baseline store that keeps only the replaces it was
// given: the record of the network is lost at every save, as if HNS
// read the network back otherwise at every pass.
type forgetful struct{ e *hns.Echo }

func (f *forgetful) Load() (*hns.Echo, error) { return f.e, nil }
func (f *forgetful) Save(e *hns.Echo) error {
	f.e = hns.NewEcho()
	f.e.Replaces = e.Replaces
	return nil
}

// TestSameReplaceNeverTwice: when the plan's network still reads back
// otherwise after the replace made for it, the replace does not run
// again: the pass reports hns-readback-mismatch, with a metric.
func TestSameReplaceNeverTwice(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	h := hnsmem.New()
	// Another controller made the network with VNI 4097 (the plan's is
	// 4096): a real difference, and the agent replaces it once.
	w, _, err := hns.WantFromPlan(p, hns.LiveValues{})
	if err != nil {
		t.Fatal(err)
	}
	other := w.Network
	other.RemoteRoutes = nil
	other.Subnets = append([]hns.Subnet(nil), other.Subnets...)
	other.Subnets[0].VNI = 4097
	if err := h.AddNetwork(other); err != nil {
		t.Fatal(err)
	}
	store := &forgetful{e: hns.NewEcho()}
	d := &drainer{h: h}
	reg := prometheus.NewRegistry()
	m := applier.NewMetrics(reg)
	replacer := &applier.DrainReplacer{Base: replace.Config{HNS: h, Drainer: d, HostRoutes: replace.NewMemRoutes(),
		JournalPath: filepath.Join(t.TempDir(), "journal.json"), Sleep: func(context.Context, time.Duration) error { return nil }}}
	// Each pass a new reconciler (a restart) with the forgetful store:
	// the second pass sees the network as if it still were 4097.
	pass := func() applier.Status {
		r := &applier.Reconciler{HNS: h, Echo: store, Replacer: replacer, Metrics: m}
		r.SetPlan(p)
		st, err := r.Pass(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := pass(); st.State != kube.StateConverged || d.uncordons != 1 {
		t.Fatalf("first pass: %+v, %d replaces", st, d.uncordons)
	}
	// HNS now is moved back to 4097 by the other controller.
	if err := h.RemoveEndpoint("Calico_ep"); err != nil {
		t.Fatal(err)
	}
	if err := h.Apply(ctx, hns.Op{Action: hns.Replace, Kind: hns.KindNetwork, Name: other.Name, NetworkSpec: &other}); err != nil {
		t.Fatal(err)
	}
	h.ResetCalls()
	st := pass()
	if st.State != kube.StateReadbackMismatch || d.uncordons != 1 || h.MutatingCalls() != 0 {
		t.Fatalf("second pass: %+v, %d replaces, %d calls; want no second replace", st, d.uncordons, h.MutatingCalls())
	}
	if len(st.Mismatches) == 0 || st.Mismatches[0].Field != "VNI" || !strings.Contains(st.LastError, "not replacing it again") {
		t.Fatalf("report: %+v", st)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := -1.0
	for _, mf := range mfs {
		if mf.GetName() == "hnsplan_hns_readback_mismatches" {
			got = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	if got != 1 {
		t.Errorf("hnsplan_hns_readback_mismatches = %v, want 1", got)
	}
}

// TestAdoptCalicoNetwork: on a node where Calico made the network (same
// name, type, subnet and VNI, no VxlanPort policy: 4789), with two
// Calico_ep (calico#4280) and its own routes, the agent adopts it with no
// drain and no replace: it keeps the network, deletes the duplicate host
// endpoint (not the one at the plan's address), takes over the routes
// and programs the pods' ACLs; the next pass makes no call.
func TestAdoptCalicoNetwork(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	want, _, err := applier.WantOf(p, ex.cluster)
	if err != nil {
		t.Fatal(err)
	}
	h := hnsmem.New(hnsmem.WithQuirks(hnsmem.QuirkDuplicateEndpointNames))
	calico := want.Network
	calico.VXLANPort, calico.HostRoute = 0, false // Calico makes none; adds HostRoute later, or not
	calico.RemoteRoutes = []hns.RemoteRoute{want.Network.RemoteRoutes[0],
		{Prefix: netip.MustParsePrefix("192.168.9.0/26"), VNI: 4096, ProviderAddress: netip.MustParseAddr("10.240.0.99"), DRMAC: "0E-2A-0A-F0-00-63"}}
	if err := h.AddNetwork(calico); err != nil {
		t.Fatal(err)
	}
	host := want.HostEndpoint.IP
	other := netip.PrefixFrom(host.Addr().Next().Next().Next().Next().Next().Next().Next(), host.Bits())
	for _, ip := range []netip.Prefix{other, host} { // the wrong one first: GetEndpointByName finds it
		if err := h.AddRemoteEndpoint("Calico", "Calico_ep", ip, "", nil); err != nil {
			t.Fatal(err)
		}
	}
	cni(t, h, p, ex.cluster)
	before, _ := h.Snapshot(ctx)
	netID := before.Network("Calico").ID
	var keep string
	for _, e := range before.Endpoints {
		if e.Name == "Calico_ep" && e.IP == host {
			keep = e.ID
		}
	}

	d := &drainer{h: h}
	dir := t.TempDir()
	r := &applier.Reconciler{HNS: h, Echo: statedir.Baseline(dir), Replacer: &applier.DrainReplacer{Base: replace.Config{
		HNS: h, Drainer: d, HostRoutes: replace.NewMemRoutes(), JournalPath: filepath.Join(dir, "journal.json"),
		Sleep: func(context.Context, time.Duration) error { return nil }}}}
	r.SetPlan(p)
	st, err := r.Pass(ctx, ex.cluster)
	if err != nil || st.State != kube.StateConverged {
		t.Fatalf("adopting: %+v, %v", st, err)
	}
	if d.evicted || d.cordons != 0 {
		t.Fatalf("the node was drained to adopt its network: %+v", d)
	}
	held := h.Held()
	n := held.Network("Calico")
	if n == nil || n.ID != netID {
		t.Fatalf("the network was recreated:\n%s", h.String())
	}
	if len(n.RemoteRoutes) != len(want.Network.RemoteRoutes) || !n.HostRoute {
		t.Errorf("routes or HostRoute not taken over:\n%s", h.String())
	}
	var hosts []hns.Endpoint
	for _, e := range held.Endpoints {
		if e.Name == "Calico_ep" {
			hosts = append(hosts, e)
		}
	}
	if len(hosts) != 1 || hosts[0].ID != keep {
		t.Errorf("host endpoints %v, want only %s at %s", hosts, keep, host)
	}
	for ip, acls := range want.PodACLs {
		for _, e := range held.EndpointsOn("Calico") {
			if e.IP.Addr() == ip && !hns.EquivalentACLs(acls, e.ACLs) {
				t.Errorf("pod %s: ACLs not programmed", ip)
			}
		}
	}
	h.ResetCalls()
	if st, err := r.Pass(ctx, ex.cluster); err != nil || st.Ops != 0 || h.MutatingCalls() != 0 {
		t.Errorf("next pass: %+v, %v, %d calls", st, err, h.MutatingCalls())
	}
}
