package hnswin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// This file is the portable half of Snapshot: HNS's JSON documents of
// networks and endpoints into the hns model. On Windows hcn's objects are
// marshalled (they are HNS's JSON) and read here, so the documents real
// HNS was seen to return (testdata/real) go through the same code.
//
// It reads the v2 form hcn returns, and, since a network or a policy made
// through the v1 API may read back in its form, the v1 forms too: a
// subnet policy {"Type":"VSID","VSID":4096}, flat policies ({"Type":
// "ROUTE","DestinationPrefix":...}, "PA", OutBoundNAT "ExceptionList"),
// top-level Subnets with AddressPrefix and GatewayAddress, a DrMacAddress
// field. JSON's own escapes ("10.0.0.0\/16") and fields HNS adds (Scope,
// Health, Version, ...) are read or ignored like any.

// wireNetwork is a network as HNS writes it (hcn.HostComputeNetwork's
// JSON), with the fields of the v1 view.
type wireNetwork struct {
	ID       string `json:"ID"`
	Name     string
	Type     string
	Policies []json.RawMessage
	Ipams    []struct {
		Type    string
		Subnets []wireSubnet
	}
	Flags uint32
	// The v1 view: subnets at the top, the DR MAC as a field.
	Subnets      []wireV1Subnet
	DrMacAddress string
}

type wireSubnet struct {
	IpAddressPrefix string
	Policies        []json.RawMessage
	Routes          []struct{ NextHop, DestinationPrefix string }
}

type wireV1Subnet struct {
	AddressPrefix, GatewayAddress string
	Policies                      []json.RawMessage
}

// wireEndpoint is an endpoint as HNS writes it (hcn.HostComputeEndpoint's
// JSON), with the fields of the v1 view.
type wireEndpoint struct {
	ID                   string `json:"ID"`
	Name                 string
	HostComputeNetwork   string
	HostComputeNamespace string
	Policies             []json.RawMessage
	IpConfigurations     []struct {
		IpAddress    string
		PrefixLength uint8
	}
	MacAddress string
	Flags      uint32
	// The v1 view.
	VirtualNetwork     string
	VirtualNetworkName string
	IPAddress          string
	PrefixLength       uint8
	IsRemoteEndpoint   bool
	SharedContainers   []string
	// State and Health.LastErrorCode are v1's only (hcsshim's
	// internal/hns HNSEndpoint; a real v1 document in
	// testdata/real): v2's Health is {Data, Extra}.
	State  *uint16
	Health *struct{ LastErrorCode *uint32 }
}

// v1EndpointStates are the names of v1's endpoint State values (hcsshim
// internal/hns EndpointState, in order).
var v1EndpointStates = []string{"Uninitialized", "Created", "Attached", "AttachedSharing", "Detached", "Degraded", "Destroyed"}

// wireLoadBalancer is a load balancer as HNS writes it.
type wireLoadBalancer struct {
	ID           string `json:"ID"`
	FrontendVIPs []string
}

// Flags of networks and endpoints (hcsshim-hns.md §2).
const (
	flagNonPersistent  = 8 // network: EnableNonPersistent
	flagRemoteEndpoint = 1 // endpoint: RemoteEndpoint
)

// decodeNetwork reads a network document. vxlanPortSupported is the
// host's feature (see impliedVXLANPort).
func decodeNetwork(b []byte, vxlanPortSupported bool) (hns.Network, error) {
	var w wireNetwork
	if err := json.Unmarshal(b, &w); err != nil {
		return hns.Network{}, fmt.Errorf("network document: %w", err)
	}
	out := hns.Network{ID: w.ID, Name: w.Name, Type: w.Type, NonPersistent: w.Flags&flagNonPersistent != 0}
	for _, ipam := range w.Ipams {
		for _, s := range ipam.Subnets {
			if s.IpAddressPrefix == "" {
				continue
			}
			sub, err := decodeSubnet(s.IpAddressPrefix, "", s.Routes, s.Policies)
			if err != nil {
				return hns.Network{}, fmt.Errorf("network %q: subnet %q: %w", w.Name, s.IpAddressPrefix, err)
			}
			out.Subnets = append(out.Subnets, sub)
		}
	}
	if len(out.Subnets) == 0 {
		for _, s := range w.Subnets {
			if s.AddressPrefix == "" {
				continue
			}
			sub, err := decodeSubnet(s.AddressPrefix, s.GatewayAddress, nil, s.Policies)
			if err != nil {
				return hns.Network{}, fmt.Errorf("network %q: subnet %q: %w", w.Name, s.AddressPrefix, err)
			}
			out.Subnets = append(out.Subnets, sub)
		}
	}
	for _, raw := range w.Policies {
		p, err := readPolicy(raw)
		if err != nil {
			return hns.Network{}, fmt.Errorf("network %q: %w", w.Name, err)
		}
		if err := readNetPolicy(&out, p); err != nil {
			return hns.Network{}, err
		}
	}
	if out.DRMAC == "" && w.DrMacAddress != "" {
		out.DRMAC = readMAC(w.DrMacAddress)
	}
	impliedVXLANPort(&out, vxlanPortSupported)
	return out, nil
}

func decodeSubnet(prefix, gateway string, routes []struct{ NextHop, DestinationPrefix string }, policies []json.RawMessage) (hns.Subnet, error) {
	p, err := parsePrefix(prefix)
	if err != nil {
		return hns.Subnet{}, err
	}
	sub := hns.Subnet{Prefix: p}
	if sub.Gateway, err = parseAddr(gateway); err != nil {
		return hns.Subnet{}, fmt.Errorf("gateway: %w", err)
	}
	for _, r := range routes {
		dst, err := parsePrefix(r.DestinationPrefix)
		if err != nil || !dst.IsValid() || dst.Bits() != 0 {
			continue
		}
		if sub.Gateway, err = parseAddr(r.NextHop); err != nil {
			return hns.Subnet{}, fmt.Errorf("default route: %w", err)
		}
		break
	}
	if sub.VNI, err = readSubnetVNI(policies); err != nil {
		return hns.Subnet{}, err
	}
	return sub, nil
}

// decodeEndpoint reads an endpoint document. networks maps network IDs
// (lower case) to the networks read, byName their names; hostAttached
// holds the IDs (lower case) of the endpoints in a HostDefault namespace.
func decodeEndpoint(b []byte, networks map[string]*hns.Network, hostAttached map[string]bool) (hns.Endpoint, error) {
	var w wireEndpoint
	if err := json.Unmarshal(b, &w); err != nil {
		return hns.Endpoint{}, fmt.Errorf("endpoint document: %w", err)
	}
	out := hns.Endpoint{
		ID:           w.ID,
		Name:         w.Name,
		MAC:          readMAC(w.MacAddress),
		Remote:       w.Flags&flagRemoteEndpoint != 0 || w.IsRemoteEndpoint,
		HostAttached: hostAttached[strings.ToLower(w.ID)],
	}
	out.Attached = (w.HostComputeNamespace != "" && !out.HostAttached) || len(w.SharedContainers) > 0
	if w.State != nil || (w.Health != nil && w.Health.LastErrorCode != nil) {
		h := &hns.EndpointHealth{}
		if w.State != nil {
			h.State = fmt.Sprintf("State(%d)", *w.State)
			if int(*w.State) < len(v1EndpointStates) {
				h.State = v1EndpointStates[*w.State]
			}
			if *w.State == 2 || *w.State == 3 { // Attached, AttachedSharing
				out.Attached = true
			}
		}
		if w.Health != nil && w.Health.LastErrorCode != nil {
			h.LastErrorCode = *w.Health.LastErrorCode
		}
		out.Health = h
	}
	var subnets []netip.Prefix
	netID := w.HostComputeNetwork
	if netID == "" {
		netID = w.VirtualNetwork
	}
	if n := networks[strings.ToLower(netID)]; n != nil {
		out.Network = n.Name
		for _, s := range n.Subnets {
			subnets = append(subnets, s.Prefix)
		}
	} else {
		out.Network = w.VirtualNetworkName
	}
	addr, bits := w.IPAddress, w.PrefixLength
	if len(w.IpConfigurations) > 0 {
		addr, bits = w.IpConfigurations[0].IpAddress, w.IpConfigurations[0].PrefixLength
	}
	if addr != "" {
		ip, err := readIPConfig(addr, bits, subnets)
		if err != nil {
			return hns.Endpoint{}, fmt.Errorf("endpoint %q: %w", w.Name, err)
		}
		out.IP = ip
	}
	ps := make([]rawPolicy, 0, len(w.Policies))
	for _, raw := range w.Policies {
		p, err := readPolicy(raw)
		if err != nil {
			return hns.Endpoint{}, fmt.Errorf("endpoint %q: %w", w.Name, err)
		}
		ps = append(ps, p)
	}
	policies, acls, err := readEndpointPolicies(ps)
	if err != nil {
		return hns.Endpoint{}, fmt.Errorf("endpoint %q: %w", w.Name, err)
	}
	out.Policies, out.ACLs = policies, acls
	return out, nil
}

func decodeLoadBalancer(b []byte) (hns.LoadBalancer, error) {
	var w wireLoadBalancer
	if err := json.Unmarshal(b, &w); err != nil {
		return hns.LoadBalancer{}, fmt.Errorf("load balancer document: %w", err)
	}
	out := hns.LoadBalancer{ID: w.ID}
	if len(w.FrontendVIPs) > 0 {
		out.VIP, _ = parseAddr(w.FrontendVIPs[0]) // foreign: a bad VIP stays zero
	}
	return out, nil
}

// v1Policies are the v1 policy types and their v2 names, with the v1
// settings fields that have other names in v2.
var v1Policies = map[string]struct {
	v2     string
	fields map[string]string
}{
	"ROUTE":       {plan.TypeSDNRoute, nil},
	"PA":          {plan.TypeProviderAddress, map[string]string{"PA": "ProviderAddress"}},
	"OutBoundNAT": {plan.TypeOutBoundNAT, map[string]string{"ExceptionList": "Exceptions", "VIP": "VirtualIP"}},
	"VSID":        {plan.TypeVSID, map[string]string{"VSID": "IsolationId"}},
	"ACL":         {plan.TypeACL, map[string]string{"Protocol": "Protocols"}},
}

// readPolicy reads one policy, {"Type","Settings"} (v2) or flat (v1:
// {"Type":"ROUTE","DestinationPrefix":...}), into the v2 form.
func readPolicy(raw json.RawMessage) (rawPolicy, error) {
	var fields map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(raw))
	if err := d.Decode(&fields); err != nil || fields == nil {
		return rawPolicy{}, fmt.Errorf("policy %s: not a JSON object", raw)
	}
	var typ string
	var settings json.RawMessage
	flat := map[string]json.RawMessage{}
	for k, v := range fields {
		switch {
		case strings.EqualFold(k, "Type"):
			if err := json.Unmarshal(v, &typ); err != nil {
				return rawPolicy{}, fmt.Errorf("policy %s: Type: %w", raw, err)
			}
		case strings.EqualFold(k, "Settings"):
			settings = v
		default:
			flat[k] = v
		}
	}
	if typ == "" {
		return rawPolicy{}, fmt.Errorf("policy %s: no Type", raw)
	}
	if settings != nil {
		return rawPolicy{Type: typ, Settings: settings}, nil
	}
	// The v1 form: every field but Type is a setting. Its type is matched
	// without regard to case too ("acl" is an ACL, see isACLType).
	v1, known := v1Policies[typ]
	if !known {
		for name, p := range v1Policies {
			if strings.EqualFold(name, typ) {
				v1, known = p, true
				break
			}
		}
	}
	if known {
		typ = v1.v2
		for from, to := range v1.fields {
			if v, ok := flat[from]; ok {
				delete(flat, from)
				if _, taken := flat[to]; !taken {
					flat[to] = v
				}
			}
		}
	}
	b, err := json.Marshal(flat)
	if err != nil {
		return rawPolicy{}, err
	}
	return rawPolicy{Type: typ, Settings: b}, nil
}
