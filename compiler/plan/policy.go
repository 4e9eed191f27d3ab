package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
)

// Policy is an HNS policy: a Type and its Settings.
type Policy struct {
	Type     string
	Settings Settings
}

// Settings is the settings of one policy type. The concrete types below
// are the ones hnsplan writes; a policy of another type is read as Raw.
type Settings interface{ policyType() string }

// Policy types (HNS v2 names).
const (
	TypeVSID              = "VSID"
	TypeVxlanPort         = "VxlanPort"
	TypeHostRoute         = "HostRoute"
	TypeNetAdapterName    = "NetAdapterName"
	TypeProviderAddress   = "ProviderAddress"
	TypeOutBoundNAT       = "OutBoundNAT"
	TypeSDNRoute          = "SDNRoute"
	TypeRemoteSubnetRoute = "RemoteSubnetRoute"
)

// VSID is a subnet's VXLAN network identifier (the VNI).
type VSID struct {
	IsolationId uint32 `json:"IsolationId"`
}

// VxlanPort is the UDP port of an Overlay network.
type VxlanPort struct {
	Port uint16 `json:"Port"`
}

// HostRoute lets the host reach the network's pods (no settings).
type HostRouteSetting struct{}

// NetAdapterName binds an L2Bridge network to a host adapter.
type NetAdapterName struct {
	NetworkAdapterName string `json:"NetworkAdapterName"`
}

// ProviderAddress is the host's address on the underlay.
type ProviderAddress struct {
	ProviderAddress netip.Addr `json:"ProviderAddress"`
}

// OutBoundNAT NATs pod traffic to the host address, except to Exceptions.
type OutBoundNAT struct {
	Exceptions []netip.Prefix `json:"Exceptions,omitempty"`
}

// SDNRoute routes a prefix from an endpoint, encapsulated if NeedEncap.
type SDNRoute struct {
	DestinationPrefix netip.Prefix `json:"DestinationPrefix"`
	NeedEncap         bool         `json:"NeedEncap"`
}

// RemoteSubnetRouteSetting is a RemoteSubnetRoute policy's settings.
type RemoteSubnetRouteSetting struct {
	DestinationPrefix           netip.Prefix `json:"DestinationPrefix"`
	IsolationId                 uint32       `json:"IsolationId"`
	ProviderAddress             netip.Addr   `json:"ProviderAddress"`
	DistributedRouterMacAddress string       `json:"DistributedRouterMacAddress"`
}

// Raw is the settings of a policy type this version does not know.
type Raw struct {
	Type string
	JSON json.RawMessage
}

func (VSID) policyType() string                     { return TypeVSID }
func (VxlanPort) policyType() string                { return TypeVxlanPort }
func (HostRouteSetting) policyType() string         { return TypeHostRoute }
func (NetAdapterName) policyType() string           { return TypeNetAdapterName }
func (ProviderAddress) policyType() string          { return TypeProviderAddress }
func (OutBoundNAT) policyType() string              { return TypeOutBoundNAT }
func (SDNRoute) policyType() string                 { return TypeSDNRoute }
func (RemoteSubnetRouteSetting) policyType() string { return TypeRemoteSubnetRoute }
func (r Raw) policyType() string                    { return r.Type }

// NewPolicy wraps settings in a Policy of their type.
func NewPolicy(s Settings) Policy { return Policy{Type: s.policyType(), Settings: s} }

type wirePolicy struct {
	Type     string          `json:"Type"`
	Settings json.RawMessage `json:"Settings"`
}

func (p Policy) MarshalJSON() ([]byte, error) {
	var settings []byte
	var err error
	switch s := p.Settings.(type) {
	case nil:
		settings = []byte("{}")
	case Raw:
		settings = s.JSON
	default:
		if s.policyType() != p.Type {
			return nil, fmt.Errorf("plan: policy of type %q holds %s settings", p.Type, s.policyType())
		}
		settings, err = json.Marshal(s)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(wirePolicy{Type: p.Type, Settings: settings})
}

func (p *Policy) UnmarshalJSON(b []byte) error {
	var w wirePolicy
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.Type == "" {
		return fmt.Errorf("plan: policy without a Type")
	}
	var s Settings
	switch w.Type {
	case TypeVSID:
		s = &VSID{}
	case TypeVxlanPort:
		s = &VxlanPort{}
	case TypeHostRoute:
		s = &HostRouteSetting{}
	case TypeNetAdapterName:
		s = &NetAdapterName{}
	case TypeProviderAddress:
		s = &ProviderAddress{}
	case TypeOutBoundNAT:
		s = &OutBoundNAT{}
	case TypeSDNRoute:
		s = &SDNRoute{}
	case TypeRemoteSubnetRoute:
		s = &RemoteSubnetRouteSetting{}
	case TypeACL:
		s = &ACL{}
	default:
		// Compact, so a decoded plan re-encodes to the same bytes.
		var c bytes.Buffer
		if err := json.Compact(&c, w.Settings); err != nil {
			return fmt.Errorf("plan: %s policy: %w", w.Type, err)
		}
		*p = Policy{Type: w.Type, Settings: Raw{Type: w.Type, JSON: c.Bytes()}}
		return nil
	}
	if len(w.Settings) > 0 && string(w.Settings) != "null" {
		if err := json.Unmarshal(w.Settings, s); err != nil {
			return fmt.Errorf("plan: %s policy: %w", w.Type, err)
		}
	}
	*p = Policy{Type: w.Type, Settings: deref(s)}
	return nil
}

// deref turns the pointer used for decoding back into the value type the
// compiler writes, so decoded and compiled plans compare equal.
func deref(s Settings) Settings {
	switch v := s.(type) {
	case *VSID:
		return *v
	case *VxlanPort:
		return *v
	case *HostRouteSetting:
		return *v
	case *NetAdapterName:
		return *v
	case *ProviderAddress:
		return *v
	case *OutBoundNAT:
		return *v
	case *SDNRoute:
		return *v
	case *RemoteSubnetRouteSetting:
		return *v
	case *ACL:
		return *v
	}
	return s
}

// Find returns the settings of the first policy of type T in ps.
func Find[T Settings](ps []Policy) (T, bool) {
	for _, p := range ps {
		if s, ok := p.Settings.(T); ok {
			return s, true
		}
	}
	var zero T
	return zero, false
}
