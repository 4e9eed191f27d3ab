package hnsmem_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/hns/hnstest"
)

// nonConforming are the quirks under which the model breaks the
// hns.Client contract on purpose, and the check that says so:
//
//   - vsid-echo-differs reads a VSID back as another number than was
//     sent: a read-back no write can mend, there to test the agent's
//     loop breaker;
//   - duplicate-endpoint-names makes a retried endpoint create a second
//     endpoint, as raw HNS may (calico#4280); hnswin looks the name up
//     before creating, so the client it models is not the agent's.
var nonConforming = map[hnsmem.Quirk]string{
	hnsmem.QuirkVSIDEchoDiffers:        "network: ",
	hnsmem.QuirkDuplicateEndpointNames: "endpoint: ",
}

// TestConformance runs the hns.Client conformance suite on the model: in
// both modes of a delete with references, and under every quirk that
// keeps the contract, alone and all together.
func TestConformance(t *testing.T) {
	var conforming []hnsmem.Quirk
	for _, q := range hnsmem.Quirks {
		if _, ok := nonConforming[q]; !ok {
			conforming = append(conforming, q)
		}
	}
	configs := map[string][]hnsmem.Option{
		"default":                      nil,
		"delete-with-endpoints":        {hnsmem.AllowDeleteWithEndpoints()},
		"all-conforming-quirks":        {hnsmem.WithQuirks(conforming...)},
		"without-vxlanport-and-routes": {hnsmem.WithFeatures(hns.Features{V2API: true, ACLRuleID: true, Version: "9.1"})},
	}
	for _, q := range conforming {
		configs["quirk="+string(q)] = []hnsmem.Option{hnsmem.WithQuirks(q)}
	}
	for name, opts := range configs {
		t.Run(name, func(t *testing.T) {
			var log []string
			err := hnstest.TestClient(context.Background(), seeded(t, opts...), hnstest.Options{
				Logf: func(f string, args ...any) { log = append(log, f); t.Logf(f, args...) },
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(log) == 0 && name != "without-vxlanport-and-routes" {
				t.Errorf("no choice logged: the references, network and routes checks each log the one the client made")
			}
		})
	}
}

// TestConformanceRouteBatches is the Windows workflow's 1,000 routes in
// batches of 500, on the model, in both batch modes.
func TestConformanceRouteBatches(t *testing.T) {
	for _, opts := range [][]hnsmem.Option{nil, {hnsmem.WithQuirks(hnsmem.QuirkRouteBatchPartial)}} {
		err := hnstest.TestClient(context.Background(), seeded(t, opts...), hnstest.Options{
			BatchRoutes: 1000, BatchSize: 500, Only: []string{"route-batch"}})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// seeded is a model holding foreign objects, as a node does: the suite
// must leave them alone.
func seeded(t *testing.T, opts ...hnsmem.Option) *hnsmem.HNS {
	t.Helper()
	h := hnsmem.New(opts...)
	if err := h.AddNetwork(hns.Network{Name: "nat", Type: "NAT"}); err != nil {
		t.Fatal(err)
	}
	if err := h.AddLoadBalancer("", netip.MustParseAddr("10.96.0.10")); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestConformanceFails: the suite fails the model under each quirk that
// breaks the contract, in the check that says why, and leaves the
// foreign objects and nothing of its own.
func TestConformanceFails(t *testing.T) {
	for q, check := range nonConforming {
		t.Run(string(q), func(t *testing.T) {
			h := seeded(t, hnsmem.WithQuirks(q))
			before := h.Held()
			err := hnstest.TestClient(context.Background(), h, hnstest.Options{})
			if err == nil {
				t.Fatalf("the suite passed a model with quirk %s", q)
			}
			t.Log(err)
			if !strings.Contains(err.Error(), check) {
				t.Errorf("the suite failed otherwise than in %q:\n%v", check, err)
			}
			if strings.Contains(err.Error(), "clean-up") {
				t.Errorf("the clean-up failed:\n%v", err)
			}
			if after := h.Held(); after.String() != before.String() {
				t.Errorf("the suite left HNS changed:\n%s\nwas\n%s", after, before)
			}
		})
	}
}
