package hnstest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// ours is the part of st the check made: its networks and endpoints.
func ours(st *hns.State, pl *place) *hns.State {
	out := &hns.State{}
	for _, n := range st.Networks {
		if strings.HasPrefix(n.Name, pl.prefix) {
			out.Networks = append(out.Networks, n)
		}
	}
	for _, e := range st.Endpoints {
		if strings.HasPrefix(e.Name, pl.prefix) {
			out.Endpoints = append(out.Endpoints, e)
		}
	}
	return out
}

func checkSnapshot(s *suite, pl *place) error {
	n := s.network(pl, "", pl.subnet)
	if err := s.apply(createNetwork(n)); err != nil {
		return err
	}
	if s.features.RemoteRoute {
		for _, i := range []int{2, 0, 1} { // not in order
			if err := s.apply(routeOp(hns.Create, n.Name, route(pl, i))); err != nil {
				return err
			}
		}
	}
	for i := range 2 {
		e := &hns.Endpoint{Name: fmt.Sprintf("%s-ep%d", pl.prefix, 2-i), Network: n.Name, IP: netip.PrefixFrom(addr(pl.subnet, 9-i), 24),
			Policies: []plan.Policy{nat("10.0.0.0/8")}}
		if err := s.apply(createEndpoint(e)); err != nil {
			return err
		}
	}
	got, err := s.readEndpoint(pl.prefix + "-ep1")
	if err != nil || got == nil {
		return fmt.Errorf("read back endpoint %s-ep1: %v", pl.prefix, err)
	}
	acls := []plan.ACL{{Id: "hnstest-deny-in", Protocols: "256", Action: "Block", Direction: "In", RuleType: "Switch", Priority: 65500}}
	if err := s.apply(hns.Op{Action: hns.Update, Kind: hns.KindACL, Name: got.Name, ID: got.ID, Network: n.Name, ACLs: acls}); err != nil {
		return err
	}

	a, err := s.snapshot()
	if err != nil {
		return err
	}
	// Consistency: unique IDs, every endpoint on a network of the same
	// snapshot (ours: others may change between the lists HNS is read
	// by), canonical order.
	ids := map[string]string{}
	for _, x := range a.Networks {
		if prev, dup := ids[x.ID]; dup && x.ID != "" {
			return fmt.Errorf("network %s and %s share ID %s", x.Name, prev, x.ID)
		}
		ids[x.ID] = x.Name
	}
	for _, e := range a.Endpoints {
		if prev, dup := ids[e.ID]; dup && e.ID != "" {
			return fmt.Errorf("endpoint %s and %s share ID %s", e.Name, prev, e.ID)
		}
		ids[e.ID] = e.Name
		if strings.HasPrefix(e.Name, pl.prefix) && a.Network(e.Network) == nil {
			return fmt.Errorf("endpoint %s is on network %q, which is not in the snapshot", e.Name, e.Network)
		}
	}
	mine := ours(a, pl)
	canon := ours(a, pl)
	canon.Networks = append([]hns.Network(nil), canon.Networks...)
	for i := range canon.Networks {
		canon.Networks[i].RemoteRoutes = append([]hns.RemoteRoute(nil), canon.Networks[i].RemoteRoutes...)
	}
	canon.Canonical()
	if !reflect.DeepEqual(mine, canon) {
		return fmt.Errorf("the snapshot is not in canonical order (hns.State.Canonical):\n%s\nwant\n%s", mine, canon)
	}

	// Two snapshots with no change between them are equal.
	b, err := s.snapshot()
	if err != nil {
		return err
	}
	before := ours(b, pl).String()
	if first := mine.String(); first != before {
		return fmt.Errorf("two snapshots differ with no change between them:\n%s\nthen\n%s", first, before)
	}

	// A snapshot is the caller's: changing it changes nothing.
	for i := range a.Networks {
		if x := &a.Networks[i]; strings.HasPrefix(x.Name, pl.prefix) {
			x.HostRoute = !x.HostRoute
			if len(x.RemoteRoutes) > 0 {
				x.RemoteRoutes[0].VNI++
			}
			x.Subnets[0].VNI++
		}
	}
	for i := range a.Endpoints {
		if e := &a.Endpoints[i]; strings.HasPrefix(e.Name, pl.prefix) {
			e.IP = netip.PrefixFrom(addr(pl.alt, 100), 24)
			if len(e.ACLs) > 0 {
				e.ACLs[0].Action = "Allow"
			}
			if len(e.Policies) > 0 {
				e.Policies[0] = nat("192.168.0.0/16")
			}
		}
	}
	c, err := s.snapshot()
	if err != nil {
		return err
	}
	if after := ours(c, pl).String(); after != before {
		return fmt.Errorf("changing a snapshot changed HNS:\n%s\nthen\n%s", before, after)
	}
	return nil
}

func checkContext(s *suite, pl *place) error {
	ctx, cancel := context.WithCancel(s.ctx)
	cancel()
	n := s.network(pl, "", pl.subnet)
	err := s.c.Apply(ctx, createNetwork(n))
	if !errors.Is(err, context.Canceled) {
		return fmt.Errorf("Apply with a cancelled context: %v, want context.Canceled", err)
	}
	if got, _, err := s.readNetwork(n.Name); err != nil {
		return err
	} else if got != nil {
		return fmt.Errorf("Apply with a cancelled context created network %s", n.Name)
	}
	if _, err := s.c.Snapshot(ctx); !errors.Is(err, context.Canceled) {
		return fmt.Errorf("Snapshot with a cancelled context: %v, want context.Canceled", err)
	}
	return nil
}
