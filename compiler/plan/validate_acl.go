package plan

import (
	"net/netip"
	"strconv"
	"strings"
)

// The checks of ACL policies and of the policy program, for Validate.

// acl checks one ACL's fields against what HNS takes and the compiler
// writes: Switch ACLs between 900 (allow-host-to-endpoint) and 65000,
// Host ACLs (Calico's host path) at 0, and well-formed lists.
func (v *validator) acl(path string, a ACL) {
	v.str(path+".Id", a.Id, MaxNameLen)
	if !protocols.MatchString(a.Protocols) {
		v.bad(path+".Protocols", "%q: want 256 (any) or protocol numbers 0..255, comma-separated", a.Protocols)
	}
	if a.Action != "Allow" && a.Action != "Block" {
		v.bad(path+".Action", "%q: want Allow or Block", a.Action)
	}
	if a.Direction != "In" && a.Direction != "Out" {
		v.bad(path+".Direction", "%q: want In or Out", a.Direction)
	}
	switch a.RuleType {
	case "Switch":
		if a.Priority < MinSwitchACLPrio || a.Priority > MaxACLPriority {
			v.bad(path+".Priority", "%d: a Switch ACL's priority must be between %d and %d", a.Priority, MinSwitchACLPrio, MaxACLPriority)
		}
	case "Host":
		if a.Priority != 0 {
			v.bad(path+".Priority", "%d: a Host ACL (the host path) has priority 0", a.Priority)
		}
	default:
		v.bad(path+".RuleType", "%q: want Switch or Host", a.RuleType)
	}
	v.addrList(path+".LocalAddresses", a.LocalAddresses)
	v.addrList(path+".RemoteAddresses", a.RemoteAddresses)
	v.portList(path+".LocalPorts", a.LocalPorts)
	v.portList(path+".RemotePorts", a.RemotePorts)
}

func (v *validator) addrList(path, s string) {
	if s == "" {
		return
	}
	parts := strings.Split(s, ",")
	if !v.bounded(path, len(parts), MaxListEntries) {
		return
	}
	for _, e := range parts {
		if _, err := netip.ParsePrefix(e); err == nil {
			continue
		}
		if _, err := netip.ParseAddr(e); err != nil {
			v.bad(path, "%q is neither an address nor a prefix", truncate(e))
			return
		}
	}
}

func (v *validator) portList(path, s string) {
	if s == "" {
		return
	}
	parts := strings.Split(s, ",")
	if !v.bounded(path, len(parts), MaxListEntries) {
		return
	}
	for _, e := range parts {
		lo, hi, isRange := strings.Cut(e, "-")
		first, err1 := strconv.ParseUint(lo, 10, 16)
		last, err2 := first, error(nil)
		if isRange {
			last, err2 = strconv.ParseUint(hi, 10, 16)
		}
		if err1 != nil || err2 != nil || last < first {
			v.bad(path, "%q is not a port (0..65535) or a range of ports \"low-high\"", truncate(e))
			return
		}
	}
}

func (v *validator) program(p *Program) {
	if !v.bounded("program.tiers", len(p.Tiers), MaxTiers) {
		return
	}
	total := 0
	for i, t := range p.Tiers {
		tp := idx("program.tiers", i)
		v.name(tp+".name", t.Name)
		if t.DefaultAction != "Deny" && t.DefaultAction != "Pass" {
			v.bad(tp+".defaultAction", "%q: want Deny or Pass", t.DefaultAction)
		}
		total += len(t.Policies)
		if !v.bounded("program", total, MaxNetworkPols) {
			return
		}
		for j, np := range t.Policies {
			pp := idx(tp+".policies", j)
			v.name(pp+".id", np.ID)
			if !strings.HasPrefix(np.ID, "knp.") && !strings.HasPrefix(np.ID, "np.") && !strings.HasPrefix(np.ID, "gnp.") {
				v.bad(pp+".id", "%q: want knp.*, np.* or gnp.*", truncate(np.ID))
			}
			v.str(pp+".source", np.Source, MaxStringLen)
			v.str(pp+".namespace", np.Namespace, MaxNameLen)
			if np.Selector == "" {
				v.bad(pp+".selector", "empty")
			}
			v.str(pp+".selector", np.Selector, MaxStringLen)
			v.str(pp+".namespaceSelector", np.NamespaceSelector, MaxStringLen)
			v.rules(pp+".ingressRules", np.IngressRules)
			v.rules(pp+".egressRules", np.EgressRules)
		}
	}
}

func (v *validator) rules(path string, rs []PolicyRule) {
	if !v.bounded(path, len(rs), MaxRulesPerPol) {
		return
	}
	for i, r := range rs {
		rp := idx(path, i)
		v.name(rp+".id", r.ID)
		v.str(rp+".source", r.Source, MaxStringLen)
		switch r.Action {
		case "Allow", "Deny", "Pass":
		default:
			v.bad(rp+".action", "%q: want Allow, Deny or Pass", r.Action)
		}
		if r.Protocol < 0 || r.Protocol > 255 {
			v.bad(rp+".protocol", "%d is not a protocol number (1..255)", r.Protocol)
		}
		v.bounded(rp+".notProtocols", len(r.NotProtocols), 256)
		for j, n := range r.NotProtocols {
			if n < 0 || n > 255 {
				v.bad(idx(rp+".notProtocols", j), "%d is not a protocol number (0..255)", n)
			}
		}
		v.match(rp+".local", &r.Local)
		v.match(rp+".remote", &r.Remote)
	}
}

func (v *validator) match(path string, m *Match) {
	if v.bounded(path+".nets", len(m.Nets), MaxNetsPerMatch) {
		for i, n := range m.Nets {
			if !n.IsValid() {
				v.bad(idx(path+".nets", i), "not a prefix")
			}
		}
	}
	for _, f := range []struct{ name, s string }{{"selector", m.Selector}, {"namespace", m.Namespace}, {"namespaceSelector", m.NamespaceSelector}, {"notSelector", m.NotSelector}} {
		v.str(path+"."+f.name, f.s, MaxStringLen)
	}
	if v.bounded(path+".ports", len(m.Ports), MaxListEntries) {
		for i, r := range m.Ports {
			if r.Last < r.First {
				v.bad(idx(path+".ports", i), "%d-%d: the range ends before it starts", r.First, r.Last)
			}
		}
	}
	if v.bounded(path+".namedPorts", len(m.NamedPorts), MaxListEntries) {
		for i, n := range m.NamedPorts {
			v.name(idx(path+".namedPorts", i), n)
		}
	}
}
