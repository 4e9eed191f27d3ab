package audit

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

var (
	t0     = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	prefix = netip.MustParsePrefix
	addr   = netip.MustParseAddr
)

// node is a Calico VXLAN node: the agent's network with its host
// endpoint, two pods, kube-proxy's remote endpoint and load balancers.
func node() (*hns.State, *hns.Want) {
	have := &hns.State{
		Networks: []hns.Network{{Name: "Calico", Type: "Overlay", AdapterName: "Ethernet"}, {Name: "nat", Type: "NAT"}},
		Endpoints: []hns.Endpoint{
			{Name: "Calico_ep", Network: "Calico", IP: prefix("10.244.1.2/26")},
			{Name: "web_Calico", ID: "id-web", Network: "Calico", IP: prefix("10.244.1.5/26"), Attached: true},
			{Name: "db_Calico", ID: "id-db", Network: "Calico", IP: prefix("10.244.1.6/26"), Attached: true},
			{Name: "remote-1", Network: "Calico", IP: prefix("10.244.2.7/32"), Remote: true},
		},
		LoadBalancers: []hns.LoadBalancer{{ID: "lb1"}, {ID: "lb2"}},
	}
	want := &hns.Want{Network: hns.Network{Name: "Calico", AdapterName: "Ethernet"}, HostEndpoint: hns.Endpoint{Name: "Calico_ep"}}
	return have, want
}

func pods() []Pod {
	return []Pod{{Name: "shop/web", Node: "win-1", IP: addr("10.244.1.5")}, {Name: "shop/db", Node: "win-1", IP: addr("10.244.1.6")},
		{Name: "shop/far", Node: "win-2", IP: addr("10.244.2.7")}}
}

func input(have *hns.State, want *hns.Want) Input {
	return Input{Node: "win-1", Have: have, Want: want, Pods: pods(), PodsFrom: "cluster", Adapters: []string{"Ethernet", "vEthernet (Ethernet)"}, AdaptersKnown: true, Now: t0}
}

func TestAuditClean(t *testing.T) {
	have, want := node()
	have.Networks = have.Networks[:1]
	r := Of(input(have, want))
	if r.Problems != 0 || r.Summary() != "clean" {
		t.Errorf("clean node: %d problems, summary %q, findings %+v", r.Problems, r.Summary(), r.Findings)
	}
	if r.LoadBalancers != 2 {
		t.Errorf("load balancers %d, want 2", r.LoadBalancers)
	}
	if len(r.NotChecked) != 1 || !strings.HasPrefix(r.NotChecked[0], KindEndpointState) {
		t.Errorf("not checked %q: HNS told no endpoint's state", r.NotChecked)
	}
}

// Each kind is found in what a CNI, kube-proxy and a reboot leave.
func TestAuditFindings(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*hns.State, *hns.Want, *Input)
		kind  string
		count int
		item  string // in the first item's detail
	}{
		{"a stale endpoint holds a pod's address", func(h *hns.State, _ *hns.Want, _ *Input) {
			h.Endpoints = append(h.Endpoints, hns.Endpoint{Name: "stale_Calico", Network: "Calico", IP: prefix("10.244.1.5/26")})
		}, KindDuplicateIP, 1, "10.244.1.5 is held by 2 endpoints: stale_Calico (local), web_Calico (local)"},
		{"a remote endpoint holds a local pod's address", func(h *hns.State, _ *hns.Want, _ *Input) {
			h.Endpoints = append(h.Endpoints, hns.Endpoint{Name: "remote-2", Network: "Calico", IP: prefix("10.244.1.6/32"), Remote: true})
		}, KindDuplicateIP, 1, "db_Calico (local), remote-2 (remote)"},
		{"a pod gone, its endpoint left", func(h *hns.State, _ *hns.Want, _ *Input) {
			h.Endpoints = append(h.Endpoints, hns.Endpoint{Name: "gone_Calico", Network: "Calico", IP: prefix("10.244.1.9/26")})
		}, KindOrphan, 1, "no pod of node win-1 has 10.244.1.9 (pods from the cluster); orphaned for less than a second"},
		{"a pod of another node has the address", func(h *hns.State, _ *hns.Want, in *Input) {
			h.Endpoints = append(h.Endpoints, hns.Endpoint{Name: "moved_Calico", Network: "Calico", IP: prefix("10.244.1.10/26")})
			in.Pods = append(in.Pods, Pod{Name: "shop/moved", Node: "win-2", IP: addr("10.244.1.10")})
		}, KindOrphan, 1, "10.244.1.10"},
		{"the orphan's age comes from the record", func(h *hns.State, _ *hns.Want, in *Input) {
			h.Endpoints = append(h.Endpoints, hns.Endpoint{Name: "gone_Calico", Network: "Calico", IP: prefix("10.244.1.9/26")})
			in.Seen = map[string]time.Time{"Calico/gone_Calico": t0.Add(-90 * time.Minute)}
		}, KindOrphan, 1, "orphaned for 1h30m0s"},
		{"HNS says an endpoint is degraded", func(h *hns.State, _ *hns.Want, _ *Input) {
			h.Endpoints[1].Health = &hns.EndpointHealth{State: "Degraded"}
		}, KindEndpointState, 1, "HNS reports state Degraded"},
		{"the network on another adapter", func(h *hns.State, _ *hns.Want, _ *Input) {
			h.Networks[0].AdapterName = "Ethernet 2"
		}, KindAdapterWrong, 1, `bound to adapter "Ethernet 2", the plan says "Ethernet"`},
		{"the network's adapter is gone", func(h *hns.State, w *hns.Want, in *Input) {
			w.Network.AdapterName = ""
			in.Adapters = []string{"Ethernet 3"}
		}, KindAdapterMissing, 1, `bound to adapter "Ethernet", which the host no longer has (it has Ethernet 3)`},
		{"a network a killed CNI ADD leaked", func(h *hns.State, _ *hns.Want, _ *Input) {}, KindForeignNetwork, 1, "NAT network no plan names"},
		{"an endpoint on it", func(h *hns.State, _ *hns.Want, _ *Input) {
			h.Endpoints = append(h.Endpoints, hns.Endpoint{Name: "nat-ep", Network: "nat", IP: prefix("172.20.0.5/20")})
		}, KindForeignEndpoint, 1, "on a network no plan names"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			have, want := node()
			in := input(have, want)
			tt.edit(have, want, &in)
			r := Of(in)
			f := r.Finding(tt.kind)
			if f.Count != tt.count || len(f.Items) == 0 || !strings.Contains(f.Items[0].Detail, tt.item) {
				t.Fatalf("%s: %+v, want %d with %q", tt.kind, f, tt.count, tt.item)
			}
			for _, g := range r.Findings {
				if g.Kind != tt.kind && g.Kind != KindForeignNetwork && g.Count > 0 {
					t.Errorf("also %s: %+v", g.Kind, g.Items)
				}
			}
			if IsProblem(tt.kind) != (r.Problems > 0) {
				t.Errorf("problems %d for a %s", r.Problems, tt.kind)
			}
		})
	}
}

// A policy-only plan: the CNI's networks are the plan's, the rest foreign;
// the pods of the plan explain endpoints when there is no cluster.
func TestAuditPolicyOnly(t *testing.T) {
	m, err := plan.NewNetworkMatcher([]string{"azure"})
	if err != nil {
		t.Fatal(err)
	}
	want := &hns.Want{Foreign: m}
	have := &hns.State{
		Networks: []hns.Network{{Name: "azure", Type: "L2Bridge"}, {Name: "other", Type: "NAT"}},
		Endpoints: []hns.Endpoint{
			{Name: "a-eth0", Network: "azure", IP: prefix("10.224.0.40/16")},
			{Name: "b-eth0", Network: "azure", IP: prefix("10.224.0.41/16")},
		},
	}
	r := Of(Input{Node: "akswin0", Have: have, Want: want, PodsFrom: "plan", Pods: []Pod{{Name: "shop/a", IP: addr("10.224.0.40")}}, Now: t0})
	if f := r.Finding(KindOrphan); f.Count != 1 || f.Items[0].Endpoint != "b-eth0" {
		t.Errorf("orphans %+v, want b-eth0", f)
	}
	if f := r.Finding(KindForeignNetwork); f.Count != 1 || f.Items[0].Network != "other" {
		t.Errorf("foreign %+v, want the network other", f)
	}
	if r := Of(Input{Node: "akswin0", Have: have, Now: t0}); r.Finding(KindForeignNetwork).Count != 2 || r.Finding(KindOrphan).Count != 0 {
		t.Errorf("without a plan every network is foreign and nothing an orphan: %+v", r.Findings)
	}
}

// At most MaxItems per kind, counted; the summary at most MaxSummary bytes.
func TestAuditBounded(t *testing.T) {
	have, want := node()
	for i := range 300 {
		have.Endpoints = append(have.Endpoints, hns.Endpoint{Name: fmt.Sprintf("leaked-endpoint-with-a-long-name-%03d_Calico", i), Network: "Calico",
			IP: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, 3, byte(i)}), 20)})
		have.Networks = append(have.Networks, hns.Network{Name: fmt.Sprintf("leaked-network-%03d-%s", i, strings.Repeat("x", 40)), Type: "NAT"})
	}
	r := Of(input(have, want))
	for kind, n := range map[string]int{KindOrphan: 300, KindForeignNetwork: 301} { // and nat
		if f := r.Finding(kind); f.Count != n || len(f.Items) != MaxItems {
			t.Errorf("%s: count %d, %d items; want %d and %d", kind, f.Count, len(f.Items), n, MaxItems)
		}
	}
	if len(r.Orphans) != 300 {
		t.Errorf("%d orphans kept for the record and the clean-up, want 300", len(r.Orphans))
	}
	long := &Report{Problems: 1, Findings: []Finding{{Kind: KindOrphan, Problem: true, Count: 1, Items: []Item{{Endpoint: strings.Repeat("é", 2000)}}}}}
	if s := long.Summary(); len(s) > MaxSummary || !strings.HasSuffix(s, "(hnsplan-agent audit lists all)") {
		t.Errorf("summary of %d bytes: %q…", len(s), s[:40])
	}
}

// The summary and the problem key change only with what was found, not
// with time passing.
func TestAuditSummaryStable(t *testing.T) {
	have, want := node()
	have.Endpoints = append(have.Endpoints, hns.Endpoint{Name: "gone_Calico", Network: "Calico", IP: prefix("10.244.1.9/26")})
	in := input(have, want)
	a := Of(in)
	in.Now = t0.Add(time.Hour)
	b := Of(in)
	if a.Summary() != b.Summary() || a.ProblemKey() != b.ProblemKey() {
		t.Errorf("an hour later: %q / %q", a.Summary(), b.Summary())
	}
	if want := "1 problems: orphan-endpoint 1 (gone_Calico 10.244.1.9); foreign-network 1"; a.Summary() != want {
		t.Errorf("summary %q, want %q", a.Summary(), want)
	}
}

// The record keeps each orphan's first sighting across restarts, and
// forgets those no longer orphaned.
func TestSeen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit-seen.json")
	s, err := LoadSeen(path)
	if err != nil {
		t.Fatal(err)
	}
	have, want := node()
	have.Endpoints = append(have.Endpoints, hns.Endpoint{Name: "gone_Calico", Network: "Calico", IP: prefix("10.244.1.9/26")})
	in := input(have, want)
	if !s.Observe(Of(in)) {
		t.Fatal("a new orphan did not change the record")
	}
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	in.Now = t0.Add(2 * time.Hour)
	if s.Observe(Of(in)) {
		t.Error("the same orphan changed the record")
	}
	s2, err := LoadSeen(path) // a restarted agent
	if err != nil {
		t.Fatal(err)
	}
	in.Seen = s2.First
	if o := Of(in).Orphans; len(o) != 1 || !o[0].Since.Equal(t0) {
		t.Errorf("after a restart: %+v, want first seen at %v", o, t0)
	}
	have.Endpoints = have.Endpoints[:len(have.Endpoints)-1]
	if !s2.Observe(Of(in)) || len(s2.First) != 0 {
		t.Errorf("the orphan is gone, the record holds %v", s2.First)
	}
}
