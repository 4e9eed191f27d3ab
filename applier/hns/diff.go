package hns

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// Want is what a plan wants of HNS: the owned network and host endpoint,
// and the ACL lists of pod endpoints, by address (the CNI names them).
type Want struct {
	Network      Network
	HostEndpoint Endpoint
	// Foreign is set for a policy-only plan: it matches the networks,
	// another program's, whose pod endpoints the agent programs. Network
	// and HostEndpoint are then empty, and Diff makes ACL ops only.
	Foreign *plan.NetworkMatcher
	// PodACLs are the ACL lists of the node's pod endpoints. In a
	// policy-only plan every pod of the node has an entry, empty when no
	// policy applies: the agent's ACLs go, the owner's stay.
	PodACLs map[netip.Addr][]plan.ACL
	// PodNames are the pods of PodACLs, "namespace/name" by address, for
	// what the agent reports.
	PodNames map[netip.Addr]string
	// Owned is the network the agent recorded as its own (its state
	// directory), nil when there is no record. When it names another
	// network than Network, the plan renamed it: Diff replaces it (see
	// Previous) instead of creating a second network on the same block.
	Owned *Owned
	// Echo is the baseline of what HNS echoed of the agent's writes (its
	// state directory), nil when there is none: Diff then compares HNS
	// with the plan alone, with the codec's tolerance.
	Echo *Echo
}

// Diff returns the ops that turn have into want, each one mutating call:
// a network created or replaced, routes added or removed one by one, the
// host endpoint created, replaced or updated, and the ACL lists of pod
// endpoints whose canonical list differs. It never deletes an object the
// agent does not own (see the package doc), and it ignores what HNS adds
// by itself (an Overlay network's ProviderAddress and DrMacAddress).
//
// Each object is compared through the baseline (want.Echo): while HNS
// reads an object back as it did after the agent's write, it holds what
// the agent sent. Otherwise it is compared with the plan with the codec's
// tolerance: ACL lists by EquivalentACLs, MACs without regard to case,
// and a network's identity field read back absent (VNI 0, no VxlanPort
// policy, no gateway) is unknown, never changed: only a present,
// different value (or the plan's own change) replaces a network.
//
// Endpoints named like the host endpoint on its network are duplicates
// (HNS allows them): the one at the plan's address is kept, the others
// deleted by ID.
//
// For a policy-only plan (want.Foreign) it makes ACL ops only: see
// diffForeign.
func Diff(have *State, want *Want) []Op {
	if want.Foreign != nil {
		return diffForeign(have, want)
	}
	var ops []Op
	wn := &want.Network
	hn := want.Echo.echoNetwork(have.Network(wn.Name))
	old, oldHost := Previous(have, want)
	replaced := false
	switch {
	case old != nil:
		// A rename: HNS cannot rename a network, so the agent's network
		// is deleted (after a drain) and created under the new name. Its
		// host endpoint goes first, as for any replace.
		for i, name := range []string{oldHost, want.HostEndpoint.Name} {
			if name == "" || i == 1 && name == oldHost {
				continue
			}
			if he := have.Endpoint(name); he != nil && he.Network == old.Name {
				ops = append(ops, Op{Action: Delete, Kind: KindEndpoint, Name: he.Name, Network: he.Network, Reason: "its network is replaced"})
			}
		}
		ops = append(ops, Op{Action: Replace, Kind: KindNetwork, Name: wn.Name, From: old.Name, NetworkSpec: bare(wn), Reason: ReasonRenamed})
		replaced = true
	case hn == nil:
		ops = append(ops, Op{Action: Create, Kind: KindNetwork, Name: wn.Name, NetworkSpec: bare(wn), Reason: "absent"})
		replaced = true
	case !sameIdentity(hn, wn):
		// HNS refuses to delete a network that still has endpoints; ours
		// goes first. The CNI's pods must be gone already (a drain).
		if he := have.Endpoint(want.HostEndpoint.Name); he != nil && he.Network == wn.Name {
			ops = append(ops, Op{Action: Delete, Kind: KindEndpoint, Name: he.Name, Network: he.Network, Reason: "its network is replaced"})
		}
		ops = append(ops, Op{Action: Replace, Kind: KindNetwork, Name: wn.Name, NetworkSpec: bare(wn), Reason: changedIdentity(hn, wn)})
		replaced = true
	case hn.HostRoute != wn.HostRoute || hn.AdapterName != wn.AdapterName:
		ops = append(ops, Op{Action: Update, Kind: KindNetPolicies, Name: wn.Name, NetworkSpec: bare(wn), Reason: "network policies"})
	}
	// Routes: one op each. After a create or replace the network has none.
	var haveRoutes []RemoteRoute
	if !replaced {
		haveRoutes = hn.RemoteRoutes
	}
	ops = append(ops, routeOps(wn.Name, haveRoutes, wn.RemoteRoutes)...)

	// The host endpoint.
	we := &want.HostEndpoint
	he, dups := hostEndpoint(have, we)
	if replaced && he != nil && (he.Network == wn.Name || old != nil && he.Network == old.Name) {
		he, dups = nil, nil // deleted before the network, or gone with it
	}
	for _, d := range dups {
		ops = append(ops, Op{Action: Delete, Kind: KindEndpoint, Name: d.Name, ID: d.ID, Network: d.Network, Reason: "a duplicate of the host endpoint (another has the plan's address)"})
	}
	he = want.Echo.echoEndpoint(he)
	switch {
	case he == nil:
		ops = append(ops, Op{Action: Create, Kind: KindEndpoint, Name: we.Name, Network: wn.Name, EndpointSpec: we, Reason: "absent"})
	case he.Network != we.Network || he.IP != we.IP || he.Remote != we.Remote || he.HostAttached != we.HostAttached || we.MAC != "" && !SameMAC(he.MAC, we.MAC):
		ops = append(ops, Op{Action: Replace, Kind: KindEndpoint, Name: we.Name, Network: wn.Name, EndpointSpec: we, Reason: "address, MAC or flags changed"})
	case !samePolicies(he.Policies, we.Policies) || !EquivalentACLs(we.ACLs, he.ACLs):
		ops = append(ops, Op{Action: Update, Kind: KindEndpoint, Name: we.Name, ID: he.ID, Network: wn.Name, EndpointSpec: we, Reason: "policies changed"})
	}

	// Pod endpoints (the CNI's): only their ACL lists, only where they
	// differ. After a replace they are gone; the CNI recreates them.
	if !replaced {
		for _, e := range PodEndpoints(have, want) {
			acls, ok := want.PodACLs[e.IP.Addr()]
			if !ok || EquivalentACLs(acls, want.Echo.echoACLs(e)) {
				continue
			}
			ops = append(ops, Op{Action: Update, Kind: KindACL, Name: e.Name, ID: e.ID, Network: wn.Name,
				ACLs: CanonicalACLs(acls), Reason: "ACL list differs"})
		}
	}
	return ops
}

// bare is a network without its routes: routes are ops of their own.
func bare(n *Network) *Network {
	c := *n
	c.RemoteRoutes = nil
	c.ProviderAddress, c.DRMAC = netip.Addr{}, ""
	return &c
}

// netIdentity is what HNS cannot change in place.
type netIdentity struct {
	typ     string
	subnets string
	port    uint16
}

func identity(n *Network) netIdentity {
	return netIdentity{typ: n.Type, subnets: fmt.Sprint(n.Subnets), port: n.VXLANPort}
}

// sameIdentity compares a network's identity as read (h) with the plan's
// (w): a field read back absent is unknown, and so not a change.
func sameIdentity(h, w *Network) bool {
	if h.Type != w.Type || h.VXLANPort != 0 && h.VXLANPort != w.VXLANPort || len(h.Subnets) != len(w.Subnets) {
		return false
	}
	for i, s := range h.Subnets {
		ws := w.Subnets[i]
		if s.Prefix != ws.Prefix || s.Gateway.IsValid() && s.Gateway != ws.Gateway || s.VNI != 0 && s.VNI != ws.VNI {
			return false
		}
	}
	return true
}

// VXLANOnly reports whether the network as read (h) differs from the
// plan's (w), in what HNS cannot change in place, by its VXLAN identity
// alone — its subnets' VNI, its VxlanPort — and does differ: the same name,
// type and subnets (prefixes, gateways). The replace it causes is then
// the cluster's VXLAN change and nothing else, which the rollout may pace
// apart (rollout.vxlanChange all-at-once). A field read back absent is
// unknown, not changed, as for every replace; a network absent on either
// side is never VXLAN-only.
func VXLANOnly(h, w *Network) bool {
	if h == nil || w == nil || h.Name != w.Name || len(h.Subnets) != len(w.Subnets) || sameIdentity(h, w) {
		return false
	}
	x := *h
	x.VXLANPort = w.VXLANPort
	x.Subnets = slices.Clone(h.Subnets)
	for i := range x.Subnets {
		x.Subnets[i].VNI = w.Subnets[i].VNI
	}
	return sameIdentity(&x, w)
}

func changedIdentity(h, w *Network) string {
	switch {
	case h.Type != w.Type:
		return "network-type-changed"
	case h.VXLANPort != 0 && h.VXLANPort != w.VXLANPort:
		return "vxlan-port-changed"
	case len(h.Subnets) == len(w.Subnets) && len(h.Subnets) > 0 && h.Subnets[0].Prefix == w.Subnets[0].Prefix && h.Subnets[0].VNI != w.Subnets[0].VNI:
		return "vni-changed"
	}
	return "subnet-changed"
}

// hostEndpoint finds the host endpoint in have: of the endpoints named
// like it, the one on its network at its address, else the first on its
// network, else the first anywhere. The others of that name on its
// network are duplicates.
func hostEndpoint(have *State, we *Endpoint) (he *Endpoint, dups []*Endpoint) {
	var named []*Endpoint
	for i := range have.Endpoints {
		if e := &have.Endpoints[i]; e.Name == we.Name {
			named = append(named, e)
		}
	}
	if len(named) <= 1 {
		if len(named) == 1 {
			return named[0], nil
		}
		return nil, nil
	}
	pick := -1
	for i, e := range named {
		if e.Network == we.Network && e.IP.Addr() == we.IP.Addr() {
			pick = i
			break
		}
	}
	if pick < 0 {
		pick = slices.IndexFunc(named, func(e *Endpoint) bool { return e.Network == we.Network })
	}
	if pick < 0 {
		return named[0], nil
	}
	for i, e := range named {
		if i != pick && e.Network == we.Network {
			dups = append(dups, e)
		}
	}
	return named[pick], dups
}

// routeOps adds and removes routes one by one; a route whose prefix stays
// but whose VTEP changes is removed and added again (two objects differ).
func routeOps(network string, have, want []RemoteRoute) []Op {
	hs := make(map[RemoteRoute]bool, len(have))
	for _, r := range have {
		hs[r] = true
	}
	ws := make(map[RemoteRoute]bool, len(want))
	for _, r := range want {
		ws[r] = true
	}
	var ops []Op
	for _, r := range sortedRoutes(have) {
		if !ws[r] {
			ops = append(ops, Op{Action: Delete, Kind: KindRoute, Name: r.Prefix.String(), Network: network, RouteSpec: &r, Reason: "not in the plan"})
		}
	}
	for _, r := range sortedRoutes(want) {
		if !hs[r] {
			ops = append(ops, Op{Action: Create, Kind: KindRoute, Name: r.Prefix.String(), Network: network, RouteSpec: &r, Reason: "absent"})
		}
	}
	return ops
}

func sortedRoutes(rs []RemoteRoute) []RemoteRoute {
	out := slices.Clone(rs)
	slices.SortFunc(out, func(a, b RemoteRoute) int {
		return cmp.Or(compareRoute(a, b), a.ProviderAddress.Compare(b.ProviderAddress), cmp.Compare(a.DRMAC, b.DRMAC), cmp.Compare(a.VNI, b.VNI))
	})
	return out
}

// CanonicalACLs sorts an ACL list by direction, priority and Id: HNS holds
// it as a set, evaluated by priority. A list already in that order is
// returned as is.
func CanonicalACLs(acls []plan.ACL) []plan.ACL {
	if slices.IsSortedFunc(acls, compareACL) {
		return acls
	}
	out := slices.Clone(acls)
	slices.SortFunc(out, compareACL)
	return out
}

// compareACL orders ACLs by direction, rule type, priority and Id, then
// by everything else: two ACLs of another writer may share a priority
// and have no Id (AKS's two Blocks at 200), and the order must not depend
// on the order they were read in.
func compareACL(a, b plan.ACL) int {
	return cmp.Or(cmp.Compare(a.Direction, b.Direction), cmp.Compare(a.RuleType, b.RuleType), cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Id, b.Id),
		cmp.Compare(a.Action, b.Action), cmp.Compare(a.Protocols, b.Protocols), cmp.Compare(a.LocalAddresses, b.LocalAddresses),
		cmp.Compare(a.RemoteAddresses, b.RemoteAddresses), cmp.Compare(a.LocalPorts, b.LocalPorts), cmp.Compare(a.RemotePorts, b.RemotePorts))
}

func sameACLs(a, b []plan.ACL) bool {
	if len(a) != len(b) {
		return false
	}
	return slices.Equal(CanonicalACLs(a), CanonicalACLs(b))
}

func samePolicies(a, b []plan.Policy) bool {
	key := func(ps []plan.Policy) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = plan.Describe(p)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}
