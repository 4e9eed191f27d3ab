package hns

import (
	"fmt"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// Action is what an Op does: plan.Action, the vocabulary `hnsplan diff`
// shares, printed by its Symbol (Terraform's). The zero Action is
// invalid: a plan of ops holds no no-ops.
type Action = plan.Action

const (
	Create  = plan.Create
	Update  = plan.Update
	Delete  = plan.Delete
	Replace = plan.Replace // printed as -/+
)

// Kind is what an Op acts on.
type Kind string

const (
	KindNetwork     Kind = "network"     // a whole network (create, delete, replace)
	KindRoute       Kind = "route"       // one RemoteSubnetRoute policy of a network
	KindRoutes      Kind = "routes"      // many RemoteSubnetRoute policies of one network, in one call (BatchRoutes)
	KindNetPolicies Kind = "netpolicies" // a network's other policies (HostRoute, NetAdapterName, VxlanPort)
	KindEndpoint    Kind = "endpoint"    // an owned endpoint (the host endpoint)
	KindACL         Kind = "acl"         // the ACL list of an endpoint (owned or the CNI's)
)

// Op is one change to HNS. Exactly the field of its Kind is set.
type Op struct {
	Action Action
	Kind   Kind
	Name   string // the object's name; for a route, its prefix; for ACLs, the endpoint's name
	// ID is, for an op on one existing endpoint (an ACL update, the
	// delete of a duplicate), its HNS ID: HNS does not keep endpoint
	// names unique (calico#4280), so the name alone may find another.
	ID string
	// Network is the network the object belongs to (routes, endpoints, ACLs).
	Network string
	// From is, for a network Replace that renames, the network's current
	// name: the op deletes From and creates Name.
	From   string
	Reason string

	NetworkSpec *Network
	RouteSpec   *RemoteRoute
	// Routes are, for a KindRoutes op (Create or Delete), the routes it
	// adds or removes, all on Network: one HNS call (BatchRoutes).
	Routes       []RemoteRoute
	EndpointSpec *Endpoint
	// ACLs is, for a KindACL op, the endpoint's new ACL list. Its other
	// policies (the CNI's OutBoundNAT, SDNRoute, L2Driver, ...) stay as
	// HNS holds them when the op is applied: HNS's Update replaces an
	// endpoint's whole policy list, so a client reads them at the call
	// and sends them back unchanged, never from an older snapshot.
	ACLs []plan.ACL
}

// String is one line: "-/+ network Calico (vni-changed)".
func (o Op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%3s %s %s", o.Action.Symbol(), o.Kind, o.Name)
	if o.Network != "" && o.Kind != KindNetwork {
		fmt.Fprintf(&b, " on %s", o.Network)
	}
	if o.From != "" {
		fmt.Fprintf(&b, " (was %s)", o.From)
	}
	switch {
	case o.Kind == KindRoutes && len(o.Routes) > 0:
		fmt.Fprintf(&b, " (%d routes, %s … %s)", len(o.Routes), o.Routes[0].Prefix, o.Routes[len(o.Routes)-1].Prefix)
	case o.RouteSpec != nil && o.Action != Delete:
		fmt.Fprintf(&b, " (VSID %d, PA %s, DR MAC %s)", o.RouteSpec.VNI, o.RouteSpec.ProviderAddress, o.RouteSpec.DRMAC)
	case o.Kind == KindACL:
		fmt.Fprintf(&b, " (%d ACLs)", len(o.ACLs))
	}
	if o.Reason != "" {
		fmt.Fprintf(&b, "  # %s", o.Reason)
	}
	return b.String()
}
