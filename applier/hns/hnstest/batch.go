package hnstest

import (
	"fmt"
	"slices"

	"github.com/hnsplan/hnsplan/applier/hns"
)

func batchOp(a hns.Action, network string, rs []hns.RemoteRoute) hns.Op {
	return hns.Op{Action: a, Kind: hns.KindRoutes, Name: network, Network: network, Routes: rs}
}

// inBatches applies rs in batched ops of size routes.
func (s *suite) inBatches(a hns.Action, network string, rs []hns.RemoteRoute) error {
	for k := 0; k < len(rs); k += s.o.BatchSize {
		if err := s.apply(batchOp(a, network, rs[k:min(k+s.o.BatchSize, len(rs))])); err != nil {
			return err
		}
	}
	return nil
}

func checkRouteBatch(s *suite, pl *place) error {
	if !s.features.RemoteRoute {
		s.logf("route-batch: skipped, this HNS has no RemoteSubnetRoute policy")
		return nil
	}
	n := s.network(pl, "", pl.subnet)
	if err := s.apply(createNetwork(n)); err != nil {
		return err
	}
	all := make([]hns.RemoteRoute, s.o.BatchRoutes)
	for i := range all {
		all[i] = route(pl, i)
	}
	half := len(all) / 2

	// Add: the first half, then all of them (the first half is there:
	// skipped), then all again (a retry: a no-op).
	steps := []struct {
		a     hns.Action
		rs    []hns.RemoteRoute
		holds []hns.RemoteRoute
		when  string
	}{
		{hns.Create, all[:half], all[:half], "after adding half of the routes in batches"},
		{hns.Create, all, all, "after adding all of them, half already there"},
		{hns.Create, all, all, "after adding all of them again"},
		{hns.Delete, all[half:], all[:half], "after removing the second half in batches"},
		{hns.Delete, all, nil, "after removing all of them, half already gone"},
		{hns.Delete, all, nil, "after removing all of them again"},
	}
	for _, st := range steps {
		if err := s.inBatches(st.a, n.Name, st.rs); err != nil {
			return err
		}
		if err := s.expectRoutes(n.Name, st.holds, st.when); err != nil {
			return err
		}
	}

	// A batch with a route HNS refuses: a typed error, and of the batch
	// only valid routes landed, all, some or none of them.
	bad := route(pl, len(all))
	bad.VNI = 70000
	batch := slices.Concat(all[:3], []hns.RemoteRoute{bad}, all[3:6])
	err := s.c.Apply(s.ctx, batchOp(hns.Create, n.Name, batch))
	if err == nil {
		return fmt.Errorf("a batch with a route of VNI 70000 was accepted")
	}
	if _, err := typed(err, "a batch with a route of VNI 70000"); err != nil {
		return err
	}
	got, err := s.routesOf(n.Name)
	if err != nil {
		return err
	}
	for _, r := range got {
		if !slices.Contains(batch, r) || r == bad {
			return fmt.Errorf("after a refused batch the network holds %v, not a valid route of the batch", r)
		}
	}
	switch len(got) {
	case 0:
		s.logf("route-batch: a batch with a refused route left none of its routes (all or nothing)")
	default:
		s.logf("route-batch: a batch with a refused route left %d of its %d valid routes (partial)", len(got), len(batch)-1)
	}
	// What is left is done by sending the batch's valid routes again.
	valid := slices.Concat(all[:3], all[3:6])
	if err := s.apply(batchOp(hns.Create, n.Name, valid)); err != nil {
		return err
	}
	if err := s.expectRoutes(n.Name, valid, "after the valid routes were sent again"); err != nil {
		return err
	}

	// A missing network: adding is not found, removing is done.
	if err := s.c.Apply(s.ctx, batchOp(hns.Create, pl.prefix+"-missing", all[:2])); !hns.IsNotFound(err) {
		return fmt.Errorf("a batch added to a missing network: %v, want a not-found error", err)
	}
	if err := s.apply(batchOp(hns.Delete, pl.prefix+"-missing", all[:2])); err != nil {
		return fmt.Errorf("a batch removed from a missing network (its routes are gone): %w", err)
	}
	return nil
}
