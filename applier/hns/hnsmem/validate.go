package hnsmem

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// validMAC reports whether s is a MAC as HNS writes it: six two-digit hex
// groups joined by dashes, e.g. "0E-2A-0A-F4-01-05" (hcsshim-hns.md §2
// endpoint table). Either case is accepted.
func validMAC(s string) bool {
	parts := strings.Split(s, "-")
	if len(parts) != 6 {
		return false
	}
	for _, p := range parts {
		if len(p) != 2 {
			return false
		}
		if _, err := strconv.ParseUint(p, 16, 8); err != nil {
			return false
		}
	}
	return true
}

// checkACLs validates an endpoint's ACL policies as HNS would, and
// reports the first bad one as INVALID_POLICY (0x803B000D,
// hcsshim-hns.md §3 "Errors"; it is the code HNS returns for "Any" in an
// address list, §2 "ACL value rules", microsoft/hcsshim#1059).
func checkACLs(call, endpoint string, acls []plan.ACL) error {
	for i, a := range acls {
		if msg := checkACL(a); msg != "" {
			id := a.Id
			if id == "" {
				id = fmt.Sprintf("#%d", i)
			}
			return herr(call, hns.CodeInvalidPolicy, "endpoint %q: ACL %s: %s", endpoint, id, msg)
		}
	}
	return nil
}

// checkACL returns what is wrong with one ACL, or "".
//
// The rules (hcsshim-hns.md §2 policy table and "ACL value rules"):
//   - Action is Allow or Block. The schema also lists Pass, but nothing
//     documents what an endpoint ACL Pass does (Calico never sends one,
//     calico-windows.md §1.2), so the model refuses it.
//   - Direction is In or Out.
//   - RuleType is Switch (VFP) or Host (WFP), or empty: Azure NPM omits it
//     on purpose and HNS takes that (§2 "NPM note").
//   - Protocols is "" or "256" (any protocol; NPM and Calico send 256), or
//     a comma list of IANA numbers 0–255.
//   - Local and remote addresses are comma lists of IPs or CIDRs; "Any" is
//     rejected with 0x803B000D (maintainer answer in microsoft/hcsshim#1059).
//   - Ports are comma lists of ports and ranges, "80,8000-8080"
//     (calico-windows.md §1.2), first ≤ last.
//   - Assumption (undocumented): ports are only allowed when every
//     protocol is TCP (6) or UDP (17), as in Windows Firewall rules; with
//     any protocol, or ICMP, HNS could not match a port.
//
// Items are separated by a bare comma: a space is refused.
func checkACL(a plan.ACL) string {
	switch a.Action {
	case "Allow", "Block":
	default:
		return fmt.Sprintf("Action %q is not Allow or Block", a.Action)
	}
	switch a.Direction {
	case "In", "Out":
	default:
		return fmt.Sprintf("Direction %q is not In or Out", a.Direction)
	}
	switch a.RuleType {
	case "", "Switch", "Host":
	default:
		return fmt.Sprintf("RuleType %q is not Switch or Host", a.RuleType)
	}
	portable, msg := checkProtocols(a.Protocols)
	if msg != "" {
		return msg
	}
	for _, f := range []struct{ name, v string }{{"LocalAddresses", a.LocalAddresses}, {"RemoteAddresses", a.RemoteAddresses}} {
		if msg := checkAddresses(f.v); msg != "" {
			return f.name + ": " + msg
		}
	}
	for _, f := range []struct{ name, v string }{{"LocalPorts", a.LocalPorts}, {"RemotePorts", a.RemotePorts}} {
		if f.v == "" {
			continue
		}
		if !portable {
			return fmt.Sprintf("%s %q with Protocols %q: ports need TCP (6) or UDP (17)", f.name, f.v, a.Protocols)
		}
		if msg := checkPorts(f.v); msg != "" {
			return f.name + ": " + msg
		}
	}
	return ""
}

// checkProtocols validates Protocols and says whether ports may go with it.
func checkProtocols(s string) (portable bool, msg string) {
	if s == "" || s == strconv.Itoa(plan.ProtocolAny) {
		return false, ""
	}
	portable = true
	for _, item := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(item, 10, 8)
		if err != nil {
			return false, fmt.Sprintf("Protocols %q: %q is not a protocol number 0-255 (256, any, stands alone)", s, item)
		}
		if n != 6 && n != 17 {
			portable = false
		}
	}
	return portable, ""
}

func checkAddresses(s string) string {
	if s == "" {
		return ""
	}
	for _, item := range strings.Split(s, ",") {
		if strings.EqualFold(item, "any") {
			return fmt.Sprintf("%q is not an address (HNS rejects \"Any\"; leave the list empty to match any)", item)
		}
		var err error
		if strings.Contains(item, "/") {
			_, err = netip.ParsePrefix(item)
		} else {
			var a netip.Addr
			a, err = netip.ParseAddr(item)
			if err == nil && a.Zone() != "" {
				err = fmt.Errorf("zone")
			}
		}
		if err != nil {
			return fmt.Sprintf("%q is not an IP address or CIDR", item)
		}
	}
	return ""
}

func checkPorts(s string) string {
	for _, item := range strings.Split(s, ",") {
		first, last, isRange := strings.Cut(item, "-")
		f, err1 := strconv.ParseUint(first, 10, 16)
		l := f
		var err2 error
		if isRange {
			l, err2 = strconv.ParseUint(last, 10, 16)
		}
		if err1 != nil || err2 != nil || l < f {
			return fmt.Sprintf("%q is not a port or a port range like 8000-8080", item)
		}
	}
	return ""
}
