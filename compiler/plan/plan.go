// Package plan defines the NodePlan: the per-node HNS plan file that the
// compiler writes and the agent reads (DESIGN §4.2). It is the contract
// between the two binaries and imports neither side: standard library only.
//
// HNS objects use the HNS v2 JSON schema's own names (Type "Overlay",
// Ipams[].Subnets[].Policies[{Type:"VSID"}], RemoteSubnetRoute, VxlanPort,
// HostRoute, OutBoundNAT with Exceptions, SDNRoute, ProviderAddress), so an
// operator can hold a plan next to `Get-HnsNetwork | ConvertTo-Json`.
// Plans key HNS objects by Name, never by the GUID HNS assigns.
package plan

import (
	"net/netip"
)

// FormatVersion is the plan format, "major.minor" or "major". A reader
// accepts any minor of its major and ignores fields it does not know; it
// rejects another major.
const FormatVersion = "2"

// Kind is the value of a plan's "kind".
const Kind = "NodePlan"

// NodePlan is the desired HNS state of one Windows node.
type NodePlan struct {
	FormatVersion string `json:"formatVersion"`
	Kind          string `json:"kind"`
	Node          string `json:"node"`
	// Digest is "sha256:<hex>" over the encoded plan with this field's
	// value empty (see Encode). It is empty only while encoding.
	Digest     string `json:"digest"`
	Cluster    string `json:"cluster"`
	Networking string `json:"networking"` // the intent's networking mode
	// PolicyOnly is set when another program (the platform's CNI,
	// flanneld) owns the node's network and pod endpoints: the agent
	// programs their ACLs only. Network, HostEndpoint and PodEndpoint are
	// then empty (and left out), and no route table is named. Readers
	// before it refuse such a plan: its empty network is of no type they
	// program (Validate).
	PolicyOnly *PolicyOnly `json:"policyOnly,omitempty"`

	// Network is the node's HNS network. Its Immutable list names the
	// fields that HNS cannot change in place: a change to any is a replace
	// (drain, delete, recreate).
	Network Network `json:"network,omitzero"`
	// SingleNetwork is windows_use_single_network: one network, one block
	// per host. Flipping it can leak HNS endpoints; drain first. Absent
	// is false (a policy-only plan's network is not the agent's).
	SingleNetwork bool `json:"singleNetwork,omitempty"`
	// Replacement is how the agent may recreate the network when an
	// immutable property changes: "drain" (cordon, evict, recreate,
	// uncordon; the default when empty) or "manual" (wait for
	// `hnsplan-agent replace --confirm`). Readers of format 1 ignore it.
	Replacement string `json:"replacement,omitempty"`
	// Rollout is how the node takes turns with the others for a replace;
	// nil for the defaults (one node at a time).
	Rollout *Rollout `json:"rollout,omitempty"`
	// HostEndpoint is the node's own endpoint on the network (Calico_ep).
	HostEndpoint Endpoint `json:"hostEndpoint,omitzero"`
	// RouteTable names the route table that holds the routes to the
	// other nodes' pod blocks (the VXLAN routes of an Overlay network, the
	// host routes of static-routes); nil when the node takes no routes
	// from hnsplan (Routing says who programs them).
	RouteTable *RouteTableRef `json:"routeTable,omitempty"`
	// Routing says who programs the routes to other nodes when the plan
	// holds none: "bgp" (the Windows BGP router), "flanneld",
	// "cloud-provider"; empty when a route table does.
	Routing string `json:"routing,omitempty"`
	// PodEndpoint is what every pod endpoint on the node gets.
	PodEndpoint PodEndpointTemplate `json:"podEndpoint,omitzero"`
	// ProgramChunks name the chunks of the policy program, in order;
	// absent when the intent has no network policy.
	ProgramChunks []PartRef `json:"programChunks,omitempty"`
	// Endpoints are the node's pod endpoints, rendered from an inventory,
	// each with its ACL list.
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	// Unresolved lists what only the live cluster knows, for the agent
	// (or a dry run with an inventory) to fill in.
	Unresolved []Unresolved `json:"unresolved,omitempty"`

	// Routes and Program are the shared parts the plan names, once
	// assembled (Parts.Assemble; the compiler sets them before
	// EncodeParts): the nodes of one compilation share them. Routes gives
	// the node's routes (RemoteSubnetRoutes, HostRoutes); from Program
	// and the live pods the agent renders each pod endpoint's ACL list
	// (compiler/acl).
	Routes  *RouteTable `json:"-"`
	Program *Program    `json:"-"`
}

// Network is an HNS v2 network (HostComputeNetwork).
type Network struct {
	Name     string   `json:"Name"`
	Type     string   `json:"Type"` // "Overlay" or "L2Bridge"
	Ipams    []Ipam   `json:"Ipams"`
	Policies []Policy `json:"Policies,omitempty"`
	// Immutable names the identity fields of the network (hnsplan's, not
	// HNS's): "Name", "Type", "Subnet", "VNI", "VxlanPort".
	Immutable []string `json:"Immutable"`
}

// Ipam is an HNS network's address management.
type Ipam struct {
	Type    string   `json:"Type"` // "Static"
	Subnets []Subnet `json:"Subnets"`
}

// Subnet is one subnet of an HNS network.
type Subnet struct {
	IpAddressPrefix netip.Prefix `json:"IpAddressPrefix"`
	Policies        []Policy     `json:"Policies,omitempty"`
	Routes          []Route      `json:"Routes,omitempty"`
}

// Route is an HNS route.
type Route struct {
	NextHop           netip.Addr   `json:"NextHop"`
	DestinationPrefix netip.Prefix `json:"DestinationPrefix"`
}

// IpConfig is one address of an endpoint.
type IpConfig struct {
	IpAddress    netip.Addr `json:"IpAddress"`
	PrefixLength int        `json:"PrefixLength"`
}

// Dns is an endpoint's DNS configuration.
type Dns struct {
	Search     []string     `json:"Search,omitempty"`
	ServerList []netip.Addr `json:"ServerList,omitempty"`
}

// Endpoint flags (HNS v2).
const FlagRemoteEndpoint = 1

// Endpoint is an HNS v2 endpoint (HostComputeEndpoint).
type Endpoint struct {
	Name             string     `json:"Name,omitempty"`
	IpConfigurations []IpConfig `json:"IpConfigurations"`
	MacAddress       string     `json:"MacAddress,omitempty"`
	Dns              *Dns       `json:"Dns,omitempty"`
	Routes           []Route    `json:"Routes,omitempty"`
	Policies         []Policy   `json:"Policies,omitempty"`
	Flags            int        `json:"Flags,omitempty"`
	// Attach is how the endpoint is attached (hnsplan's): "Host" for an
	// L2Bridge host endpoint (HostAttach).
	Attach string `json:"Attach,omitempty"`
	// Pod is "namespace/name" for a pod endpoint. Pod endpoints belong to
	// the CNI; only their policies are the agent's.
	Pod string `json:"Pod,omitempty"`
}

// PodEndpointTemplate is what every pod endpoint of a node gets.
type PodEndpointTemplate struct {
	Gateway netip.Addr `json:"Gateway"`
	// MacAddressRule is "0E-2A-<ip hex>": the prefix and the address's four
	// octets in hex (Calico, flannel).
	MacAddressRule string `json:"MacAddressRule"`
	// DnsSearch is the one search suffix Windows takes, with "{namespace}"
	// standing for the pod's namespace.
	DnsSearch  string       `json:"DnsSearch"`
	DnsServers []netip.Addr `json:"DnsServers,omitempty"`
	Routes     []Route      `json:"Routes"`
	Policies   []Policy     `json:"Policies,omitempty"`
}

// RemoteSubnetRoute is a RemoteSubnetRoute network policy's settings.
type RemoteSubnetRoute struct {
	DestinationPrefix netip.Prefix `json:"DestinationPrefix"`
	IsolationId       uint32       `json:"IsolationId"`
	ProviderAddress   netip.Addr   `json:"ProviderAddress"`
	// DistributedRouterMacAddress is the remote VTEP's MAC; empty when only
	// the live cluster knows it (see Unresolved).
	DistributedRouterMacAddress string `json:"DistributedRouterMacAddress"`
	// Node is the remote node (hnsplan's).
	Node string `json:"Node"`
}

// HostRoute is a route in the host's routing table.
type HostRoute struct {
	DestinationPrefix netip.Prefix `json:"DestinationPrefix"`
	NextHop           netip.Addr   `json:"NextHop"`
	Node              string       `json:"Node"`
}

// Unresolved is a value the plan leaves to the live cluster.
type Unresolved struct {
	// Field is where the value goes: "remoteSubnetRoutes[win-2].DistributedRouterMacAddress".
	Field string `json:"field"`
	// Source is where the agent reads it: "Node win-2 annotation projectcalico.org/VXLANTunnelMACAddr".
	Source string `json:"source"`
	// Nodes are the nodes the value is missing for, if it is per node.
	Nodes []string `json:"nodes,omitempty"`
}
