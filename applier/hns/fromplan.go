package hns

import (
	"fmt"
	"net/netip"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// WantFromPlan turns a node plan into what HNS should hold. Values the
// plan leaves to the live cluster (a remote node's tunnel MAC, the host
// endpoint's MAC) are filled from live, when it has them; a route whose
// MAC nobody knows yet is left out and listed in pending, to be added once
// the live cluster says it.
//
// A policy-only plan wants the ACL lists of its endpoints (one per pod,
// possibly empty) on the networks it matches, and nothing else; its
// network patterns are checked by plan.Validate, and one that does not
// compile here is an error.
func WantFromPlan(p *plan.NodePlan, live LiveValues) (w *Want, pending []string, err error) {
	w = &Want{PodACLs: map[netip.Addr][]plan.ACL{}, PodNames: map[netip.Addr]string{}}
	if po := p.PolicyOnly; po != nil {
		if w.Foreign, err = plan.NewNetworkMatcher(po.Networks); err != nil {
			return nil, nil, fmt.Errorf("plan %s: policyOnly.networks: %w", p.Digest, err)
		}
		for _, ep := range p.Endpoints {
			if len(ep.IpConfigurations) == 0 {
				continue
			}
			a := ep.IpConfigurations[0].IpAddress
			acls := []plan.ACL{}
			for _, pol := range ep.Policies {
				if s, ok := pol.Settings.(plan.ACL); ok {
					acls = append(acls, s)
				}
			}
			w.PodACLs[a], w.PodNames[a] = CanonicalACLs(acls), ep.Pod
		}
		return w, nil, nil
	}
	n := &w.Network
	n.Name, n.Type = p.Network.Name, p.Network.Type
	for _, ipam := range p.Network.Ipams {
		for _, s := range ipam.Subnets {
			sub := Subnet{Prefix: s.IpAddressPrefix}
			for _, r := range s.Routes {
				if r.DestinationPrefix.Bits() == 0 {
					sub.Gateway = r.NextHop
				}
			}
			if v, ok := plan.Find[plan.VSID](s.Policies); ok {
				sub.VNI = v.IsolationId
			}
			n.Subnets = append(n.Subnets, sub)
		}
	}
	if v, ok := plan.Find[plan.VxlanPort](p.Network.Policies); ok {
		n.VXLANPort = v.Port
	}
	_, n.HostRoute = plan.Find[plan.HostRouteSetting](p.Network.Policies)
	if v, ok := plan.Find[plan.NetAdapterName](p.Network.Policies); ok {
		n.AdapterName = v.NetworkAdapterName
	} else if live.AdapterName != "" && n.Type == "L2Bridge" {
		n.AdapterName = live.AdapterName
	}
	for _, r := range p.RemoteSubnetRoutes() {
		mac := r.DistributedRouterMacAddress
		if mac == "" {
			mac = live.TunnelMACs[r.Node]
		}
		if mac == "" {
			pending = append(pending, fmt.Sprintf("route %s to %s: its tunnel MAC is not known yet", r.DestinationPrefix, r.Node))
			continue
		}
		n.RemoteRoutes = append(n.RemoteRoutes, RemoteRoute{Prefix: r.DestinationPrefix, VNI: r.IsolationId, ProviderAddress: r.ProviderAddress, DRMAC: mac})
	}

	h := p.HostEndpoint
	e := &w.HostEndpoint
	e.Name, e.Network = h.Name, n.Name
	if len(h.IpConfigurations) > 0 {
		c := h.IpConfigurations[0]
		e.IP = netip.PrefixFrom(c.IpAddress, c.PrefixLength)
	}
	e.MAC = h.MacAddress
	if e.MAC == "" {
		e.MAC = live.HostMAC // "" lets HNS choose
	}
	e.Remote = h.Flags&plan.FlagRemoteEndpoint != 0
	e.HostAttached = h.Attach == "Host"
	// ACLs go in ACLs, as a Snapshot reports them, or Diff would see the
	// host endpoint's policies differ on every pass.
	for _, pol := range h.Policies {
		if a, ok := pol.Settings.(plan.ACL); ok {
			e.ACLs = append(e.ACLs, a)
		} else {
			e.Policies = append(e.Policies, pol)
		}
	}
	e.ACLs = CanonicalACLs(e.ACLs)

	for _, ep := range p.Endpoints {
		if len(ep.IpConfigurations) == 0 {
			continue
		}
		var acls []plan.ACL
		for _, pol := range ep.Policies {
			if a, ok := pol.Settings.(plan.ACL); ok {
				acls = append(acls, a)
			}
		}
		if acls != nil {
			w.PodACLs[ep.IpConfigurations[0].IpAddress] = CanonicalACLs(acls)
			w.PodNames[ep.IpConfigurations[0].IpAddress] = ep.Pod
		}
	}
	return w, pending, nil
}

// LiveValues are what the live cluster and host know that a plan cannot.
type LiveValues struct {
	// TunnelMACs are the VXLAN tunnel MACs of other nodes, by node name.
	TunnelMACs map[string]string
	// HostMAC is the MAC of the host adapter (the VXLAN host endpoint's).
	HostMAC string
	// AdapterName is the host adapter an L2Bridge network binds to.
	AdapterName string
}
