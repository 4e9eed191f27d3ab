package hnswin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// aclSettings is the settings of an HNS v2 endpoint ACL policy as hnswin
// sends it: hcsshim's hcn.AclPolicySetting with the schema's Id field,
// which hcsshim lacks (the JSON name is "Id"; Azure NPM notes that HNS
// accepts "Id" but not "ID"). Like hcsshim, it omits empty optional
// fields: an empty Protocols, address or port list matches anything, an
// absent RuleType and Priority leave HNS's defaults.
type aclSettings struct {
	Id              string `json:"Id,omitempty"`
	Protocols       string `json:"Protocols,omitempty"`
	Action          string `json:"Action"`
	Direction       string `json:"Direction"`
	LocalAddresses  string `json:"LocalAddresses,omitempty"`
	RemoteAddresses string `json:"RemoteAddresses,omitempty"`
	LocalPorts      string `json:"LocalPorts,omitempty"`
	RemotePorts     string `json:"RemotePorts,omitempty"`
	RuleType        string `json:"RuleType,omitempty"`
	Priority        uint16 `json:"Priority,omitempty"`
}

// aclReadSettings is aclSettings as read back: HNS may give the lists that
// are usually strings ("6", "80") as JSON numbers.
type aclReadSettings struct {
	Id              string     `json:"Id"`
	Protocols       flexString `json:"Protocols"`
	Action          string     `json:"Action"`
	Direction       string     `json:"Direction"`
	LocalAddresses  string     `json:"LocalAddresses"`
	RemoteAddresses string     `json:"RemoteAddresses"`
	LocalPorts      flexString `json:"LocalPorts"`
	RemotePorts     flexString `json:"RemotePorts"`
	RuleType        string     `json:"RuleType"`
	Priority        flexUint16 `json:"Priority"`
}

// marshalACL renders an ACL as the Settings of an HNS "ACL" policy.
func marshalACL(a plan.ACL) (json.RawMessage, error) {
	if a.Action == "" || a.Direction == "" {
		return nil, fmt.Errorf("ACL %q: Action and Direction are required", a.Id)
	}
	return json.Marshal(aclSettings{
		Id:              a.Id,
		Protocols:       a.Protocols,
		Action:          a.Action,
		Direction:       a.Direction,
		LocalAddresses:  a.LocalAddresses,
		RemoteAddresses: a.RemoteAddresses,
		LocalPorts:      a.LocalPorts,
		RemotePorts:     a.RemotePorts,
		RuleType:        a.RuleType,
		Priority:        a.Priority,
	})
}

// parseACL reads the Settings of an HNS "ACL" policy, Id included.
func parseACL(settings json.RawMessage) (plan.ACL, error) {
	var s aclReadSettings
	if err := json.Unmarshal(settings, &s); err != nil {
		return plan.ACL{}, fmt.Errorf("ACL settings %s: %w", settings, err)
	}
	return plan.ACL{
		Id:              s.Id,
		Protocols:       string(s.Protocols),
		Action:          s.Action,
		Direction:       s.Direction,
		LocalAddresses:  s.LocalAddresses,
		RemoteAddresses: s.RemoteAddresses,
		LocalPorts:      string(s.LocalPorts),
		RemotePorts:     string(s.RemotePorts),
		RuleType:        s.RuleType,
		Priority:        uint16(s.Priority),
	}, nil
}

// flexString is a JSON string that may also come as a number.
type flexString string

func (f *flexString) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		*f = ""
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = flexString(s)
	default:
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("want a string or a number, got %s", b)
		}
		*f = flexString(n.String())
	}
	return nil
}

// flexUint16 is a JSON number that may also come as a numeric string.
type flexUint16 uint16

func (f *flexUint16) UnmarshalJSON(b []byte) error {
	var s flexString
	if err := s.UnmarshalJSON(b); err != nil {
		return err
	}
	if s == "" {
		*f = 0
		return nil
	}
	n, err := strconv.ParseUint(string(s), 10, 16)
	if err != nil {
		return fmt.Errorf("want a number from 0 to 65535, got %s", b)
	}
	*f = flexUint16(n)
	return nil
}

// formatMAC renders a MAC address the way HNS writes them: six upper-case
// hex octets joined by dashes ("0E-2A-0A-F4-01-02"). It accepts the forms
// net.ParseMAC does; "" stays "".
func formatMAC(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	hw, err := net.ParseMAC(s)
	if err != nil {
		return "", fmt.Errorf("MAC address %q: %w", s, err)
	}
	if len(hw) != 6 {
		return "", fmt.Errorf("MAC address %q: want 6 octets, got %d", s, len(hw))
	}
	return strings.ToUpper(strings.ReplaceAll(hw.String(), ":", "-")), nil
}

// readMAC is formatMAC for values read from HNS: one it cannot parse is
// kept as it is (upper-cased), so a snapshot never fails on a foreign MAC.
func readMAC(s string) string {
	if m, err := formatMAC(s); err == nil {
		return m
	}
	return strings.ToUpper(strings.TrimSpace(s))
}

// parseAddr reads an address HNS wrote ("" is the zero Addr).
func parseAddr(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, err
	}
	return a.WithZone("").Unmap(), nil
}

// parsePrefix reads a prefix HNS wrote ("" is the zero Prefix), masked.
func parsePrefix(s string) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return p.Masked(), nil
}

// defaultRoute is the destination of the default route of a's family.
func defaultRoute(a netip.Addr) string {
	if a.Is6() {
		return "::/0"
	}
	return "0.0.0.0/0"
}

// ipConfig is an endpoint address as HNS takes it: the address and its
// prefix length.
func ipConfig(p netip.Prefix) (addr string, bits uint8, err error) {
	if !p.IsValid() {
		return "", 0, fmt.Errorf("endpoint address %s is not valid", p)
	}
	return p.Addr().String(), uint8(p.Bits()), nil
}

// readIPConfig reads an endpoint address; a zero prefix length (HNS
// leaves it out) takes the length of the subnet holding the address, or
// the full length if no subnet does.
func readIPConfig(addr string, bits uint8, subnets []netip.Prefix) (netip.Prefix, error) {
	a, err := parseAddr(addr)
	if err != nil || !a.IsValid() {
		return netip.Prefix{}, fmt.Errorf("endpoint address %q is not valid", addr)
	}
	if bits == 0 {
		bits = uint8(a.BitLen())
		for _, s := range subnets {
			if s.Contains(a) {
				bits = uint8(s.Bits())
				break
			}
		}
	}
	p, err := a.Prefix(int(bits))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("endpoint address %s/%d: %w", addr, bits, err)
	}
	// Keep the host bits: an endpoint prefix is its address with its
	// subnet's length.
	return netip.PrefixFrom(a, p.Bits()), nil
}
