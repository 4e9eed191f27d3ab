package applier

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// TunnelNode is this node's side of the VXLAN tunnel annotations;
// *kube.Client is one.
type TunnelNode interface {
	// Node is this node as the cache shows it (TunnelMAC, TunnelAddr).
	Node() (kube.Node, bool)
	PublishTunnel(ctx context.Context, mac string, vtep netip.Addr) error
}

// PublishTunnel tells Calico's Linux nodes this node's VTEP: the block's
// .1 (the network's first subnet's gateway) and the network's
// DrMacAddress, once HNS reports them and the network's ProviderAddress
// is the node's, the plan's host endpoint's (Calico's
// EnsureVXLANTunnelAddr, research/calico-windows.md). It does nothing
// without an Overlay plan, before HNS has the network up, or when the
// node already shows these values.
func PublishTunnel(ctx context.Context, k TunnelNode, c hns.Client, p *plan.NodePlan) error {
	if p == nil || p.Network.Type != "Overlay" {
		return nil
	}
	have, err := c.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("read HNS for the tunnel: %w", err)
	}
	n := have.Network(p.Network.Name)
	pa, ok := plan.Find[plan.ProviderAddress](p.HostEndpoint.Policies)
	if n == nil || n.DRMAC == "" || len(n.Subnets) == 0 || !ok || n.ProviderAddress != pa.ProviderAddress {
		return nil
	}
	vtep := n.Subnets[0].Gateway
	if node, ok := k.Node(); ok && node.TunnelMAC == n.DRMAC && node.TunnelAddr == vtep {
		return nil
	}
	return k.PublishTunnel(ctx, n.DRMAC, vtep)
}
