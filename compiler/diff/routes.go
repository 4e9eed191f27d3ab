package diff

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"

	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// MaxListDetails is how many added and removed routes a change lists; the
// rest are counted (Impact has the totals).
const MaxListDetails = 50

// A node's routes are its route table's, less the routes to its own
// blocks (format 2: the nodes of a compilation share one table). So a
// node's route change is the change between the two tables its plans
// name, less its own routes on either side. That table change is
// computed once per pair of tables (routeDelta), not once per node: a
// node's route list is the whole cluster's, and materializing it for
// every node is quadratic in the cluster (5,000 nodes: 25 M routes a
// side).
//
// A change the reader can read route by route (at most MaxListDetails
// added and removed in the table) is listed exactly, node by node, as it
// always was. A larger one is described relative to the tables: the
// table's routes that change, listed up to MaxListDetails each way, with
// each node's own routes aside (its Impact has its own counts). That
// description is the same on every node the tables serve, so that the
// grouping shows a VNI change once, "the same change on 4,500 nodes",
// rather than 4,500 changes that each lack one route.

// routeDelta is the change of one kind of route between two route tables.
type routeDelta[R comparable] struct {
	kind           string
	removed, added []R // in prefix order
	owner          func(R) string
	text           func(R) string
	// ownRemoved and ownAdded count each node's own routes among removed
	// and added.
	ownRemoved, ownAdded map[string]int
	// relative says the change is past MaxListDetails: every node's
	// change is described by details and whole, computed once.
	relative bool
	details  []Detail
	whole    string
}

func routeText(r plan.RemoteSubnetRoute) string {
	return fmt.Sprintf("%s -> %s (PA %s, VSID %d, DR MAC %s)", r.DestinationPrefix, r.Node, r.ProviderAddress, r.IsolationId, cmp.Or(r.DistributedRouterMacAddress, "live"))
}

func hostRouteText(r plan.HostRoute) string {
	return fmt.Sprintf("%s via %s (%s)", r.DestinationPrefix, r.NextHop, r.Node)
}

// remoteSubnetRoutes is the change of remote subnet routes between the
// tables b and h (either nil, or of another type: no such routes).
func (d *differ) remoteSubnetRoutes(b, h *plan.RouteTable) *routeDelta[plan.RemoteSubnetRoute] {
	key := [2]*plan.RouteTable{b, h}
	if x, ok := d.remote[key]; ok {
		return x
	}
	// A VNI change rewrites every route's IsolationId: the routes both
	// tables hold but for it are one line, not a list of twins.
	var vsid *[2]uint32
	if b != nil && h != nil && b.Type == plan.RoutesRemoteSubnet && h.Type == plan.RoutesRemoteSubnet && b.IsolationId != h.IsolationId {
		vsid = &[2]uint32{b.IsolationId, h.IsolationId}
	}
	x := newRouteDelta("remoteSubnetRoutes", tableRoutes(b).RemoteSubnetRoutes(), tableRoutes(h).RemoteSubnetRoutes(),
		func(r plan.RemoteSubnetRoute) netip.Prefix { return r.DestinationPrefix },
		func(r plan.RemoteSubnetRoute) string { return r.Node }, routeText)
	if x.relative && vsid != nil {
		x.rewritten(vsid[0], vsid[1])
	}
	x.describe()
	d.remote[key] = x
	return x
}

// hostRoutes is the change of host routes (static-routes) between the
// tables b and h.
func (d *differ) hostRoutes(b, h *plan.RouteTable) *routeDelta[plan.HostRoute] {
	key := [2]*plan.RouteTable{b, h}
	if x, ok := d.host[key]; ok {
		return x
	}
	x := newRouteDelta("hostRoutes", tableRoutes(b).HostRoutes(), tableRoutes(h).HostRoutes(),
		func(r plan.HostRoute) netip.Prefix { return r.DestinationPrefix },
		func(r plan.HostRoute) string { return r.Node }, hostRouteText)
	x.describe()
	d.host[key] = x
	return x
}

// tableRoutes is a plan of no node with the table t: its routes are every
// node's (no node is named "").
func tableRoutes(t *plan.RouteTable) *plan.NodePlan { return &plan.NodePlan{Routes: t} }

// newRouteDelta compares two route lists as sets. Routes are comparable
// values, so the comparison formats none of them.
func newRouteDelta[R comparable](kind string, bl, hl []R, prefix func(R) netip.Prefix, owner func(R) string, text func(R) string) *routeDelta[R] {
	bs := make(map[R]struct{}, len(bl))
	for _, r := range bl {
		bs[r] = struct{}{}
	}
	hs := make(map[R]struct{}, len(hl))
	for _, r := range hl {
		hs[r] = struct{}{}
	}
	x := &routeDelta[R]{kind: kind, owner: owner, text: text, ownRemoved: map[string]int{}, ownAdded: map[string]int{}}
	for _, r := range bl {
		if _, ok := hs[r]; !ok {
			x.removed = append(x.removed, r)
			x.ownRemoved[owner(r)]++
		}
	}
	for _, r := range hl {
		if _, ok := bs[r]; !ok {
			x.added = append(x.added, r)
			x.ownAdded[owner(r)]++
		}
	}
	// A table holds a prefix once; the owner orders hostile duplicates.
	byPrefix := func(a, b R) int {
		return cmp.Or(plan.ComparePrefix(prefix(a), prefix(b)), cmp.Compare(owner(a), owner(b)))
	}
	slices.SortStableFunc(x.removed, byPrefix)
	slices.SortStableFunc(x.added, byPrefix)
	x.relative = len(x.removed) > MaxListDetails || len(x.added) > MaxListDetails
	return x
}

// rewritten is set on a relative change whose tables' VNIs differ: the
// details say the VSID of every route both tables hold changes, and list
// only the routes that differ otherwise.
func (x *routeDelta[R]) rewritten(from, to uint32) {
	// Only remote subnet routes have a VSID.
	rx, ok := any(x).(*routeDelta[plan.RemoteSubnetRoute])
	if !ok {
		return
	}
	added := make(map[plan.RemoteSubnetRoute]struct{}, len(rx.added))
	for _, r := range rx.added {
		added[r] = struct{}{}
	}
	kept := map[plan.RemoteSubnetRoute]struct{}{} // in added, with the new VSID
	var removed []plan.RemoteSubnetRoute
	for _, r := range rx.removed {
		r2 := r
		r2.IsolationId = to
		if _, ok := added[r2]; ok && r.IsolationId == from {
			kept[r2] = struct{}{}
			continue
		}
		removed = append(removed, r)
	}
	if len(kept) == 0 {
		return
	}
	addedOnly := slices.DeleteFunc(slices.Clone(rx.added), func(r plan.RemoteSubnetRoute) bool { _, ok := kept[r]; return ok })
	rx.details = append(rx.details, Detail{Path: rx.kind + ".IsolationId", Before: fmt.Sprint(from), After: fmt.Sprint(to)})
	rx.details = append(rx.details, listed(rx.kind, removed, addedOnly, rx.text)...)
}

// describe sets the details and whole of a relative change (unless
// rewritten has).
func (x *routeDelta[R]) describe() {
	if !x.relative {
		return
	}
	if x.details == nil {
		x.details = listed(x.kind, x.removed, x.added, x.text)
	}
	// Shared by every node's change: an append must copy.
	x.details = slices.Clip(x.details)
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", x.kind)
	for _, list := range [][]R{x.removed, x.added} {
		for _, r := range list {
			fmt.Fprintf(h, "%v\n", r)
		}
		h.Write([]byte{0})
	}
	x.whole = "table:" + hex.EncodeToString(h.Sum(nil))
}

// listed lists removed then added routes, at most MaxListDetails of each,
// the rest counted.
func listed[R any](kind string, removed, added []R, text func(R) string) []Detail {
	var out []Detail
	for i, r := range removed {
		if i == MaxListDetails {
			out = append(out, Detail{Path: kind, Before: fmt.Sprintf("… and %d more", len(removed)-i)})
			break
		}
		out = append(out, Detail{Path: kind, Before: text(r)})
	}
	for i, r := range added {
		if i == MaxListDetails {
			out = append(out, Detail{Path: kind, After: fmt.Sprintf("… and %d more", len(added)-i)})
			break
		}
		out = append(out, Detail{Path: kind, After: text(r)})
	}
	return out
}

// change is node n's part of the change: the tables' change less n's own
// routes. Its cost is that of n's own routes, or of the listing when the
// change is small enough to list node by node.
func (x *routeDelta[R]) change(n string) (Change, bool) {
	removed, added := len(x.removed)-x.ownRemoved[n], len(x.added)-x.ownAdded[n]
	if removed+added == 0 {
		return Change{}, false
	}
	c := Change{Node: n, Kind: x.kind, Name: x.kind, Action: Update, Reasons: []string{ReasonRoutes},
		Impact: []string{fmt.Sprintf("%s to add, %s to remove, in place", diag.Thousands(added), diag.Thousands(removed))}}
	if x.relative {
		c.Impact[0] += "; listed: the route table's changes, each node's own routes aside"
		c.Details, c.whole = x.details, x.whole
		return c, true
	}
	notOwn := func(r R) bool { return x.owner(r) != n }
	c.Details = listed(x.kind, filter(x.removed, notOwn), filter(x.added, notOwn), x.text)
	return c, true
}

func filter[R any](rs []R, keep func(R) bool) []R {
	var out []R
	for _, r := range rs {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}
