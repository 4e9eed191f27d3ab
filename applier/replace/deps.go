package replace

import (
	"context"
	"fmt"
	"net/netip"
)

// A Drainer empties the node of pods before its network is deleted. The
// real one (applier/kube) cordons the Node and evicts through the Eviction
// API, so PodDisruptionBudgets are honoured. Every method is idempotent:
// the runner calls them again when it resumes.
type Drainer interface {
	// Cordon marks the node unschedulable.
	Cordon(ctx context.Context) error
	// Evict asks for the eviction of every pod that must leave the node
	// (not DaemonSet or host-network pods) and returns those that are
	// still there: an eviction refused by a PodDisruptionBudget is pending,
	// not an error. It is called repeatedly until the pods are gone.
	Evict(ctx context.Context) (pending []string, err error)
	// Uncordon marks the node schedulable again.
	Uncordon(ctx context.Context) error
}

// HostRoutes is the host's IP routing table (not HNS's). Creating an
// Overlay or L2Bridge network binds a vSwitch to the NIC: the NIC's
// addresses move to a new "vEthernet (NIC)" interface, and routes that
// were added by hand or by a cloud agent on the NIC (the metadata route
// 169.254.169.254/32, for one) can be lost. The runner snapshots the table
// before deleting the network and restores what the recreate lost.
type HostRoutes interface {
	// List returns every route of the table, IPv4 and IPv6.
	List(ctx context.Context) ([]Route, error)
	// Add adds r. Adding a route that is already there is not an error.
	Add(ctx context.Context, r Route) error
}

// Route is one entry of the host's routing table.
type Route struct {
	Prefix netip.Prefix `json:"prefix"`
	// NextHop is the gateway; the unspecified address (0.0.0.0, ::) or the
	// zero Addr for an on-link route.
	NextHop netip.Addr `json:"nextHop,omitzero"`
	// IfIndex and IfAlias name the interface ("Ethernet", "vEthernet
	// (Ethernet)"). An index does not survive a vSwitch bind.
	IfIndex uint32 `json:"ifIndex"`
	IfAlias string `json:"ifAlias,omitempty"`
	Metric  uint32 `json:"metric"`
	// Automatic routes are made by the OS from an interface's addresses
	// (Windows: protocol Local or origin WellKnown: on-link subnet, host
	// /32, broadcast, multicast). They come back by themselves on the new
	// interface and are never restored.
	Automatic bool `json:"automatic,omitempty"`
}

func (r Route) String() string {
	nh := "on-link"
	if r.gateway() {
		nh = "via " + r.NextHop.String()
	}
	return fmt.Sprintf("%s %s dev %d (%s) metric %d", r.Prefix, nh, r.IfIndex, r.IfAlias, r.Metric)
}

// gateway reports whether the route has a real next hop.
func (r Route) gateway() bool { return r.NextHop.IsValid() && !r.NextHop.IsUnspecified() }

// key is what makes two routes the same route for restoring: where they
// lead and through whom, not the interface index, which a vSwitch bind
// changes.
type routeKey struct {
	prefix  netip.Prefix
	nextHop netip.Addr
}

func (r Route) key() routeKey {
	k := routeKey{prefix: r.Prefix.Masked()}
	if r.gateway() {
		k.nextHop = r.NextHop
	}
	return k
}

// lostRoutes returns the routes of before that after lacks and that must
// be restored, each moved onto the interface that now reaches its next
// hop. Automatic routes and routes inside hnsSubnets (HNS's own, for the
// old or new network) are not the host's to restore.
func lostRoutes(before, after []Route, hnsSubnets []netip.Prefix) ([]Route, error) {
	have := map[routeKey]bool{}
	for _, r := range after {
		have[r.key()] = true
	}
	var lost []Route
	for _, r := range before {
		if r.Automatic || have[r.key()] || overlapsAny(r.Prefix, hnsSubnets) {
			continue
		}
		have[r.key()] = true // a route listed twice is restored once
		moved, err := rehome(r, after)
		if err != nil {
			return nil, err
		}
		lost = append(lost, moved)
	}
	return lost, nil
}

func overlapsAny(p netip.Prefix, ps []netip.Prefix) bool {
	for _, q := range ps {
		if q.Overlaps(p) {
			return true
		}
	}
	return false
}

// rehome puts r on the interface that reaches its next hop now: the one
// of the longest non-default route containing the next hop (the NIC's
// on-link subnet route, moved to vEthernet by the bind). An on-link route,
// or one whose next hop nothing reaches, keeps its interface if that
// still exists.
func rehome(r Route, table []Route) (Route, error) {
	if r.gateway() {
		best := -1
		for i, t := range table {
			if t.Prefix.Bits() == 0 || !t.Prefix.Contains(r.NextHop) || t.Prefix.Masked() == r.Prefix.Masked() {
				continue
			}
			if best < 0 || t.Prefix.Bits() > table[best].Prefix.Bits() {
				best = i
			}
		}
		if best >= 0 {
			r.IfIndex, r.IfAlias = table[best].IfIndex, table[best].IfAlias
			return r, nil
		}
	}
	for _, t := range table {
		if t.IfIndex == r.IfIndex {
			return r, nil
		}
	}
	return r, fmt.Errorf("route %s: no interface reaches it any more", r)
}
