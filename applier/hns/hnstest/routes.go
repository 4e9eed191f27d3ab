package hnstest

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/hnsplan/hnsplan/applier/hns"
)

// route is the i-th route of a check: to a /26 of the check's second
// /24, or beyond it for i ≥ 4, via VTEP 192.0.2.(i%250+1).
func route(pl *place, i int) hns.RemoteRoute {
	b := pl.alt.Masked().Addr().As4()
	b[1] += byte(1 + i/1024) // out of the suite's space: remote nodes' blocks
	b[2] = byte(i / 4 % 256)
	b[3] = byte(i % 4 * 64)
	return hns.RemoteRoute{Prefix: netip.PrefixFrom(netip.AddrFrom4(b), 26), VNI: 4096,
		ProviderAddress: netip.AddrFrom4([4]byte{192, 0, 2, byte(i%250 + 1)}), DRMAC: fmt.Sprintf("0E-2A-C0-00-%02X-%02X", byte(i>>8), byte(i))}
}

func routeOp(a hns.Action, network string, r hns.RemoteRoute) hns.Op {
	return hns.Op{Action: a, Kind: hns.KindRoute, Name: r.Prefix.String(), Network: network, RouteSpec: &r}
}

// routesOf reads the routes of the network named name, sorted.
func (s *suite) routesOf(name string) ([]hns.RemoteRoute, error) {
	n, _, err := s.readNetwork(name)
	if err != nil {
		return nil, err
	}
	if n == nil {
		return nil, fmt.Errorf("network %s is not in the snapshot", name)
	}
	return sortRoutes(n.RemoteRoutes), nil
}

func sortRoutes(rs []hns.RemoteRoute) []hns.RemoteRoute {
	out := slices.Clone(rs)
	slices.SortFunc(out, func(a, b hns.RemoteRoute) int {
		if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
			return c
		}
		return a.ProviderAddress.Compare(b.ProviderAddress)
	})
	return out
}

// expectRoutes checks that the network holds exactly want.
func (s *suite) expectRoutes(network string, want []hns.RemoteRoute, when string) error {
	got, err := s.routesOf(network)
	if err != nil {
		return err
	}
	if want = sortRoutes(want); !slices.Equal(got, want) {
		return fmt.Errorf("%s: network %s holds %d routes %v, want %d %v", when, network, len(got), brief(got), len(want), brief(want))
	}
	return nil
}

// brief shortens a long route list for a message.
func brief(rs []hns.RemoteRoute) string {
	if len(rs) <= 6 {
		return fmt.Sprint(rs)
	}
	return fmt.Sprintf("%v … %v", rs[:3], rs[len(rs)-3:])
}

func checkRoutes(s *suite, pl *place) error {
	if !s.features.RemoteRoute {
		s.logf("routes: skipped, this HNS has no RemoteSubnetRoute policy")
		return nil
	}
	n := s.network(pl, "", pl.subnet)
	if err := s.apply(createNetwork(n)); err != nil {
		return err
	}
	r1 := route(pl, 0)
	for i := range 2 { // the second is a retry: a no-op
		if err := s.apply(routeOp(hns.Create, n.Name, r1)); err != nil {
			return err
		}
		if err := s.expectRoutes(n.Name, []hns.RemoteRoute{r1}, fmt.Sprintf("after add %d", i+1)); err != nil {
			return err
		}
	}

	// A second route to a taken prefix.
	moved := r1
	moved.ProviderAddress, moved.DRMAC = netip.MustParseAddr("192.0.2.200"), "0E-2A-C0-00-02-C8"
	err := s.c.Apply(s.ctx, routeOp(hns.Create, n.Name, moved))
	switch {
	case hns.Code(err) == hns.CodePolicyAlreadyExists:
		s.logf("routes: a second route to a taken prefix failed with POLICY_ALREADY_EXISTS")
		if err := s.expectRoutes(n.Name, []hns.RemoteRoute{r1}, "after a refused second route to "+r1.Prefix.String()); err != nil {
			return err
		}
	case err == nil:
		got, err := s.routesOf(n.Name)
		if err != nil {
			return err
		}
		s.logf("routes: a second route to a taken prefix was added; the prefix now has %d routes", len(got))
		if !slices.Contains(got, moved) {
			return fmt.Errorf("adding a second route to %s succeeded but it is not there: %v", r1.Prefix, got)
		}
		// Removed by its prefix alone: every route to it goes.
		if err := s.apply(hns.Op{Action: hns.Delete, Kind: hns.KindRoute, Name: r1.Prefix.String(), Network: n.Name}); err != nil {
			return err
		}
		if err := s.expectRoutes(n.Name, nil, "after removing "+r1.Prefix.String()+" by prefix"); err != nil {
			return err
		}
		if err := s.apply(routeOp(hns.Create, n.Name, r1)); err != nil {
			return err
		}
	default:
		return fmt.Errorf("a second route to a taken prefix: %v, want code %#08x or success", err, hns.CodePolicyAlreadyExists)
	}

	// Removal by settings, twice; then by prefix alone.
	for i := range 2 {
		if err := s.apply(routeOp(hns.Delete, n.Name, r1)); err != nil {
			return fmt.Errorf("remove %d: %w", i+1, err)
		}
		if err := s.expectRoutes(n.Name, nil, fmt.Sprintf("after remove %d", i+1)); err != nil {
			return err
		}
	}
	r2, r3 := route(pl, 1), route(pl, 2)
	for _, r := range []hns.RemoteRoute{r2, r3} {
		if err := s.apply(routeOp(hns.Create, n.Name, r)); err != nil {
			return err
		}
	}
	byPrefix := hns.Op{Action: hns.Delete, Kind: hns.KindRoute, Name: r2.Prefix.String(), Network: n.Name}
	for i := range 2 {
		if err := s.apply(byPrefix); err != nil {
			return err
		}
		if err := s.expectRoutes(n.Name, []hns.RemoteRoute{r3}, fmt.Sprintf("after remove by prefix %d", i+1)); err != nil {
			return err
		}
	}

	// Refused: a VNI beyond hcsshim's uint16. Nothing changes.
	big := route(pl, 3)
	big.VNI = 70000
	err = s.c.Apply(s.ctx, routeOp(hns.Create, n.Name, big))
	if err := wantCode(err, hns.CodeInvalidPolicy, "a route with VNI 70000"); err != nil {
		return err
	}
	if err := s.expectRoutes(n.Name, []hns.RemoteRoute{r3}, "after a refused route"); err != nil {
		return err
	}

	// A missing network.
	if err := s.c.Apply(s.ctx, routeOp(hns.Create, pl.prefix+"-missing", r2)); !hns.IsNotFound(err) {
		return fmt.Errorf("a route added to a missing network: %v, want a not-found error", err)
	}
	if err := s.apply(routeOp(hns.Delete, pl.prefix+"-missing", r2)); err != nil {
		return fmt.Errorf("a route removed from a missing network (it is gone): %w", err)
	}
	return nil
}
