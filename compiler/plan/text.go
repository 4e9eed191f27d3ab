package plan

import (
	"fmt"
	"io"
	"net/netip"
	"strings"
)

// WriteText writes p for a person reviewing a dry run: grouped like
// `Get-HnsNetwork | Format-List` and `Get-HnsEndpoint`, one section per
// object, HNS's own names. A policy-only plan says whose the network is
// and what the agent does there.
func WriteText(w io.Writer, p *NodePlan) error {
	tw := &textWriter{w: w}
	tw.line(0, "Node %s    %s, plan %s", p.Node, p.Networking, shortDigest(p.Digest))
	if p.PolicyOnly != nil {
		tw.policyOnly(p)
	} else {
		tw.owned(p)
	}
	if p.Program != nil {
		policies := 0
		var tiers []string
		for _, t := range p.Program.Tiers {
			policies += len(t.Policies)
			tiers = append(tiers, fmt.Sprintf("%s (%d)", t.Name, len(t.Policies)))
		}
		tw.line(1, "PolicyProgram (%d policies; tiers %s) — rendered per pod endpoint", policies, strings.Join(tiers, ", "))
	}
	if routes := p.RemoteSubnetRoutes(); len(routes) > 0 {
		tw.line(1, "RemoteSubnetRoutes (%d, network policies)", len(routes))
		for _, r := range routes {
			mac := r.DistributedRouterMacAddress
			if mac == "" {
				mac = "(live)"
			}
			tw.line(2, "%-18s -> %-15s VSID %d  PA %s  DR MAC %s", r.DestinationPrefix, r.Node, r.IsolationId, r.ProviderAddress, mac)
		}
	}
	if routes := p.HostRoutes(); len(routes) > 0 {
		tw.line(1, "HostRoutes (%d)", len(routes))
		for _, r := range routes {
			tw.line(2, "%-18s via %-15s (%s)", r.DestinationPrefix, r.NextHop, r.Node)
		}
	}
	if len(p.Endpoints) > 0 {
		tw.line(1, "Endpoints (%d pods)", len(p.Endpoints))
		for _, e := range p.Endpoints {
			tw.endpoint(2, "Pod "+e.Pod, e)
		}
	}
	live := liveRoutes(p)
	if len(p.Unresolved)+len(live) > 0 {
		tw.line(1, "Resolved live, by the agent")
		for _, u := range append(p.Unresolved, live...) {
			s := u.Source
			if len(u.Nodes) > 0 {
				s += fmt.Sprintf("; for %d node(s): %s", len(u.Nodes), shortList(u.Nodes, 6))
			}
			tw.field(2, u.Field, s)
		}
	}
	return tw.err
}

// policyOnly writes whose a policy-only plan's network is and what the
// agent does there.
func (tw *textWriter) policyOnly(p *NodePlan) {
	po := p.PolicyOnly
	q := make([]string, len(po.Networks))
	for i, n := range po.Networks {
		q[i] = fmt.Sprintf("%q", n)
	}
	tw.line(1, "Network of %s (policy only)", po.Owner)
	tw.field(2, "Name", "matches "+strings.Join(q, ", ")+" (the whole name)")
	tw.field(2, po.Owner, "creates the network and the pod endpoints, and their policies but the ACLs")
	tw.field(2, "hnsplan", "programs the pod endpoints' ACLs, finding each by its pod's address; creates, deletes and replaces nothing")
	if p.Routing != "" {
		tw.field(2, "Routes", "to other nodes programmed by "+p.Routing)
	}
}

// owned writes the network, host endpoint and pod template of a plan
// whose network the agent owns.
func (tw *textWriter) owned(p *NodePlan) {
	n := p.Network
	tw.line(1, "Network %s", n.Name)
	tw.field(2, "Type", n.Type)
	for _, ipam := range n.Ipams {
		for _, s := range ipam.Subnets {
			tw.field(2, "Subnet", s.IpAddressPrefix.String())
			for _, pol := range s.Policies {
				tw.field(3, "Policy", describe(pol))
			}
			for _, r := range s.Routes {
				tw.field(3, "Route", fmt.Sprintf("%s via %s", r.DestinationPrefix, r.NextHop))
			}
		}
	}
	for _, pol := range n.Policies {
		tw.field(2, "Policy", describe(pol))
	}
	tw.field(2, "Immutable", strings.Join(n.Immutable, ", ")+"  (a change recreates the network: drain first)")
	if p.Routing != "" {
		tw.field(2, "Routes", "to other nodes programmed by "+p.Routing)
	}

	tw.endpoint(1, "HostEndpoint", p.HostEndpoint)

	t := p.PodEndpoint
	tw.line(1, "PodEndpoint (every pod on the node)")
	tw.field(2, "Gateway", t.Gateway.String())
	tw.field(2, "MacAddress", t.MacAddressRule)
	dns := t.DnsSearch
	if len(t.DnsServers) > 0 {
		dns += "  servers " + addrs(t.DnsServers)
	}
	tw.field(2, "Dns", dns)
	for _, r := range t.Routes {
		tw.field(2, "Route", fmt.Sprintf("%s via %s", r.DestinationPrefix, r.NextHop))
	}
	for _, pol := range t.Policies {
		tw.field(2, "Policy", describe(pol))
	}
}

// liveRoutes says what of p's routes only the live cluster knows: the
// route table's entries without a tunnel MAC, or whose blocks are claimed
// at run time. (Format 1 listed these in the plan's unresolved.)
func liveRoutes(p *NodePlan) []Unresolved {
	t := p.Routes
	if t == nil {
		return nil
	}
	var noMAC, blocks []string
	for _, n := range t.Nodes {
		switch {
		case n.Node == p.Node:
		case n.LiveBlocks:
			blocks = append(blocks, n.Node)
		case t.Type == RoutesRemoteSubnet && n.TunnelMAC == "" && len(n.Blocks) > 0:
			noMAC = append(noMAC, n.Node)
		}
	}
	var out []Unresolved
	if len(noMAC) > 0 {
		src := "each node's VXLAN tunnel MAC: annotation projectcalico.org/VXLANTunnelMACAddr (Linux), the DrMacAddress its agent publishes there (Windows)"
		if p.Networking == "flannel-vxlan" {
			src = "each node's VtepMAC in annotation flannel.alpha.coreos.com/backend-data"
		}
		out = append(out, Unresolved{Field: "routeTable.nodes[].tunnelMAC", Source: src, Nodes: noMAC})
	}
	if len(blocks) > 0 {
		out = append(out, Unresolved{Field: "routeTable.nodes[].blocks", Source: "the blocks Calico assigns to these Linux nodes at run time (BlockAffinity objects)", Nodes: blocks})
	}
	return out
}

type textWriter struct {
	w   io.Writer
	err error
}

func (t *textWriter) line(indent int, format string, args ...any) {
	if t.err != nil {
		return
	}
	_, t.err = fmt.Fprintf(t.w, "%s%s\n", strings.Repeat("  ", indent), fmt.Sprintf(format, args...))
}

func (t *textWriter) field(indent int, name, value string) {
	t.line(indent, "%-12s: %s", name, value)
}

func (t *textWriter) endpoint(indent int, title string, e Endpoint) {
	if e.Name != "" {
		title += " " + e.Name
	}
	t.line(indent, "%s", title)
	var ips []string
	for _, c := range e.IpConfigurations {
		ips = append(ips, fmt.Sprintf("%s/%d", c.IpAddress, c.PrefixLength))
	}
	t.field(indent+1, "IPAddress", strings.Join(ips, ", "))
	if e.MacAddress != "" {
		t.field(indent+1, "MacAddress", e.MacAddress)
	}
	var flags []string
	if e.Flags&FlagRemoteEndpoint != 0 {
		flags = append(flags, "RemoteEndpoint")
	}
	if e.Attach != "" {
		flags = append(flags, "attached to the "+strings.ToLower(e.Attach))
	}
	if len(flags) > 0 {
		t.field(indent+1, "Flags", strings.Join(flags, ", "))
	}
	if e.Dns != nil && len(e.Dns.Search) > 0 {
		t.field(indent+1, "Dns", strings.Join(e.Dns.Search, ", "))
	}
	for _, pol := range e.Policies {
		t.field(indent+1, "Policy", describe(pol))
	}
}

// Describe is one line for a policy, in the words of WriteText.
func Describe(p Policy) string { return describe(p) }

// describe is one line for a policy.
func describe(p Policy) string {
	switch s := p.Settings.(type) {
	case VSID:
		return fmt.Sprintf("VSID %d", s.IsolationId)
	case VxlanPort:
		return fmt.Sprintf("VxlanPort %d", s.Port)
	case HostRouteSetting:
		return "HostRoute"
	case NetAdapterName:
		return fmt.Sprintf("NetAdapterName %q", s.NetworkAdapterName)
	case ProviderAddress:
		return "ProviderAddress " + s.ProviderAddress.String()
	case OutBoundNAT:
		ex := make([]string, len(s.Exceptions))
		for i, e := range s.Exceptions {
			ex[i] = e.String()
		}
		return "OutBoundNAT except " + strings.Join(ex, ", ")
	case SDNRoute:
		encap := ""
		if s.NeedEncap {
			encap = " (encap)"
		}
		return "SDNRoute " + s.DestinationPrefix.String() + encap
	case RemoteSubnetRouteSetting:
		return fmt.Sprintf("RemoteSubnetRoute %s PA %s", s.DestinationPrefix, s.ProviderAddress)
	case ACL:
		var b strings.Builder
		fmt.Fprintf(&b, "ACL %-3s %-5s %5d", s.Direction, s.Action, s.Priority)
		if s.RuleType == "Host" {
			b.WriteString(" host")
		}
		if s.Protocols != "256" {
			b.WriteString(" proto " + s.Protocols)
		}
		if s.RemoteAddresses != "" {
			b.WriteString(" remote " + abbreviate(s.RemoteAddresses, 6))
		}
		if s.LocalPorts != "" {
			b.WriteString(" lport " + s.LocalPorts)
		}
		if s.RemotePorts != "" {
			b.WriteString(" rport " + s.RemotePorts)
		}
		if s.Id != "" {
			b.WriteString("  [" + s.Id + "]")
		}
		return b.String()
	case Raw:
		return s.Type + " " + string(s.JSON)
	}
	return p.Type
}

// abbreviate shortens a comma list past max items.
func abbreviate(list string, max int) string {
	items := strings.Split(list, ",")
	if len(items) <= max {
		return list
	}
	return strings.Join(items[:max], ",") + fmt.Sprintf(",… (%d in all)", len(items))
}

func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12] + "…"
	}
	return d
}

func addrs(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

func shortList(s []string, max int) string {
	if len(s) <= max {
		return strings.Join(s, ", ")
	}
	return strings.Join(s[:max], ", ") + fmt.Sprintf(" and %d more", len(s)-max)
}
