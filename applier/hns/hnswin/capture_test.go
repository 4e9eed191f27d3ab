package hnswin

import (
	"context"
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// TestCaptureRoundTrip: the in-memory HNS rendered as HNS's documents
// (EncodeState) reads back (DecodeCapture, Snapshot's decoder) as the
// same state: networks with their policies and routes, the host
// endpoint attached through the HostDefault namespace, pod endpoints
// with typed policies and ACLs, load balancers.
func TestCaptureRoundTrip(t *testing.T) {
	ctx := context.Background()
	h := hnsmem.New()
	if err := h.AddNetwork(hns.Network{Name: "nat", Type: "NAT"}); err != nil {
		t.Fatal(err)
	}
	h.AddLoadBalancer("", netip.MustParseAddr("10.96.0.10"))
	n := hns.Network{Name: "Calico", Type: "Overlay", VXLANPort: 4789, HostRoute: true, NonPersistent: true,
		Subnets:      []hns.Subnet{{Prefix: netip.MustParsePrefix("192.168.0.0/26"), Gateway: netip.MustParseAddr("192.168.0.1"), VNI: 4096}},
		RemoteRoutes: []hns.RemoteRoute{{Prefix: netip.MustParsePrefix("192.168.1.0/26"), VNI: 4096, ProviderAddress: netip.MustParseAddr("10.0.0.5"), DRMAC: "0E-2A-0A-00-00-05"}}}
	for _, op := range []hns.Op{
		{Action: hns.Create, Kind: hns.KindNetwork, Name: "Calico", NetworkSpec: &n},
		{Action: hns.Create, Kind: hns.KindEndpoint, Name: "Calico_ep", Network: "Calico", EndpointSpec: &hns.Endpoint{Name: "Calico_ep", Network: "Calico",
			IP: netip.MustParsePrefix("192.168.0.2/26"), HostAttached: true,
			ACLs: []plan.ACL{{Id: "h", Protocols: "6", Action: "Allow", Direction: "In", LocalPorts: "22", RuleType: "Host"}}}},
	} {
		if err := h.Apply(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.AddPodEndpoint("Calico", "pod_Calico", netip.MustParsePrefix("192.168.0.5/26"), "0E-2A-C0-A8-00-05", []plan.Policy{
		plan.NewPolicy(plan.OutBoundNAT{Exceptions: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}}),
		plan.NewPolicy(plan.ACL{Id: "deny", Protocols: "256", Action: "Block", Direction: "In", RuleType: "Switch", Priority: 65500}),
	}); err != nil {
		t.Fatal(err)
	}
	// As a node seeded from a v1 capture holds them: a sandbox's
	// endpoint, one HNS reports degraded, a stale one on pod_Calico's
	// address (Seed keeps it).
	if err := h.Seed(&hns.State{Endpoints: []hns.Endpoint{
		{Name: "attached_Calico", Network: "Calico", IP: netip.MustParsePrefix("192.168.0.6/26"), Attached: true},
		{Name: "degraded_Calico", Network: "Calico", IP: netip.MustParsePrefix("192.168.0.7/26"), Health: &hns.EndpointHealth{State: "Degraded", LastErrorCode: 0x803B0002}},
		{Name: "stale_Calico", Network: "Calico", IP: netip.MustParsePrefix("192.168.0.5/26")},
	}}); err != nil {
		t.Fatal(err)
	}
	want, err := h.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := EncodeState(want, hns.Features{V2API: true, VxlanPort: true, Version: "15.4"}, "hnsmem")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCapture(b)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
		t.Errorf("capture round trip (-want +got):\n%s\n%s", d, b)
	}
	if _, err := DecodeCapture([]byte(`{"format":"other/1"}`)); err == nil {
		t.Error("a document of another format was read")
	}
}
