package hnsmem

import (
	"slices"

	"github.com/hnsplan/hnsplan/applier/hns"
)

// Routes: RemoteSubnetRoute policies, one by one and in batches.

func (t *txn) applyRoute(op hns.Op) error {
	const call = "hcnModifyNetwork"
	if op.Network == "" {
		return badOp(op, "a route op names its network")
	}
	switch op.Action {
	case hns.Create:
		if op.RouteSpec == nil {
			return badOp(op, "no RouteSpec")
		}
		return t.addRoute(call, op.Network, *op.RouteSpec)
	case hns.Delete:
		return t.removeRoute(op.Network, op.RouteSpec, op.Name)
	case hns.Replace:
		// Policies have no modify: remove the prefix's route, add the new
		// one (flannel does exactly this, hcsshim-hns.md §4 "flannel VXLAN").
		if op.RouteSpec == nil {
			return badOp(op, "no RouteSpec")
		}
		if err := t.removeRoute(op.Network, nil, op.RouteSpec.Prefix.String()); err != nil {
			return err
		}
		return t.addRoute(call, op.Network, *op.RouteSpec)
	}
	return badOp(op, "routes are added, removed or replaced")
}

// applyRoutes is a batched route op: one hcnModifyNetwork whose request
// carries many RemoteSubnetRoute policies (hcn's PolicyNetworkRequest
// holds a list; hcsshim-hns.md §3, network policies Add/Remove). It
// applies the first n routes in order, each as addRoute or removeRoute
// (by its full settings) would, and returns how many it applied before
// the first failure. Whether HNS applies a refused batch in part is
// unverified: Apply keeps nothing of a failed batch unless the quirk
// route-batch-partial says otherwise.
func (t *txn) applyRoutes(op hns.Op, n int) (done int, err error) {
	const call = "hcnModifyNetwork"
	if op.Network == "" || len(op.Routes) == 0 {
		return 0, badOp(op, "a batched route op names its network and its routes")
	}
	if op.Action != hns.Create && op.Action != hns.Delete {
		return 0, badOp(op, "routes are added or removed in batches")
	}
	if t.st.Network(op.Network) == nil && op.Action == hns.Create {
		return 0, herr(call, hns.CodeNetworkNotFound, "network %q not found", op.Network)
	}
	for i, r := range op.Routes[:n] {
		if op.Action == hns.Create {
			err = t.addRoute(call, op.Network, r)
		} else {
			err = t.removeRoute(op.Network, &r, "")
		}
		if err != nil {
			return i, err
		}
	}
	return n, nil
}

// checkRoute validates a RemoteSubnetRoute policy.
func (t *txn) checkRoute(call string, r hns.RemoteRoute) error {
	// RemoteSubnetRoute needs HNS ≥9.2 (hcsshim-hns.md §3 "Feature checks",
	// RemoteSubnetSupported).
	if !t.cfg.features.RemoteRoute {
		return herr(call, CodeInvalidPolicyType, "this HNS does not support the RemoteSubnetRoute policy")
	}
	switch {
	case !r.Prefix.IsValid():
		return herr(call, hns.CodeInvalidPolicy, "RemoteSubnetRoute: invalid DestinationPrefix")
	case r.VNI > 0xFFFF:
		// hcsshim carries IsolationId as a uint16 (hcsshim-hns.md §0 and §2
		// policy table; calico-windows.md §3 "Remote routes" notes Felix
		// truncates silently): a VNI that does not fit cannot be sent.
		return herr(call, hns.CodeInvalidPolicy, "RemoteSubnetRoute %s: IsolationId %d does not fit hcsshim's uint16", r.Prefix, r.VNI)
	case !r.ProviderAddress.IsValid() || r.ProviderAddress.IsUnspecified():
		return herr(call, hns.CodeInvalidPolicy, "RemoteSubnetRoute %s: invalid ProviderAddress", r.Prefix)
	case r.DRMAC == "":
		return herr(call, hns.CodeInvalidPolicy, "RemoteSubnetRoute %s: no DistributedRouterMacAddress", r.Prefix)
	case !validMAC(r.DRMAC):
		// HNS writes MACs with dashes (hcsshim-hns.md §2); Felix turns ':'
		// into '-' before sending one (calico-windows.md §3 "Remote routes").
		return herr(call, hns.CodeInvalidPolicy, "RemoteSubnetRoute %s: DistributedRouterMacAddress %q is not a MAC like 0E-2A-0A-F4-02-01", r.Prefix, r.DRMAC)
	}
	return nil
}

// addRoute adds one RemoteSubnetRoute policy (policy Add, hcsshim-hns.md
// §3; Felix adds and removes them one per request, calico-windows.md §3).
// An identical route is a no-op; another route to the same prefix is
// POLICY_ALREADY_EXISTS (§3 "Errors"): flannel removes the old entry
// before adding (§4), which is what a Replace route op does.
func (t *txn) addRoute(call, network string, r hns.RemoteRoute) error {
	n := t.st.Network(network)
	if n == nil {
		return herr(call, hns.CodeNetworkNotFound, "network %q not found", network)
	}
	if err := t.checkRoute(call, r); err != nil {
		return err
	}
	for _, h := range n.RemoteRoutes {
		if h == r {
			return nil
		}
		if h.Prefix == r.Prefix {
			return herr(call, hns.CodePolicyAlreadyExists, "network %q already has a RemoteSubnetRoute to %s (via %s)", network, r.Prefix, h.ProviderAddress)
		}
	}
	t.ownRoutes(n, network)
	n.RemoteRoutes = append(n.RemoteRoutes, r)
	return nil
}

// removeRoute removes one RemoteSubnetRoute policy. With r, it matches on
// the full settings (hcsshim-hns.md §6 item 4, "Remove matching on the
// full settings"); without, on the prefix alone (name). A route that is
// not there is a no-op (idempotence), on a missing network too: it went
// with its network (hnswin does the same; hnstest's routes check).
func (t *txn) removeRoute(network string, r *hns.RemoteRoute, name string) error {
	n := t.st.Network(network)
	if n == nil {
		return nil
	}
	t.ownRoutes(n, network)
	n.RemoteRoutes = slices.DeleteFunc(n.RemoteRoutes, func(h hns.RemoteRoute) bool {
		if r != nil {
			return h == *r
		}
		return h.Prefix.String() == name
	})
	return nil
}
