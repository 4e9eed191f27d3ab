package intent

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Calico v3 API (projectcalico.org/v3) in its wire form. Calico's own Go
// module cannot be imported, so these mirror the fields of its
// NetworkPolicy, GlobalNetworkPolicy and Tier that hnsplan reads; a field
// not modelled here is an error in a manifest, never silently dropped.

// CalicoPolicy is a projectcalico.org/v3 NetworkPolicy (namespaced) or
// GlobalNetworkPolicy (Global is true).
type CalicoPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              CalicoPolicySpec `json:"spec"`
	Global            bool             `json:"-"`
	Source            Source           `json:"-"`
}

// CalicoPolicySpec is the spec of a Calico NetworkPolicy or
// GlobalNetworkPolicy. NamespaceSelector, DoNotTrack, PreDNAT and
// ApplyOnForward exist on GlobalNetworkPolicy only.
type CalicoPolicySpec struct {
	Tier                   string   `json:"tier,omitempty"`
	Order                  *float64 `json:"order,omitempty"`
	Selector               string   `json:"selector,omitempty"`
	Types                  []string `json:"types,omitempty"`
	Ingress                []Rule   `json:"ingress,omitempty"`
	Egress                 []Rule   `json:"egress,omitempty"`
	ServiceAccountSelector string   `json:"serviceAccountSelector,omitempty"`
	PerformanceHints       []string `json:"performanceHints,omitempty"`
	NamespaceSelector      string   `json:"namespaceSelector,omitempty"`
	DoNotTrack             bool     `json:"doNotTrack,omitempty"`
	PreDNAT                bool     `json:"preDNAT,omitempty"`
	ApplyOnForward         bool     `json:"applyOnForward,omitempty"`
}

// Rule is one Calico policy rule.
type Rule struct {
	Action      string        `json:"action"`
	IPVersion   *int          `json:"ipVersion,omitempty"`
	Protocol    *Protocol     `json:"protocol,omitempty"`
	NotProtocol *Protocol     `json:"notProtocol,omitempty"`
	ICMP        *ICMPFields   `json:"icmp,omitempty"`
	NotICMP     *ICMPFields   `json:"notICMP,omitempty"`
	Source      EntityRule    `json:"source,omitempty"`
	Destination EntityRule    `json:"destination,omitempty"`
	HTTP        *HTTPMatch    `json:"http,omitempty"`
	Metadata    *RuleMetadata `json:"metadata,omitempty"`
}

// EntityRule is the source or destination of a Calico rule.
type EntityRule struct {
	Nets              []netip.Prefix       `json:"nets,omitempty"`
	NotNets           []netip.Prefix       `json:"notNets,omitempty"`
	Selector          string               `json:"selector,omitempty"`
	NotSelector       string               `json:"notSelector,omitempty"`
	NamespaceSelector string               `json:"namespaceSelector,omitempty"`
	Ports             []Port               `json:"ports,omitempty"`
	NotPorts          []Port               `json:"notPorts,omitempty"`
	Services          *ServiceMatch        `json:"services,omitempty"`
	ServiceAccounts   *ServiceAccountMatch `json:"serviceAccounts,omitempty"`
}

// ICMPFields matches an ICMP type and code.
type ICMPFields struct {
	Type *int `json:"type,omitempty"`
	Code *int `json:"code,omitempty"`
}

// HTTPMatch is an application-layer match (not enforceable on Windows).
type HTTPMatch struct {
	Methods []string   `json:"methods,omitempty"`
	Paths   []HTTPPath `json:"paths,omitempty"`
}

// HTTPPath matches an HTTP path exactly or by prefix.
type HTTPPath struct {
	Exact  string `json:"exact,omitempty"`
	Prefix string `json:"prefix,omitempty"`
}

// ServiceMatch selects the endpoints of a Kubernetes Service.
type ServiceMatch struct {
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// ServiceAccountMatch selects pods by service account.
type ServiceAccountMatch struct {
	Names    []string `json:"names,omitempty"`
	Selector string   `json:"selector,omitempty"`
}

// RuleMetadata is free-form rule metadata.
type RuleMetadata struct {
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Tier is a projectcalico.org/v3 Tier.
type Tier struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              TierSpec `json:"spec"`
	Source            Source   `json:"-"`
}

// HostEndpoint is a projectcalico.org/v3 HostEndpoint: a host interface
// Calico polices. Windows nodes have none (Calico for Windows does not
// support host endpoints), and hnsplan enforces policy on pods only.
type HostEndpoint struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              HostEndpointSpec `json:"spec"`
	Source            Source           `json:"-"`
}

// HostEndpointSpec is the spec of a HostEndpoint.
type HostEndpointSpec struct {
	Node          string             `json:"node,omitempty"`
	InterfaceName string             `json:"interfaceName,omitempty"`
	ExpectedIPs   []netip.Addr       `json:"expectedIPs,omitempty"`
	Profiles      []string           `json:"profiles,omitempty"`
	Ports         []HostEndpointPort `json:"ports,omitempty"`
}

// HostEndpointPort is a named port of a HostEndpoint.
type HostEndpointPort struct {
	Name     string    `json:"name"`
	Protocol *Protocol `json:"protocol,omitempty"`
	Port     uint16    `json:"port"`
}

// TierSpec is the spec of a Tier.
type TierSpec struct {
	Order         *float64 `json:"order,omitempty"`
	DefaultAction string   `json:"defaultAction,omitempty"` // "Deny" (default) or "Pass"
}

// Protocol is a Calico protocol: a name ("TCP") or a number (1–255), as
// written. Whether a name is known is for the policy compiler to judge.
type Protocol struct {
	Name string // as written, if a name
	Num  int    // if a number
}

func (p Protocol) String() string {
	if p.Name != "" {
		return p.Name
	}
	return strconv.Itoa(p.Num)
}

func (p *Protocol) UnmarshalJSON(b []byte) error {
	var n int
	if err := json.Unmarshal(b, &n); err == nil {
		if n < 1 || n > 255 {
			return fmt.Errorf("protocol number %d is out of range 1-255", n)
		}
		*p = Protocol{Num: n}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil || s == "" {
		return fmt.Errorf("protocol must be a name such as TCP or a number 1-255, not %s", b)
	}
	*p = Protocol{Name: s}
	return nil
}

func (p Protocol) MarshalJSON() ([]byte, error) {
	if p.Name != "" {
		return json.Marshal(p.Name)
	}
	return json.Marshal(p.Num)
}

// Port is a Calico port: a number, a range "min:max", or a named port.
type Port struct {
	Min, Max uint16 // equal for a single port; zero for a named port
	Name     string // a named port, resolved per endpoint
}

func (p Port) String() string {
	switch {
	case p.Name != "":
		return p.Name
	case p.Min == p.Max:
		return strconv.Itoa(int(p.Min))
	}
	return fmt.Sprintf("%d:%d", p.Min, p.Max)
}

func (p *Port) UnmarshalJSON(b []byte) error {
	var n int
	if err := json.Unmarshal(b, &n); err == nil {
		if n < 0 || n > 65535 {
			return fmt.Errorf("port %d is out of range 0-65535", n)
		}
		*p = Port{Min: uint16(n), Max: uint16(n)}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil || s == "" {
		return fmt.Errorf("port must be a number, a range \"min:max\" or a port name, not %s", b)
	}
	lo, hi, isRange := strings.Cut(s, ":")
	min, errLo := strconv.ParseUint(lo, 10, 16)
	if !isRange {
		if errLo == nil {
			*p = Port{Min: uint16(min), Max: uint16(min)}
			return nil
		}
		if strings.ContainsAny(s, " \t") || len(s) > 15 {
			return fmt.Errorf("port name %q is not a valid name (at most 15 characters, no spaces)", s)
		}
		*p = Port{Name: s}
		return nil
	}
	max, errHi := strconv.ParseUint(hi, 10, 16)
	if errLo != nil || errHi != nil || min > max {
		return fmt.Errorf("port range %q must be \"min:max\" with 0 <= min <= max <= 65535", s)
	}
	*p = Port{Min: uint16(min), Max: uint16(max)}
	return nil
}

func (p Port) MarshalJSON() ([]byte, error) {
	if p.Name == "" && p.Min == p.Max {
		return json.Marshal(p.Min)
	}
	return json.Marshal(p.String())
}
