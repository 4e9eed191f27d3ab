package hnstest_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/hns/hnstest"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// broken is the in-memory HNS with one way of breaking the contract.
type broken struct {
	*hnsmem.HNS
	apply    func(b *broken, ctx context.Context, op hns.Op) error
	snapshot func(b *broken, ctx context.Context) (*hns.State, error)
	last     *hns.State
}

func (b *broken) Apply(ctx context.Context, op hns.Op) error {
	b.last = nil
	if b.apply != nil {
		return b.apply(b, ctx, op)
	}
	return b.HNS.Apply(ctx, op)
}

func (b *broken) Snapshot(ctx context.Context) (*hns.State, error) {
	if b.snapshot != nil {
		return b.snapshot(b, ctx)
	}
	return b.HNS.Snapshot(ctx)
}

// TestSuiteFails: the suite finds each breach of the contract, in the
// check that covers it. A suite that passed these would pass anything.
func TestSuiteFails(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check string
		b     broken
	}{
		{"create not idempotent", "network: a retried create", broken{apply: func(b *broken, ctx context.Context, op hns.Op) error {
			if op.Kind == hns.KindNetwork && op.Action == hns.Create {
				if st, _ := b.HNS.Snapshot(context.WithoutCancel(ctx)); st.Network(op.Name) != nil {
					return &hns.Error{Call: "hcnCreateNetwork", Code: hns.CodeNetworkAlreadyExists, Msg: "exists"}
				}
			}
			return b.HNS.Apply(ctx, op)
		}}},
		{"ACL lists merged", "acl: after replacing them with 1 other", broken{apply: func(b *broken, ctx context.Context, op hns.Op) error {
			if op.Kind == hns.KindACL {
				st, _ := b.HNS.Snapshot(context.WithoutCancel(ctx))
				if e := st.Endpoint(op.Name); e != nil && len(op.ACLs) > 0 {
					op.ACLs = append(e.ACLs, op.ACLs...)
					op.ACLs = uniqueACLs(op.ACLs)
				}
			}
			return b.HNS.Apply(ctx, op)
		}}},
		{"policies dropped by an ACL update", "acl: after setting 3 ACLs", broken{apply: func(b *broken, ctx context.Context, op hns.Op) error {
			if err := b.HNS.Apply(ctx, op); err != nil || op.Kind != hns.KindACL {
				return err
			}
			// A client that sends the ACLs alone: HNS's Update drops
			// every other policy.
			st, _ := b.HNS.Snapshot(context.WithoutCancel(ctx))
			e := st.Endpoint(op.Name)
			if e == nil {
				return nil
			}
			bare := *e
			bare.Policies = nil
			return b.HNS.Apply(ctx, hns.Op{Action: hns.Update, Kind: hns.KindEndpoint, Name: e.Name, ID: e.ID, Network: e.Network, EndpointSpec: &bare})
		}}},
		{"unknown policy types dropped by an ACL update", "foreign: after adding the agent's ACLs to the owner's: the owner's policies changed", broken{apply: func(b *broken, ctx context.Context, op hns.Op) error {
			if err := b.HNS.Apply(ctx, op); err != nil || op.Kind != hns.KindACL {
				return err
			}
			// A client that re-encodes the policies it knows and loses
			// the others (L2Driver).
			st, _ := b.HNS.Snapshot(context.WithoutCancel(ctx))
			e := st.Endpoint(op.Name)
			if e == nil {
				return nil
			}
			known := *e
			known.Policies = slices.DeleteFunc(slices.Clone(e.Policies), func(p plan.Policy) bool { _, raw := p.Settings.(plan.Raw); return raw })
			return b.HNS.Apply(ctx, hns.Op{Action: hns.Update, Kind: hns.KindEndpoint, Name: e.Name, ID: e.ID, Network: e.Network, EndpointSpec: &known})
		}}},
		{"snapshot shared", "snapshot: changing a snapshot changed HNS", broken{snapshot: func(b *broken, ctx context.Context) (*hns.State, error) {
			if b.last == nil {
				st, err := b.HNS.Snapshot(ctx)
				if err != nil {
					return nil, err
				}
				b.last = st
			}
			return b.last, nil
		}}},
		{"context ignored", "context: Apply with a cancelled context", broken{apply: func(b *broken, _ context.Context, op hns.Op) error {
			return b.HNS.Apply(context.Background(), op)
		}}},
		{"route removal from a missing network fails", "routes: a route removed from a missing network", broken{apply: func(b *broken, ctx context.Context, op hns.Op) error {
			if st, _ := b.HNS.Snapshot(context.WithoutCancel(ctx)); op.Kind == hns.KindRoute && st.Network(op.Network) == nil {
				return &hns.Error{Call: "hcnModifyNetwork", Code: hns.CodeNetworkNotFound, Msg: "not found"}
			}
			return b.HNS.Apply(ctx, op)
		}}},
		{"batch applies its first route only", "route-batch: after adding half", broken{apply: func(b *broken, ctx context.Context, op hns.Op) error {
			if op.Kind == hns.KindRoutes {
				op.Routes = op.Routes[:1]
			}
			return b.HNS.Apply(ctx, op)
		}}},
		{"batch refused in part lands an invalid route", "route-batch: ", broken{apply: func(b *broken, ctx context.Context, op hns.Op) error {
			if op.Kind == hns.KindRoutes && op.Action == hns.Create {
				for _, r := range op.Routes {
					if r.VNI > 0xFFFF { // land the others, then a stray one, then fail
						stray := op.Routes[0]
						stray.Prefix = netip.MustParsePrefix("192.0.2.0/26")
						if err := b.HNS.Apply(ctx, hns.Op{Action: hns.Create, Kind: hns.KindRoute, Name: stray.Prefix.String(), Network: op.Network, RouteSpec: &stray}); err != nil {
							return err
						}
						break
					}
				}
			}
			return b.HNS.Apply(ctx, op)
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			b.HNS = hnsmem.New()
			err := hnstest.TestClient(context.Background(), &b, hnstest.Options{})
			if err == nil {
				t.Fatal("the suite passed")
			}
			if !strings.Contains(err.Error(), tc.check) {
				t.Errorf("the suite failed, but not in %q:\n%v", tc.check, err)
			}
		})
	}
}

func uniqueACLs(acls []plan.ACL) []plan.ACL {
	seen := map[string]bool{}
	var out []plan.ACL
	for _, a := range acls {
		if !seen[a.Id] {
			seen[a.Id] = true
			out = append(out, a)
		}
	}
	return out
}

// TestOptions: the suite refuses a space it cannot cut into /24s.
func TestOptions(t *testing.T) {
	err := hnstest.TestClient(context.Background(), hnsmem.New(), hnstest.Options{Space: netip.MustParsePrefix("10.250.0.0/24")})
	if err == nil || !strings.Contains(err.Error(), "Options.Space") {
		t.Errorf("a /24 space: %v", err)
	}
	if err := hnstest.TestClient(context.Background(), hnsmem.New(), hnstest.Options{Only: []string{"routes"}}); err != nil {
		t.Errorf("only the routes check: %v", err)
	}
}
