package topology

import (
	"net/netip"
	"slices"

	"github.com/hnsplan/hnsplan/compiler/intent"
)

// NATExceptions returns the OutBoundNAT exception list of a Windows node's
// pod endpoints, sorted, without duplicates or prefixes another covers:
// every pool CIDR, the service CIDRs, the node's host subnet (unless
// windows.disableHostSubnetNATExclusion) and windows.natExceptions
// (references 000, 003). It is nil when the node's pools do not NAT.
func NATExceptions(c *intent.Cluster, n *intent.Node, natOutgoing bool) []netip.Prefix {
	if !natOutgoing {
		return nil
	}
	var ps []netip.Prefix
	for _, p := range c.Pools {
		if p.CIDR.IsValid() {
			ps = append(ps, p.CIDR)
		}
	}
	ps = append(ps, c.ServiceCIDRs...)
	if !c.Windows.DisableHostSubnetNATExclusion && n.Subnet.IsValid() {
		ps = append(ps, n.Subnet)
	}
	ps = append(ps, c.Windows.NATExceptions...)
	return mergePrefixes(ps)
}

// mergePrefixes sorts ps and drops those that another contains.
func mergePrefixes(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	var out []netip.Prefix
	for _, p := range ps {
		if len(out) > 0 {
			last := out[len(out)-1]
			if last.Addr().Is4() == p.Addr().Is4() && last.Bits() <= p.Bits() && last.Contains(p.Addr()) {
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

// PoolContaining returns the enabled pool that contains block, or nil.
func (t *Topology) PoolContaining(block netip.Prefix) *Pool {
	for _, p := range t.Pools {
		if p.CIDR.Bits() <= block.Bits() && p.CIDR.Contains(block.Addr()) {
			return p
		}
	}
	return nil
}

// PodCIDRNATOutgoing reports whether pods on a node with a podCIDR (flannel,
// host-local IPAM) are NATed outbound: as the pool holding the podCIDR
// says, and yes when no pool does (flannel's and win-bridge's default).
func (t *Topology) PodCIDRNATOutgoing(n *intent.Node) bool {
	if p := t.PoolContaining(n.PodCIDR); n.PodCIDR.IsValid() && p != nil {
		return p.NATOutgoing
	}
	return true
}
