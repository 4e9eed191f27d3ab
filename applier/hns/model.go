// Package hns is the agent's model of the Windows Host Networking Service:
// the objects (networks, endpoints, their policies), the Client interface
// the applier consumes, and Diff, which turns observed state (have) into
// desired state (want) as a list of Ops.
//
// Everything here is portable: Diff is tested on Linux against hnsmem, an
// in-memory HNS; hnswin talks to the real one on Windows.
//
// # Ownership
//
// The agent owns exactly the network its plan names and that network's
// host endpoint (also named by the plan). Pod endpoints belong to the CNI:
// the agent programs only their ACL policies and never creates or deletes
// them. Load balancers and remote endpoints belong to kube-proxy and are
// never touched. Ownership is recognised by name, so it survives an agent
// restart with no memory: nothing the agent did not name in its plan is
// ever deleted, with one exception. When a plan renames the network (HNS
// cannot rename one), the network the agent owned under the old name is
// replaced: the one its state directory records (Want.Owned), or, with
// no record, the one network of exactly the plan's type, subnets and VNI
// (see Previous). Without such positive evidence nothing is adopted.
package hns

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// State is HNS as observed (have) or desired (want).
type State struct {
	Networks  []Network  `json:"networks"`
	Endpoints []Endpoint `json:"endpoints"`
	// LoadBalancers are kube-proxy's; the agent only counts them.
	LoadBalancers []LoadBalancer `json:"loadBalancers,omitempty"`
}

// Network is an HNS network.
type Network struct {
	ID   string `json:"id,omitempty"` // HNS's GUID; never in a plan
	Name string `json:"name"`
	Type string `json:"type"` // "Overlay", "L2Bridge", ...
	// Subnets are the network's address prefixes with their gateways.
	Subnets []Subnet `json:"subnets"`
	// VXLANPort is the VxlanPort policy (0: none).
	VXLANPort uint16 `json:"vxlanPort,omitempty"`
	// HostRoute is the HostRoute policy.
	HostRoute bool `json:"hostRoute,omitempty"`
	// AdapterName is the NetAdapterName policy ("": none).
	AdapterName string `json:"adapterName,omitempty"`
	// RemoteRoutes are the RemoteSubnetRoute policies: one op each in
	// Diff, sent in batches (BatchRoutes).
	RemoteRoutes []RemoteRoute `json:"remoteRoutes,omitempty"`
	// ProviderAddress and DRMAC are the policies HNS adds to a new Overlay
	// network by itself; want leaves them empty and Diff ignores them.
	ProviderAddress netip.Addr `json:"providerAddress,omitzero"`
	DRMAC           string     `json:"drMac,omitempty"`
	// NonPersistent networks (Flags 8) vanish when the host reboots.
	NonPersistent bool `json:"nonPersistent,omitempty"`
}

// Subnet is one subnet of a network.
type Subnet struct {
	Prefix  netip.Prefix `json:"prefix"`
	Gateway netip.Addr   `json:"gateway"` // next hop of the default route
	VNI     uint32       `json:"vni,omitempty"`
}

// RemoteRoute is a RemoteSubnetRoute policy.
type RemoteRoute struct {
	Prefix          netip.Prefix `json:"prefix"`
	VNI             uint32       `json:"vni"`
	ProviderAddress netip.Addr   `json:"providerAddress"`
	DRMAC           string       `json:"drMac"`
}

// Endpoint is an HNS endpoint.
type Endpoint struct {
	ID      string       `json:"id,omitempty"`
	Name    string       `json:"name"`
	Network string       `json:"network"` // the network's name
	IP      netip.Prefix `json:"ip"`      // address with the subnet's length
	MAC     string       `json:"mac,omitempty"`
	Remote  bool         `json:"remote,omitempty"` // Flags RemoteEndpoint
	// HostAttached is an L2Bridge host endpoint attached to the host.
	HostAttached bool `json:"hostAttached,omitempty"`
	// Attached says the endpoint is in a namespace other than the host's
	// (a container's compartment: v2's HostComputeNamespace), or, in a v1
	// document, shared with containers (SharedContainers, State Attached
	// or AttachedSharing). A sandbox may still use it.
	Attached bool `json:"attached,omitempty"`
	// Health is what HNS says of the endpoint's condition; nil when it
	// says nothing, which is the case on every host read through the v2
	// API (see EndpointHealth).
	Health *EndpointHealth `json:"health,omitempty"`
	// Policies are the endpoint's non-ACL policies (ProviderAddress,
	// OutBoundNAT, SDNRoute, ...), ACLs its ACL policies.
	Policies []plan.Policy `json:"policies,omitempty"`
	ACLs     []plan.ACL    `json:"acls,omitempty"`
}

// EndpointHealth is the condition HNS reports of an endpoint. Only HNS's
// v1 documents carry it: State (hcsshim's internal/hns EndpointState:
// Uninitialized, Created, Attached, AttachedSharing, Detached, Degraded,
// Destroyed — which Calico reads to find stale endpoints) and
// Health.LastErrorCode (a real v1 Get-HNSEndpoint shows
// {"LastErrorCode": 0, ...}). hcsshim v0.15's v2 HostComputeEndpoint has
// no State, and its Health is {Data, Extra}, which says nothing the agent
// can read: endpoints read through v2 have no EndpointHealth.
type EndpointHealth struct {
	// State is the v1 State's name ("" when the document had none).
	State string `json:"state,omitempty"`
	// LastErrorCode is v1's Health.LastErrorCode (0: no error).
	LastErrorCode uint32 `json:"lastErrorCode,omitempty"`
}

// Bad says whether HNS reports the endpoint unusable or failed, and why:
// State Degraded, Detached or Destroyed, or a LastErrorCode.
func (h *EndpointHealth) Bad() (string, bool) {
	if h == nil {
		return "", false
	}
	switch h.State {
	case "Degraded", "Detached", "Destroyed":
		if h.LastErrorCode != 0 {
			return fmt.Sprintf("state %s, last error 0x%08X", h.State, h.LastErrorCode), true
		}
		return "state " + h.State, true
	}
	if h.LastErrorCode != 0 {
		return fmt.Sprintf("last error 0x%08X", h.LastErrorCode), true
	}
	return "", false
}

// LoadBalancer is a kube-proxy load balancer (foreign).
type LoadBalancer struct {
	ID  string     `json:"id"`
	VIP netip.Addr `json:"vip"`
}

// Network returns the network named name.
func (s *State) Network(name string) *Network {
	for i := range s.Networks {
		if s.Networks[i].Name == name {
			return &s.Networks[i]
		}
	}
	return nil
}

// Endpoint returns the endpoint named name.
func (s *State) Endpoint(name string) *Endpoint {
	for i := range s.Endpoints {
		if s.Endpoints[i].Name == name {
			return &s.Endpoints[i]
		}
	}
	return nil
}

// EndpointsOn lists the endpoints of a network.
func (s *State) EndpointsOn(network string) []*Endpoint {
	var out []*Endpoint
	for i := range s.Endpoints {
		if s.Endpoints[i].Network == network {
			out = append(out, &s.Endpoints[i])
		}
	}
	return out
}

// Canonical sorts everything that HNS holds as an unordered set, so that
// two states compare by value.
func (s *State) Canonical() {
	slices.SortFunc(s.Networks, func(a, b Network) int { return strings.Compare(a.Name, b.Name) })
	for i := range s.Networks {
		slices.SortFunc(s.Networks[i].RemoteRoutes, compareRoute)
	}
	slices.SortFunc(s.Endpoints, func(a, b Endpoint) int {
		return strings.Compare(a.Network+"/"+a.Name, b.Network+"/"+b.Name)
	})
	slices.SortFunc(s.LoadBalancers, func(a, b LoadBalancer) int { return strings.Compare(a.ID, b.ID) })
}

func compareRoute(a, b RemoteRoute) int {
	if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
		return c
	}
	return a.Prefix.Bits() - b.Prefix.Bits()
}
