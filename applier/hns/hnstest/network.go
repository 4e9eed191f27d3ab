package hnstest

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

func checkFeatures(s *suite, _ *place) error {
	f, err := s.c.Features(s.ctx)
	switch {
	case err != nil:
		return err
	case !f.V2API:
		return fmt.Errorf("Features: %+v: the agent needs the HNS v2 API", f)
	case f.Version == "":
		return fmt.Errorf("Features: %+v: no version", f)
	}
	return nil
}

// readNetwork reads the network named name; nil if it is not there.
func (s *suite) readNetwork(name string) (*hns.Network, *hns.State, error) {
	st, err := s.snapshot()
	if err != nil {
		return nil, nil, err
	}
	if k := countNetworks(st, name); k > 1 {
		return nil, nil, fmt.Errorf("%d networks named %s", k, name)
	}
	return st.Network(name), st, nil
}

// sameNetwork checks that HNS holds sent, as read allows (see
// hns.NetworkMismatches), with an ID and its NonPersistent flag.
func sameNetwork(sent, read *hns.Network, when string) error {
	if read == nil {
		return fmt.Errorf("%s: network %s is not in the snapshot", when, sent.Name)
	}
	if ms := hns.NetworkMismatches(sent, read); len(ms) > 0 {
		return fmt.Errorf("%s: network %s reads back otherwise: %v", when, sent.Name, ms)
	}
	if read.ID == "" {
		return fmt.Errorf("%s: network %s has no ID", when, sent.Name)
	}
	if read.NonPersistent != sent.NonPersistent {
		return fmt.Errorf("%s: network %s NonPersistent %t, sent %t", when, sent.Name, read.NonPersistent, sent.NonPersistent)
	}
	return nil
}

func checkNetwork(s *suite, pl *place) error {
	n := s.network(pl, "", pl.subnet)
	if err := s.apply(createNetwork(n)); err != nil {
		return err
	}
	got, _, err := s.readNetwork(n.Name)
	if err != nil {
		return err
	}
	if err := sameNetwork(n, got, "after create"); err != nil {
		return err
	}
	if len(got.RemoteRoutes) != 0 {
		return fmt.Errorf("a new network has routes: %v", got.RemoteRoutes)
	}
	id := got.ID

	// Idempotence: the same create again is a no-op.
	if err := s.apply(createNetwork(n)); err != nil {
		return fmt.Errorf("a retried create: %w", err)
	}
	if again, _, err := s.readNetwork(n.Name); err != nil {
		return err
	} else if again == nil || again.ID != id {
		return fmt.Errorf("a retried create made another network: %+v, was ID %s", again, id)
	}

	// Another network under the taken name never replaces the one there.
	other := s.network(pl, "", pl.alt)
	err = s.c.Apply(s.ctx, createNetwork(other))
	switch {
	case err == nil:
		s.logf("network: creating another network named %s did nothing", n.Name)
	case hns.Code(err) == hns.CodeNetworkAlreadyExists:
		s.logf("network: creating another network named %s failed with NETWORK_ALREADY_EXISTS", n.Name)
	default:
		return fmt.Errorf("create another network named %s: %v, want success (a no-op) or code %#08x", n.Name, err, hns.CodeNetworkAlreadyExists)
	}
	if again, _, err := s.readNetwork(n.Name); err != nil {
		return err
	} else if err := sameNetwork(n, again, "after a conflicting create"); err != nil {
		return err
	} else if again.ID != id {
		return fmt.Errorf("a conflicting create replaced network %s (ID %s, was %s)", n.Name, again.ID, id)
	}

	// Policies change in place.
	changed := *n
	changed.HostRoute = false
	policies := hns.Op{Action: hns.Update, Kind: hns.KindNetPolicies, Name: n.Name, NetworkSpec: &changed}
	for i := range 2 { // the second is a retry: a no-op
		if err := s.apply(policies); err != nil {
			return err
		}
		got, _, err := s.readNetwork(n.Name)
		if err != nil {
			return err
		}
		if err := sameNetwork(&changed, got, fmt.Sprintf("after a policy update (%d)", i+1)); err != nil {
			return err
		}
		if got.ID != id {
			return fmt.Errorf("a policy update replaced the network (ID %s, was %s)", got.ID, id)
		}
	}

	// Replace: a new network with the new identity.
	if err := s.apply(hns.Op{Action: hns.Replace, Kind: hns.KindNetwork, Name: n.Name, NetworkSpec: other, Reason: "subnet-changed"}); err != nil {
		return err
	}
	got, _, err = s.readNetwork(n.Name)
	if err != nil {
		return err
	}
	if err := sameNetwork(other, got, "after a replace"); err != nil {
		return err
	}
	if got.ID == id {
		return fmt.Errorf("a replace kept the network's ID %s", id)
	}

	// Delete, twice.
	del := hns.Op{Action: hns.Delete, Kind: hns.KindNetwork, Name: n.Name}
	for i := range 2 {
		if err := s.apply(del); err != nil {
			return fmt.Errorf("delete %d: %w", i+1, err)
		}
		if got, _, err := s.readNetwork(n.Name); err != nil {
			return err
		} else if got != nil {
			return fmt.Errorf("network %s is still there after its delete", n.Name)
		}
	}
	err = s.c.Apply(s.ctx, policies)
	if !hns.IsNotFound(err) {
		return fmt.Errorf("a policy update of a missing network: %v, want a not-found error", err)
	}
	return nil
}

func checkReferences(s *suite, pl *place) error {
	n := s.network(pl, "", pl.subnet)
	if err := s.apply(createNetwork(n)); err != nil {
		return err
	}
	e := &hns.Endpoint{Name: pl.prefix + "-ep", Network: n.Name, IP: netip.PrefixFrom(addr(pl.subnet, 5), 24)}
	if err := s.apply(createEndpoint(e)); err != nil {
		return err
	}
	for _, op := range []hns.Op{
		{Action: hns.Delete, Kind: hns.KindNetwork, Name: n.Name},
		{Action: hns.Replace, Kind: hns.KindNetwork, Name: n.Name, NetworkSpec: n, Reason: "test"},
	} {
		verb := map[hns.Action]string{hns.Delete: "deleting", hns.Replace: "replacing"}[op.Action]
		err := s.c.Apply(s.ctx, op)
		st, serr := s.snapshot()
		if serr != nil {
			return serr
		}
		net, ep := st.Network(n.Name), st.Endpoint(e.Name)
		switch {
		case err == nil && ep == nil:
			s.logf("references: %s a network with an endpoint deleted the endpoint with it", verb)
			if op.Action == hns.Delete && net != nil {
				return fmt.Errorf("%s succeeded but network %s is still there", op, n.Name)
			}
			if op.Action == hns.Delete {
				// Both gone: make them again for the replace.
				if err := s.apply(createNetwork(n)); err != nil {
					return err
				}
				if err := s.apply(createEndpoint(e)); err != nil {
					return err
				}
			}
		case err == nil:
			return fmt.Errorf("%s of a network with endpoint %s succeeded and left the endpoint (on network %q, which is %v)", op, e.Name, ep.Network, net)
		case hns.Code(err) == hns.CodeEntityHasReferences:
			s.logf("references: %s a network with an endpoint failed with ENTITY_HAS_REFERENCES", verb)
			if net == nil || ep == nil || ep.Network != n.Name {
				return fmt.Errorf("%s failed (%v) but changed HNS: network %v, endpoint %v", op, err, net != nil, ep != nil)
			}
		default:
			return fmt.Errorf("%s of a network with an endpoint: %v, want success (both deleted) or code %#08x", op, err, hns.CodeEntityHasReferences)
		}
	}

	missing := &hns.Endpoint{Name: pl.prefix + "-lost", Network: pl.prefix + "-missing", IP: netip.PrefixFrom(addr(pl.alt, 5), 24)}
	err := s.c.Apply(s.ctx, createEndpoint(missing))
	if err := wantCode(err, hns.CodeNetworkNotFound, "an endpoint on a missing network"); err != nil {
		return err
	}
	return nil
}

// readEndpoint reads the one endpoint named name (nil if none).
func (s *suite) readEndpoint(name string) (*hns.Endpoint, error) {
	st, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	if k := named(st, name); k > 1 {
		return nil, fmt.Errorf("%d endpoints named %s", k, name)
	}
	return st.Endpoint(name), nil
}

// sameEndpoint checks that read is sent as HNS may echo it.
func sameEndpoint(sent, read *hns.Endpoint, when string) error {
	if read == nil {
		return fmt.Errorf("%s: endpoint %s is not in the snapshot", when, sent.Name)
	}
	var diffs []string
	if read.Network != sent.Network {
		diffs = append(diffs, fmt.Sprintf("network %q, sent %q", read.Network, sent.Network))
	}
	if read.IP != sent.IP {
		diffs = append(diffs, fmt.Sprintf("IP %s, sent %s", read.IP, sent.IP))
	}
	if sent.MAC != "" && !hns.SameMAC(sent.MAC, read.MAC) {
		diffs = append(diffs, fmt.Sprintf("MAC %s, sent %s", read.MAC, sent.MAC))
	}
	if read.Remote != sent.Remote || read.HostAttached != sent.HostAttached {
		diffs = append(diffs, fmt.Sprintf("remote %t attached %t, sent %t %t", read.Remote, read.HostAttached, sent.Remote, sent.HostAttached))
	}
	if a, b := describe(sent.Policies), describe(read.Policies); a != b {
		diffs = append(diffs, fmt.Sprintf("policies %s, sent %s", b, a))
	}
	if !hns.EquivalentACLs(sent.ACLs, read.ACLs) {
		diffs = append(diffs, fmt.Sprintf("ACLs %v, sent %v", read.ACLs, sent.ACLs))
	}
	if read.ID == "" {
		diffs = append(diffs, "no ID")
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%s: endpoint %s reads back otherwise: %v", when, sent.Name, diffs)
	}
	return nil
}

func describe(ps []plan.Policy) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = plan.Describe(p)
	}
	slices.Sort(out)
	return fmt.Sprint(out)
}
