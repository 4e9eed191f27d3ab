package check

import (
	"net/netip"
	"slices"

	"github.com/hnsplan/hnsplan/compiler/topology"
)

func nat(x *checker) {
	if !x.hasWindows() {
		return
	}
	if x.c.Windows.DisableHostSubnetNATExclusion {
		x.report("host-subnet-nat-disabled", "", []any{"windows", "disableHostSubnetNATExclusion"},
			"disableHostSubnetNATExclusion is true: pod traffic to hosts on the node's own subnet is NATed to the node's address")
	}
	// The list differs between nodes only by their subnet: compute and
	// format it once per subnet.
	bySubnet := map[netip.Prefix]string{}
	for _, n := range x.Windows {
		pools := x.PoolsOf[n.Name]
		natOut := slices.ContainsFunc(pools, func(p *topology.Pool) bool { return p.NATOutgoing })
		if x.usesPodCIDR() {
			natOut = x.PodCIDRNATOutgoing(n)
		}
		if !natOut {
			continue // no natOutgoing pool: no OutBoundNAT policy, nothing to list
		}
		list, ok := bySubnet[n.Subnet]
		if !ok {
			list = prefixes(topology.NATExceptions(x.c, n, true))
			bySubnet[n.Subnet] = list
		}
		x.report("nat-exceptions", n.Name, []any{"nodes", n.Name}, "node %s: OutBoundNAT exceptions %s", n.Name, list)
	}
}
