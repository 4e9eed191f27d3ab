package hns

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// String renders the state as stable text, for people and golden tests
// (the tailscale fake OS shape, style-anchors.md §1): networks in order,
// each with its subnets, policies (the ones HNS added marked so) and
// routes, then its endpoints with address, MAC, flags, policies
// (plan.Describe, sorted) and ACLs one per line in canonical order; then
// load balancers. IDs are left out: plans never use them. Call Canonical
// first for an order that does not depend on HNS's.
func (s *State) String() string {
	var b strings.Builder
	line := func(depth int, format string, args ...any) {
		b.WriteString(strings.Repeat("  ", depth))
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	for i := range s.Networks {
		n := &s.Networks[i]
		flags := ""
		if n.NonPersistent {
			flags = " non-persistent"
		}
		line(0, "network %s %s%s", n.Name, n.Type, flags)
		for _, sub := range n.Subnets {
			vni := ""
			if sub.VNI != 0 {
				vni = fmt.Sprintf(" VSID %d", sub.VNI)
			}
			line(1, "subnet %s gateway %s%s", sub.Prefix, sub.Gateway, vni)
		}
		if n.VXLANPort != 0 {
			line(1, "policy VxlanPort %d", n.VXLANPort)
		}
		if n.HostRoute {
			line(1, "policy HostRoute")
		}
		if n.AdapterName != "" {
			line(1, "policy NetAdapterName %q", n.AdapterName)
		}
		if n.ProviderAddress.IsValid() {
			line(1, "policy ProviderAddress %s  (by HNS)", n.ProviderAddress)
		}
		if n.DRMAC != "" {
			line(1, "policy DrMacAddress %s  (by HNS)", n.DRMAC)
		}
		for _, r := range n.RemoteRoutes {
			line(1, "route %s VSID %d PA %s DR MAC %s", r.Prefix, r.VNI, r.ProviderAddress, r.DRMAC)
		}
		for _, e := range s.EndpointsOn(n.Name) {
			renderEndpoint(line, 1, e)
		}
	}
	// Endpoints whose network is gone cannot happen, but would show.
	for i := range s.Endpoints {
		if e := &s.Endpoints[i]; s.Network(e.Network) == nil {
			line(0, "orphan endpoint on %s", e.Network)
			renderEndpoint(line, 1, e)
		}
	}
	for _, lb := range s.LoadBalancers {
		line(0, "loadbalancer %s VIP %s", lb.ID, lb.VIP)
	}
	return b.String()
}

func renderEndpoint(line func(int, string, ...any), depth int, e *Endpoint) {
	var flags string
	if e.Remote {
		flags += " remote"
	}
	if e.HostAttached {
		flags += " host-attached"
	}
	line(depth, "endpoint %s %s MAC %s%s", e.Name, e.IP, e.MAC, flags)
	ps := make([]string, len(e.Policies))
	for i, p := range e.Policies {
		ps[i] = plan.Describe(p)
	}
	slices.Sort(ps)
	for _, p := range ps {
		line(depth+1, "policy %s", p)
	}
	for _, a := range CanonicalACLs(e.ACLs) {
		line(depth+1, "%s", describeACL(a))
	}
}

// describeACL is one ACL, every field that is set (plan.Describe shortens
// long address lists and leaves out local addresses).
func describeACL(a plan.ACL) string {
	rt := a.RuleType
	if rt == "" {
		rt = "-"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ACL %-3s %-5s %-6s %5d", a.Direction, a.Action, rt, a.Priority)
	for _, f := range []struct{ k, v string }{
		{"proto", a.Protocols},
		{"local", a.LocalAddresses},
		{"remote", a.RemoteAddresses},
		{"lport", a.LocalPorts},
		{"rport", a.RemotePorts},
	} {
		if f.v != "" {
			b.WriteString(" " + f.k + " " + f.v)
		}
	}
	if a.Id != "" {
		b.WriteString("  [" + a.Id + "]")
	}
	return b.String()
}
