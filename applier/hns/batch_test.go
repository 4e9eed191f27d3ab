package hns_test

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/hnsplan/hnsplan/applier/hns"
)

func rt(i int, pa string) hns.RemoteRoute {
	return hns.RemoteRoute{Prefix: netip.MustParsePrefix(fmt.Sprintf("10.9.%d.0/24", i)), VNI: 4096,
		ProviderAddress: netip.MustParseAddr(pa), DRMAC: "0E-2A-00-00-00-01"}
}

func routeOp(a hns.Action, network string, r hns.RemoteRoute) hns.Op {
	return hns.Op{Action: a, Kind: hns.KindRoute, Name: r.Prefix.String(), Network: network, RouteSpec: &r}
}

// TestBatchRoutes: runs of route ops of one network and action become
// batches of at most size routes, in order; other ops keep their place;
// a size below 2 changes nothing; RouteOps undoes a batch.
func TestBatchRoutes(t *testing.T) {
	net := hns.Op{Action: hns.Create, Kind: hns.KindNetwork, Name: "Calico"}
	ep := hns.Op{Action: hns.Create, Kind: hns.KindEndpoint, Name: "Calico_ep", Network: "Calico"}
	ops := []hns.Op{net}
	for i := range 5 {
		ops = append(ops, routeOp(hns.Delete, "Calico", rt(i, "10.0.0.1")))
	}
	for i := range 3 {
		ops = append(ops, routeOp(hns.Create, "Calico", rt(i, "10.0.0.2")))
	}
	ops = append(ops, routeOp(hns.Create, "Other", rt(9, "10.0.0.2")), ep)

	got := hns.BatchRoutes(ops, 2)
	var shape []string
	for _, op := range got {
		shape = append(shape, fmt.Sprintf("%s %s %s %d", op.Action.Symbol(), op.Kind, op.Network, len(op.Routes)))
	}
	want := []string{"+ network  0", "- routes Calico 2", "- routes Calico 2", "- routes Calico 1", "+ routes Calico 2", "+ routes Calico 1", "+ routes Other 1", "+ endpoint Calico 0"}
	if !slices.Equal(shape, want) {
		t.Errorf("BatchRoutes(2):\n got %q\nwant %q", shape, want)
	}
	var back []hns.Op
	for _, op := range got {
		if op.Kind == hns.KindRoutes {
			back = append(back, hns.RouteOps(op)...)
		}
	}
	for i, op := range back {
		if o := ops[1+i]; op.Action != o.Action || op.Network != o.Network || *op.RouteSpec != *o.RouteSpec {
			t.Errorf("RouteOps %d: %s, want %s", i, op, o)
		}
	}
	if got := hns.BatchRoutes(ops, 1); len(got) != len(ops) {
		t.Errorf("BatchRoutes(1) made %d ops of %d", len(got), len(ops))
	}
}

// TestRoutesLeft: what is left of a batch is what HNS does not hold as
// the batch wants, whatever part of it landed.
func TestRoutesLeft(t *testing.T) {
	have := &hns.State{Networks: []hns.Network{{Name: "Calico", RemoteRoutes: []hns.RemoteRoute{rt(0, "10.0.0.1"), rt(1, "10.0.0.2")}}}}
	add := hns.Op{Action: hns.Create, Kind: hns.KindRoutes, Network: "Calico", Routes: []hns.RemoteRoute{rt(0, "10.0.0.1"), rt(1, "10.0.0.1"), rt(2, "10.0.0.1")}}
	if got := hns.RoutesLeft(have, add); !slices.Equal(got, add.Routes[1:]) {
		t.Errorf("add: left %v", got)
	}
	del := add
	del.Action = hns.Delete
	if got := hns.RoutesLeft(have, del); !slices.Equal(got, add.Routes[:1]) {
		t.Errorf("remove: left %v", got)
	}
	gone := &hns.State{}
	if got := hns.RoutesLeft(gone, del); len(got) != 0 {
		t.Errorf("remove from a missing network: left %v", got)
	}
	if got := hns.RoutesLeft(gone, add); len(got) != 3 {
		t.Errorf("add to a missing network: left %v", got)
	}
}
