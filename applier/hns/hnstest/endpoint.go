package hnstest

import (
	"fmt"
	"net/netip"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

func nat(except string) plan.Policy {
	return plan.NewPolicy(plan.OutBoundNAT{Exceptions: []netip.Prefix{netip.MustParsePrefix(except)}})
}

func checkEndpoint(s *suite, pl *place) error {
	n := s.network(pl, "", pl.subnet)
	if err := s.apply(createNetwork(n)); err != nil {
		return err
	}
	e := &hns.Endpoint{Name: pl.prefix + "-ep", Network: n.Name, IP: netip.PrefixFrom(addr(pl.subnet, 5), 24),
		MAC: "0E-2A-0A-FA-00-05", Policies: []plan.Policy{nat("10.0.0.0/8")}}
	if err := s.apply(createEndpoint(e)); err != nil {
		return err
	}
	got, err := s.readEndpoint(e.Name)
	if err != nil {
		return err
	}
	if err := sameEndpoint(e, got, "after create"); err != nil {
		return err
	}
	id := got.ID
	if err := s.apply(createEndpoint(e)); err != nil {
		return fmt.Errorf("a retried create: %w", err)
	}
	if got, err := s.readEndpoint(e.Name); err != nil {
		return err
	} else if got == nil || got.ID != id {
		return fmt.Errorf("a retried create made another endpoint: %+v, was ID %s", got, id)
	}

	// Update replaces the policy list.
	upd := *e
	upd.Policies = []plan.Policy{nat("10.96.0.0/12")}
	if err := s.apply(hns.Op{Action: hns.Update, Kind: hns.KindEndpoint, Name: e.Name, ID: id, Network: n.Name, EndpointSpec: &upd}); err != nil {
		return err
	}
	if got, err := s.readEndpoint(e.Name); err != nil {
		return err
	} else if err := sameEndpoint(&upd, got, "after a policy update"); err != nil {
		return err
	}

	// Replace moves it.
	moved := upd
	moved.IP = netip.PrefixFrom(addr(pl.subnet, 6), 24)
	if err := s.apply(hns.Op{Action: hns.Replace, Kind: hns.KindEndpoint, Name: e.Name, Network: n.Name, EndpointSpec: &moved}); err != nil {
		return err
	}
	if got, err = s.readEndpoint(e.Name); err != nil {
		return err
	} else if err := sameEndpoint(&moved, got, "after a replace"); err != nil {
		return err
	}

	// HNS reserves the gateway's address.
	gw := &hns.Endpoint{Name: pl.prefix + "-gw", Network: n.Name, IP: netip.PrefixFrom(n.Subnets[0].Gateway, 24)}
	err = s.c.Apply(s.ctx, createEndpoint(gw))
	if err == nil {
		return fmt.Errorf("an endpoint at the gateway's address %s was created", gw.IP)
	}
	if _, err := typed(err, "an endpoint at the gateway's address"); err != nil {
		return err
	}
	if got, err := s.readEndpoint(gw.Name); err != nil {
		return err
	} else if got != nil {
		return fmt.Errorf("a refused create left endpoint %s", gw.Name)
	}

	// A remote endpoint (kube-proxy's, or an Overlay host endpoint).
	remote := &hns.Endpoint{Name: pl.prefix + "-remote", Network: n.Name, IP: netip.PrefixFrom(addr(pl.alt, 9), 32),
		MAC: "0E-2A-0A-FA-01-09", Remote: true, Policies: []plan.Policy{plan.NewPolicy(plan.ProviderAddress{ProviderAddress: netip.MustParseAddr("192.0.2.9")})}}
	if err := s.apply(createEndpoint(remote)); err != nil {
		return err
	}
	if got, err := s.readEndpoint(remote.Name); err != nil {
		return err
	} else if err := sameEndpoint(remote, got, "a remote endpoint"); err != nil {
		return err
	}

	// Delete by name, by ID, and again.
	rgot, err := s.readEndpoint(remote.Name)
	if err != nil {
		return err
	}
	for i, op := range []hns.Op{
		{Action: hns.Delete, Kind: hns.KindEndpoint, Name: e.Name, Network: n.Name},
		{Action: hns.Delete, Kind: hns.KindEndpoint, Name: e.Name, Network: n.Name},
		{Action: hns.Delete, Kind: hns.KindEndpoint, Name: remote.Name, ID: rgot.ID, Network: n.Name},
		{Action: hns.Delete, Kind: hns.KindEndpoint, Name: remote.Name, ID: rgot.ID, Network: n.Name},
	} {
		if err := s.apply(op); err != nil {
			return fmt.Errorf("delete %d: %w", i+1, err)
		}
		if got, err := s.readEndpoint(op.Name); err != nil {
			return err
		} else if got != nil {
			return fmt.Errorf("endpoint %s is still there after its delete", op.Name)
		}
	}
	err = s.c.Apply(s.ctx, hns.Op{Action: hns.Update, Kind: hns.KindEndpoint, Name: e.Name, Network: n.Name, EndpointSpec: &upd})
	return wantCode(err, hns.CodeEndpointNotFound, "an update of a missing endpoint")
}

func checkHostAttached(s *suite, pl *place) error {
	n := s.network(pl, "", pl.subnet)
	if err := s.apply(createNetwork(n)); err != nil {
		return err
	}
	e := &hns.Endpoint{Name: pl.prefix + "-host", Network: n.Name, IP: netip.PrefixFrom(addr(pl.subnet, 2), 24), HostAttached: true}
	for i := range 2 { // the second is a retry
		if err := s.apply(createEndpoint(e)); err != nil {
			return fmt.Errorf("create %d: %w", i+1, err)
		}
		got, err := s.readEndpoint(e.Name)
		if err != nil {
			return err
		}
		if err := sameEndpoint(e, got, fmt.Sprintf("after create %d", i+1)); err != nil {
			return err
		}
	}
	return nil
}

func checkACL(s *suite, pl *place) error {
	n := s.network(pl, "", pl.subnet)
	if err := s.apply(createNetwork(n)); err != nil {
		return err
	}
	e := &hns.Endpoint{Name: pl.prefix + "-ep", Network: n.Name, IP: netip.PrefixFrom(addr(pl.subnet, 7), 24),
		MAC: "0E-2A-0A-FA-00-07", Policies: []plan.Policy{nat("10.0.0.0/8")}}
	if err := s.apply(createEndpoint(e)); err != nil {
		return err
	}
	local := addr(pl.subnet, 7).String()
	// Every field set, so that HNS has no default to fill in.
	three := []plan.ACL{
		{Id: "hnstest-allow-web", Protocols: "6", Action: "Allow", Direction: "In", LocalAddresses: local,
			RemoteAddresses: "10.0.0.0/8", LocalPorts: "80,443", RuleType: "Switch", Priority: 200},
		{Id: "hnstest-deny-in", Protocols: "256", Action: "Block", Direction: "In", RuleType: "Switch", Priority: 65500},
		{Id: "hnstest-allow-dns", Protocols: "17", Action: "Allow", Direction: "Out", RemotePorts: "53", RuleType: "Switch", Priority: 300},
	}
	one := []plan.ACL{{Id: "hnstest-deny-out", Protocols: "256", Action: "Block", Direction: "Out", RuleType: "Switch", Priority: 65500}}
	set := func(acls []plan.ACL, id string) error {
		got, err := s.readEndpoint(e.Name)
		if err != nil || got == nil {
			return fmt.Errorf("read endpoint %s: %v", e.Name, err)
		}
		return s.apply(hns.Op{Action: hns.Update, Kind: hns.KindACL, Name: e.Name, ID: id, Network: n.Name, ACLs: acls})
	}
	expect := func(acls []plan.ACL, when string) error {
		want := *e
		want.ACLs = acls
		got, err := s.readEndpoint(e.Name)
		if err != nil {
			return err
		}
		return sameEndpoint(&want, got, when)
	}
	for i, step := range []struct {
		acls []plan.ACL
		when string
	}{
		{three, "after setting 3 ACLs"},
		{three, "after setting them again"},
		{one, "after replacing them with 1 other"}, // a replacement, not a merge
		{nil, "after clearing them"},
		{one, "after setting 1 again"},
	} {
		id := ""
		if i == 4 {
			got, err := s.readEndpoint(e.Name)
			if err != nil {
				return err
			}
			id = got.ID // by ID: HNS does not keep names unique
		}
		if err := set(step.acls, id); err != nil {
			return err
		}
		if err := expect(step.acls, step.when); err != nil {
			return err
		}
	}

	// A list HNS refuses leaves the old one.
	bad := []plan.ACL{{Id: "hnstest-bad", Protocols: "6", Action: "Maybe", Direction: "In", RuleType: "Switch", Priority: 100}}
	err := set(bad, "")
	if err == nil {
		return fmt.Errorf("an ACL with Action %q was accepted", "Maybe")
	}
	if _, err := typed(err, "an ACL with a bad Action"); err != nil {
		return err
	}
	if err := expect(one, "after a refused ACL list"); err != nil {
		return err
	}

	// Missing endpoints: by name, and by an ID under another name.
	err = s.c.Apply(s.ctx, hns.Op{Action: hns.Update, Kind: hns.KindACL, Name: pl.prefix + "-missing", Network: n.Name, ACLs: one})
	if !hns.IsNotFound(err) {
		return fmt.Errorf("an ACL update of a missing endpoint: %v, want a not-found error", err)
	}
	got, err := s.readEndpoint(e.Name)
	if err != nil {
		return err
	}
	err = s.c.Apply(s.ctx, hns.Op{Action: hns.Update, Kind: hns.KindACL, Name: pl.prefix + "-other", ID: got.ID, Network: n.Name, ACLs: three})
	if !hns.IsNotFound(err) {
		return fmt.Errorf("an ACL update by the ID of an endpoint of another name: %v, want a not-found error", err)
	}
	return expect(one, "after ACL updates of missing endpoints")
}
