// Package hnstest is the conformance suite of hns.Client, shaped like
// testing/fstest.TestFS: TestClient runs every check against a client and
// returns an error that lists each failure, so that both implementations
// (hnsmem in `go test`, hnswin on a real Windows host in the Windows
// workflow) are held to one contract, and so that a test can show the
// suite failing a client that breaks it.
//
// # The contract
//
// What the agent relies on, check by check (the checks' names):
//
//   - features: Features answers, with the v2 API and a version.
//   - network: a created network reads back with the identity and
//     policies sent (a field read back absent is unknown, not wrong: see
//     hns.NetworkMismatches) and an ID; creating it again is a no-op (same
//     ID); creating another network under a taken name fails with
//     CodeNetworkAlreadyExists or does nothing, and never changes the one
//     there; its HostRoute policy changes in place; Replace makes a new
//     network (new ID, new identity); Delete removes it and deleting it
//     again succeeds; modifying a missing network is not found.
//   - references: deleting a network that has an endpoint either fails
//     with CodeEntityHasReferences and leaves both, or deletes both (real
//     HNS's choice is unverified; Options.Logf says which a host made);
//     it never leaves an endpoint whose network is gone. An endpoint on a
//     missing network is CodeNetworkNotFound.
//   - endpoint: a created endpoint reads back with its network, address,
//     MAC (hns.SameMAC), flags and policies; creating it again is a
//     no-op; an Update replaces its policy list; Replace moves it to a new
//     address; an address HNS reserves (the subnet's gateway) is refused
//     with a typed error and creates nothing; Delete, by name or by ID,
//     removes it and deleting it again succeeds; updating a missing
//     endpoint is CodeEndpointNotFound.
//   - host-attached: an endpoint attached to the host reads back so, and
//     creating it again is a no-op.
//   - acl: an ACL op replaces the endpoint's whole ACL list (not a merge)
//     and keeps every other policy of the endpoint as it was (the CNI's
//     OutBoundNAT, SDNRoute, L2Driver, ...); the list reads back as
//     hns.EquivalentACLs says HNS may echo it; applying it again changes
//     nothing; an empty list removes every ACL; an op by ID acts on that
//     endpoint only if its name matches; a refused list (a bad Action)
//     is a typed error that leaves the old list; a missing endpoint is
//     not found.
//   - foreign: on an L2Bridge network made by another program, an
//     endpoint with its policies (OutBoundNAT, SDNRoute, a type hnsplan
//     does not know) and ACLs of its own: ACL ops that keep those ACLs and
//     add, change or remove others leave every other policy reading back
//     exactly as it read before the first write (a policy-only agent on
//     Azure CNI's endpoints).
//   - routes: a RemoteSubnetRoute reads back exactly as sent (Felix and
//     Diff compare routes field by field); adding it again is a no-op; a
//     second route to a taken prefix fails with CodePolicyAlreadyExists
//     and leaves the first, or is added (unverified: Options.Logf says
//     which); a route is removed by its settings or by its prefix alone,
//     and removing it again, or from a missing network, succeeds; a VNI
//     that does not fit hcsshim's uint16 is CodeInvalidPolicy and
//     changes nothing; adding to a missing network is not found.
//   - route-batch: a KindRoutes op adds or removes many routes in one
//     call; routes already there (or already gone) are skipped; a batch
//     with a route HNS refuses fails with a typed error, and the routes
//     that landed are some of the batch's valid ones — none (all or
//     nothing) or any of them (partial application): the caller reads the
//     network back to learn which. Options.Logf says which a host did.
//   - snapshot: two snapshots with no change between them are equal; a
//     snapshot is in canonical order (hns.State.Canonical); changing a
//     snapshot changes nothing in HNS; every endpoint's network is in the
//     same snapshot; IDs are unique.
//   - context: an Apply or Snapshot whose context has ended fails with
//     the context's error and changes nothing.
//
// The suite creates only objects whose names start with Options.Prefix,
// on subnets of Options.Space, and deletes them all, also after a
// failure. It does not assume HNS is empty: objects of others are left
// alone and not checked (but by the snapshot check's consistency rules).
package hnstest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/applier/hns"
)

// Options say where the suite may work.
type Options struct {
	// Prefix starts the name of every object the suite creates; it must
	// be unique on the host. Default "hnstest".
	Prefix string
	// Space holds the suite's subnets, one /24 per check: a /16 nothing
	// else on the host uses. Default 10.250.0.0/16.
	Space netip.Prefix
	// BatchRoutes is how many routes the route-batch check adds in all,
	// and BatchSize how many go in one call. Defaults 64 and 16.
	BatchRoutes, BatchSize int
	// NonPersistent creates the suite's networks with the
	// EnableNonPersistent flag, so that a host that reboots before the
	// clean-up loses them (a real host wants it).
	NonPersistent bool
	// Logf, if set, receives what the client chose where the contract
	// allows more than one answer (e.g. "references: HNS refused ...").
	Logf func(format string, args ...any)
	// Only, if set, runs only the checks it names.
	Only []string
}

func (o *Options) defaults() {
	if o.Prefix == "" {
		o.Prefix = "hnstest"
	}
	if !o.Space.IsValid() {
		o.Space = netip.MustParsePrefix("10.250.0.0/16")
	}
	if o.BatchRoutes <= 0 {
		o.BatchRoutes = 64
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 16
	}
}

// check is one part of the contract. It returns its first failure.
type check struct {
	name string
	run  func(*suite, *place) error
}

var checks = []check{
	{"features", checkFeatures},
	{"network", checkNetwork},
	{"references", checkReferences},
	{"endpoint", checkEndpoint},
	{"host-attached", checkHostAttached},
	{"acl", checkACL},
	{"foreign", checkForeign},
	{"routes", checkRoutes},
	{"route-batch", checkRouteBatch},
	{"snapshot", checkSnapshot},
	{"context", checkContext},
}

// Checks lists the names of the checks, in the order they run.
func Checks() []string {
	out := make([]string, len(checks))
	for i, c := range checks {
		out[i] = c.name
	}
	return out
}

// TestClient runs every check of the contract (see the package doc)
// against c and returns nil, or an error listing each check that failed
// and why. It cleans up what it created; a failed clean-up is a failure.
func TestClient(ctx context.Context, c hns.Client, o Options) error {
	o.defaults()
	if o.Space.Bits() > 16 || !o.Space.Addr().Is4() {
		return fmt.Errorf("hnstest: Options.Space %s: want an IPv4 prefix of /16 or wider", o.Space)
	}
	s := &suite{ctx: ctx, c: c, o: o}
	f, err := c.Features(ctx)
	if err != nil {
		return fmt.Errorf("features: %w", err)
	}
	s.features = f
	var errs []error
	for i, ch := range checks {
		if len(o.Only) > 0 && !slices.Contains(o.Only, ch.name) {
			continue
		}
		p := s.place(i, ch.name)
		err := ch.run(s, p)
		if cerr := s.cleanup(p); cerr != nil {
			err = errors.Join(err, fmt.Errorf("clean-up: %w", cerr))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ch.name, err))
		}
	}
	return errors.Join(errs...)
}

type suite struct {
	ctx      context.Context
	c        hns.Client
	o        Options
	features hns.Features
}

// place is where one check works: its names and its /24.
type place struct {
	check  string
	prefix string // every object name of the check starts with it
	subnet netip.Prefix
	alt    netip.Prefix // a second /24, for a replace
}

func (s *suite) place(i int, name string) *place {
	b := s.o.Space.Masked().Addr().As4()
	sub := func(k int) netip.Prefix {
		b := b
		b[2] = byte(k)
		return netip.PrefixFrom(netip.AddrFrom4(b), 24)
	}
	return &place{check: name, prefix: s.o.Prefix + "-" + name, subnet: sub(2 * i), alt: sub(2*i + 1)}
}

func (s *suite) logf(format string, args ...any) {
	if s.o.Logf != nil {
		s.o.Logf(format, args...)
	}
}

// addr is the n-th address of p.
func addr(p netip.Prefix, n int) netip.Addr {
	a := p.Masked().Addr().As4()
	a[3] += byte(n)
	return netip.AddrFrom4(a)
}

// network is an Overlay network of the check (VNI 4096, VxlanPort 4789
// when the host has the policy), named by suffix, on p.
func (s *suite) network(pl *place, suffix string, p netip.Prefix) *hns.Network {
	n := &hns.Network{
		Name:          pl.prefix + suffix,
		Type:          "Overlay",
		Subnets:       []hns.Subnet{{Prefix: p, Gateway: addr(p, 1), VNI: 4096}},
		HostRoute:     true,
		NonPersistent: s.o.NonPersistent,
	}
	if s.features.VxlanPort {
		n.VXLANPort = 4789
	}
	return n
}

// apply is Apply, its error naming the op.
func (s *suite) apply(op hns.Op) error {
	if err := s.c.Apply(s.ctx, op); err != nil {
		return fmt.Errorf("Apply(%s): %w", strings.TrimSpace(op.String()), err)
	}
	return nil
}

func (s *suite) snapshot() (*hns.State, error) {
	st, err := s.c.Snapshot(s.ctx)
	if err != nil {
		return nil, fmt.Errorf("Snapshot: %w", err)
	}
	return st, nil
}

func createNetwork(n *hns.Network) hns.Op {
	return hns.Op{Action: hns.Create, Kind: hns.KindNetwork, Name: n.Name, NetworkSpec: n}
}

func createEndpoint(e *hns.Endpoint) hns.Op {
	return hns.Op{Action: hns.Create, Kind: hns.KindEndpoint, Name: e.Name, Network: e.Network, EndpointSpec: e}
}

// cleanup deletes every object of the check: endpoints first (HNS may
// refuse to delete a network that has some), then networks.
func (s *suite) cleanup(pl *place) error {
	ctx := context.WithoutCancel(s.ctx)
	st, err := s.c.Snapshot(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range st.Endpoints {
		if strings.HasPrefix(e.Name, pl.prefix) {
			op := hns.Op{Action: hns.Delete, Kind: hns.KindEndpoint, Name: e.Name, ID: e.ID, Network: e.Network}
			if err := s.c.Apply(ctx, op); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, n := range st.Networks {
		if strings.HasPrefix(n.Name, pl.prefix) {
			if err := s.c.Apply(ctx, hns.Op{Action: hns.Delete, Kind: hns.KindNetwork, Name: n.Name}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if st, err = s.c.Snapshot(ctx); err != nil {
		return err
	}
	for _, n := range st.Networks {
		if strings.HasPrefix(n.Name, pl.prefix) {
			errs = append(errs, fmt.Errorf("network %s is still there after its delete", n.Name))
		}
	}
	for _, e := range st.Endpoints {
		if strings.HasPrefix(e.Name, pl.prefix) {
			errs = append(errs, fmt.Errorf("endpoint %s is still there after its delete", e.Name))
		}
	}
	return errors.Join(errs...)
}

// typed returns err's *hns.Error, or an error saying it has none.
func typed(err error, what string) (*hns.Error, error) {
	var e *hns.Error
	if !errors.As(err, &e) {
		return nil, fmt.Errorf("%s: %v, want an *hns.Error with an HRESULT", what, err)
	}
	return e, nil
}

// wantCode checks that err carries code.
func wantCode(err error, code uint32, what string) error {
	if err == nil {
		return fmt.Errorf("%s succeeded, want it to fail with %#08x", what, code)
	}
	if hns.Code(err) != code {
		return fmt.Errorf("%s: %v, want code %#08x", what, err, code)
	}
	return nil
}

// named counts the endpoints named name.
func named(st *hns.State, name string) int {
	n := 0
	for _, e := range st.Endpoints {
		if e.Name == name {
			n++
		}
	}
	return n
}

func countNetworks(st *hns.State, name string) int {
	n := 0
	for _, x := range st.Networks {
		if x.Name == name {
			n++
		}
	}
	return n
}
