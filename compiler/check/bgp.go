package check

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
)

func bgp(x *checker) {
	if !x.hasWindows() {
		return
	}
	for _, n := range x.Windows {
		if n.RouteReflector {
			x.report("windows-route-reflector", n.Name, []any{"nodes", n.Name, "routeReflector"},
				"Windows node %s cannot be a BGP route reflector; make a Linux node the route reflector", n.Name)
		}
	}
	if b := x.c.BGP; b != nil && len(b.ServiceClusterIPs) > 0 {
		x.report("service-ip-advertisement", "", []any{"bgp", "serviceClusterIPs"},
			"advertising service cluster IPs (%s) over BGP is not supported with Windows nodes", prefixes(b.ServiceClusterIPs))
	}
	if x.c.Networking == intent.CalicoBGP {
		if b := x.c.BGP; b == nil || b.NodeToNodeMesh && len(b.Peers) == 0 {
			x.l2Reachability()
		}
		for _, n := range x.Windows {
			if n.RemoteAccessInstalled == nil || !*n.RemoteAccessInstalled {
				x.report("bgp-remote-access", n.Name, []any{"nodes", n.Name},
					"Windows node %s on calico-bgp needs the RemoteAccess service (the Windows BGP router); install it and set remoteAccessInstalled: true", n.Name)
			}
		}
	}
	switch x.c.Platform {
	case "aws", "eks":
		if x.c.Networking == intent.CalicoBGP || x.c.Networking == intent.FlannelHostGW {
			for _, n := range x.c.Nodes {
				if n.SourceDestCheckDisabled == nil || !*n.SourceDestCheckDisabled {
					x.report("aws-source-dest-check", n.Name, []any{"nodes", n.Name},
						"node %s: on %s with %s, disable the EC2 source/destination check so the host can forward pod traffic, and set sourceDestCheckDisabled: true", n.Name, x.c.Platform, x.c.Networking)
				}
			}
		}
	}
	switch x.c.Platform {
	case "aws", "eks", "azure", "aks", "gcp":
		if x.c.PolicyOnly() {
			break // the agent creates no vSwitch
		}
		x.report("cloud-metadata-route", "", []any{"platform"},
			"on %s, creating the HNS vSwitch can remove the route to the cloud metadata service; the agent snapshots host routes and restores them", x.c.Platform)
	}
}

// l2Reachability checks that a BGP full mesh without peers runs over one
// layer-2 network: each node's network is its address masked by its
// prefix. Nodes are grouped by network, so this is linear in nodes.
func (x *checker) l2Reachability() {
	groups := map[netip.Prefix][]*intent.Node{}
	var order []netip.Prefix
	for i := range x.c.Nodes {
		n := &x.c.Nodes[i]
		if !n.Subnet.IsValid() {
			continue
		}
		if _, ok := groups[n.Subnet]; !ok {
			order = append(order, n.Subnet)
		}
		groups[n.Subnet] = append(groups[n.Subnet], n)
	}
	if len(groups) < 2 {
		return
	}
	// Largest group first: the odd ones out are the nodes to report.
	slices.SortStableFunc(order, func(a, b netip.Prefix) int { return len(groups[b]) - len(groups[a]) })
	main := groups[order[0]][0]
	var nets []string
	for _, p := range order {
		nets = append(nets, fmt.Sprintf("%s (%s)", p, names(groups[p])))
	}
	for _, p := range order[1:] {
		n := groups[p][0]
		x.reportRel("bgp-l2-reachability", n.Name, []any{"nodes", n.Name, "address"},
			[]diag.Related{x.rel([]any{"nodes", main.Name, "address"}, "node %s: network %s", main.Name, main.Subnet)},
			"node %s has network %s (%s) and node %s has network %s (%s): they are unlikely to be on one layer-2 network, which a BGP node-to-node mesh without peers needs; nodes by network: %s",
			main.Name, addrWithBits(main), main.Subnet, n.Name, addrWithBits(n), n.Subnet, strings.Join(nets, "; "))
	}
}

func addrWithBits(n *intent.Node) string {
	return netip.PrefixFrom(n.Addr, n.Subnet.Bits()).String()
}
