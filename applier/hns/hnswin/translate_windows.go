//go:build windows

package hnswin

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/Microsoft/hcsshim/hcn"

	"github.com/hnsplan/hnsplan/applier/hns"
)

// This file translates between hcn's types and the hns model, both ways.
// The policy settings themselves are translated by the portable code in
// policy.go and acl.go, on rawPolicy.
//
//	hcn.HostComputeNetwork              hns.Network
//	  ID, Name, Type                      ID, Name, Type
//	  Ipams[].Subnets[]                   Subnets[]
//	    IpAddressPrefix                     Prefix
//	    Routes[0.0.0.0/0 or ::/0].NextHop   Gateway
//	    Policies[VSID].IsolationId          VNI
//	  Policies[VxlanPort].Port            VXLANPort (4789 implied for Overlay without the feature)
//	  Policies[HostRoute]                 HostRoute
//	  Policies[NetAdapterName]            AdapterName
//	  Policies[RemoteSubnetRoute]         RemoteRoutes[] (IsolationId → VNI, DistributedRouterMacAddress → DRMAC)
//	  Policies[ProviderAddress]           ProviderAddress (read only: HNS adds it)
//	  Policies[DrMacAddress].Address      DRMAC (read only: HNS adds it)
//	  Flags & EnableNonPersistent (8)     NonPersistent
//
//	hcn.HostComputeEndpoint             hns.Endpoint
//	  ID, Name                            ID, Name
//	  HostComputeNetwork (ID)             Network (its name)
//	  IpConfigurations[0]                 IP (address/prefix length)
//	  MacAddress                          MAC ("0E-2A-…")
//	  Flags & RemoteEndpoint (1)          Remote
//	  in a HostDefault namespace          HostAttached
//	  Policies[ACL]                       ACLs (with Id)
//	  Policies[other]                     Policies (typed, or plan.Raw)
//
//	hcn.HostComputeLoadBalancer         hns.LoadBalancer
//	  ID, FrontendVIPs[0]                 ID, VIP

// fromNetPolicies copies hcn's network policies to rawPolicy.
func fromNetPolicies(ps []hcn.NetworkPolicy) []rawPolicy {
	out := make([]rawPolicy, len(ps))
	for i, p := range ps {
		out[i] = rawPolicy{Type: string(p.Type), Settings: p.Settings}
	}
	return out
}

// toNetPolicies copies rawPolicy to hcn's network policies.
func toNetPolicies(ps []rawPolicy) []hcn.NetworkPolicy {
	out := make([]hcn.NetworkPolicy, len(ps))
	for i, p := range ps {
		out[i] = hcn.NetworkPolicy{Type: hcn.NetworkPolicyType(p.Type), Settings: p.Settings}
	}
	return out
}

// fromEndpointPolicies copies hcn's endpoint policies to rawPolicy.
func fromEndpointPolicies(ps []hcn.EndpointPolicy) []rawPolicy {
	out := make([]rawPolicy, len(ps))
	for i, p := range ps {
		out[i] = rawPolicy{Type: string(p.Type), Settings: p.Settings}
	}
	return out
}

// toEndpointPolicies copies rawPolicy to hcn's endpoint policies.
func toEndpointPolicies(ps []rawPolicy) []hcn.EndpointPolicy {
	out := make([]hcn.EndpointPolicy, len(ps))
	for i, p := range ps {
		out[i] = hcn.EndpointPolicy{Type: hcn.EndpointPolicyType(p.Type), Settings: p.Settings}
	}
	return out
}

// fromNetwork translates an hcn network into the model, through its
// JSON (HNS's document) and the portable decoder (wire.go), which the
// real documents of testdata/real test.
func fromNetwork(n *hcn.HostComputeNetwork, vxlanPortSupported bool) (hns.Network, error) {
	b, err := json.Marshal(n)
	if err != nil {
		return hns.Network{}, fmt.Errorf("network %q: %w", n.Name, err)
	}
	return decodeNetwork(b, vxlanPortSupported)
}

// toNetwork translates a network of the model into the hcn network that
// creates it: static IPAM, one subnet per Subnet with its default route
// to the gateway (hcsshim refuses a subnet without one) and its VSID, and
// the VxlanPort (only where the host has the feature), HostRoute and
// NetAdapterName policies.
func toNetwork(n *hns.Network, vxlanPortSupported bool) (*hcn.HostComputeNetwork, error) {
	if n.Name == "" || n.Type == "" {
		return nil, fmt.Errorf("network %q: a name and a type are required", n.Name)
	}
	out := &hcn.HostComputeNetwork{
		Name:          n.Name,
		Type:          hcn.NetworkType(n.Type),
		SchemaVersion: hcn.V2SchemaVersion(),
	}
	var subnets []hcn.Subnet
	for _, s := range n.Subnets {
		sub, err := toSubnet(s)
		if err != nil {
			return nil, fmt.Errorf("network %q: subnet %s: %w", n.Name, s.Prefix, err)
		}
		subnets = append(subnets, sub)
	}
	if len(subnets) > 0 {
		out.Ipams = []hcn.Ipam{{Type: "Static", Subnets: subnets}}
	}
	policies, err := netPolicies(n, vxlanPortSupported)
	if err != nil {
		return nil, err
	}
	out.Policies = toNetPolicies(policies)
	if n.NonPersistent {
		out.Flags |= hcn.EnableNonPersistent
	}
	return out, nil
}

func toSubnet(s hns.Subnet) (hcn.Subnet, error) {
	if !s.Prefix.IsValid() {
		return hcn.Subnet{}, fmt.Errorf("no prefix")
	}
	if !s.Gateway.IsValid() {
		return hcn.Subnet{}, fmt.Errorf("no gateway (HNS needs a default route)")
	}
	sub := hcn.Subnet{
		IpAddressPrefix: s.Prefix.Masked().String(),
		Routes:          []hcn.Route{{NextHop: s.Gateway.String(), DestinationPrefix: defaultRoute(s.Gateway)}},
	}
	if s.VNI != 0 {
		settings, err := json.Marshal(hcn.VsidPolicySetting{IsolationId: s.VNI})
		if err != nil {
			return hcn.Subnet{}, err
		}
		policy, err := json.Marshal(hcn.SubnetPolicy{Type: hcn.VSID, Settings: settings})
		if err != nil {
			return hcn.Subnet{}, err
		}
		sub.Policies = append(sub.Policies, policy)
	}
	return sub, nil
}

// routePolicy is the RemoteSubnetRoute policy of r, in hcsshim's settings
// type, whose IsolationId is 16 bits.
func routePolicy(r *hns.RemoteRoute) (hcn.NetworkPolicy, error) {
	if err := checkVNI16(r.VNI); err != nil {
		return hcn.NetworkPolicy{}, err
	}
	if !r.Prefix.IsValid() || !r.ProviderAddress.IsValid() {
		return hcn.NetworkPolicy{}, fmt.Errorf("route %s: a prefix and a provider address are required", r.Prefix)
	}
	mac, err := formatMAC(r.DRMAC)
	if err != nil {
		return hcn.NetworkPolicy{}, err
	}
	settings, err := json.Marshal(hcn.RemoteSubnetRoutePolicySetting{
		DestinationPrefix:           r.Prefix.Masked().String(),
		IsolationId:                 uint16(r.VNI),
		ProviderAddress:             r.ProviderAddress.String(),
		DistributedRouterMacAddress: mac,
	})
	if err != nil {
		return hcn.NetworkPolicy{}, err
	}
	return hcn.NetworkPolicy{Type: hcn.RemoteSubnetRoute, Settings: settings}, nil
}

// fromEndpoint translates an hcn endpoint into the model, through its
// JSON and the portable decoder. networks maps network IDs (lower case)
// to the networks read; hostAttached holds the IDs (lower case) of the
// endpoints in the host's default namespace.
func fromEndpoint(e *hcn.HostComputeEndpoint, networks map[string]*hns.Network, hostAttached map[string]bool) (hns.Endpoint, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return hns.Endpoint{}, fmt.Errorf("endpoint %q: %w", e.Name, err)
	}
	return decodeEndpoint(b, networks, hostAttached)
}

// toEndpoint translates an endpoint of the model into the hcn endpoint
// that creates it. Its network and its Remote flag are set by
// HostComputeNetwork.CreateEndpoint / CreateRemoteEndpoint; it gets no
// routes (a host endpoint must not take over the host's default route).
func toEndpoint(e *hns.Endpoint) (*hcn.HostComputeEndpoint, error) {
	out := &hcn.HostComputeEndpoint{Name: e.Name, SchemaVersion: hcn.V2SchemaVersion()}
	if e.IP.IsValid() {
		addr, bits, err := ipConfig(e.IP)
		if err != nil {
			return nil, err
		}
		out.IpConfigurations = []hcn.IpConfig{{IpAddress: addr, PrefixLength: bits}}
	}
	mac, err := formatMAC(e.MAC)
	if err != nil {
		return nil, fmt.Errorf("endpoint %q: %w", e.Name, err)
	}
	out.MacAddress = mac
	policies, err := endpointPolicies(e.Policies, e.ACLs)
	if err != nil {
		return nil, fmt.Errorf("endpoint %q: %w", e.Name, err)
	}
	out.Policies = toEndpointPolicies(policies)
	return out, nil
}

// fromLoadBalancer translates a (kube-proxy's) load balancer.
func fromLoadBalancer(lb *hcn.HostComputeLoadBalancer) hns.LoadBalancer {
	out := hns.LoadBalancer{ID: lb.Id}
	if len(lb.FrontendVIPs) > 0 {
		out.VIP, _ = parseAddr(lb.FrontendVIPs[0]) // foreign: a bad VIP stays zero
	}
	return out
}

// hostDefaultNamespaces returns the IDs (lower case) of the HostDefault
// namespaces and of the endpoints in them.
func hostDefaultNamespaces(nss []hcn.HostComputeNamespace) (namespaces, endpoints map[string]bool, err error) {
	namespaces, endpoints = map[string]bool{}, map[string]bool{}
	for _, ns := range nss {
		if ns.Type != hcn.NamespaceTypeHostDefault {
			continue
		}
		namespaces[strings.ToLower(ns.Id)] = true
		ids, err := namespaceEndpoints(&ns)
		if err != nil {
			return nil, nil, err
		}
		for _, id := range ids {
			endpoints[strings.ToLower(id)] = true
		}
	}
	return namespaces, endpoints, nil
}

// namespaceEndpoints lists the IDs of the endpoints in a namespace.
func namespaceEndpoints(ns *hcn.HostComputeNamespace) ([]string, error) {
	var ids []string
	for _, r := range ns.Resources {
		if r.Type != hcn.NamespaceResourceTypeEndpoint {
			continue
		}
		var e hcn.NamespaceResourceEndpoint
		if err := json.Unmarshal(r.Data, &e); err != nil {
			return nil, fmt.Errorf("namespace %s: endpoint resource %s: %w", ns.Id, r.Data, err)
		}
		ids = append(ids, e.Id)
	}
	return ids, nil
}
