package hnsmem

import (
	"encoding/json"
	"slices"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// cloneState copies s deeply: nothing of the copy is shared with s.
func cloneState(s *hns.State) *hns.State { return copyState(s, false) }

// copyState is cloneState, but with shareRoutes the copy's networks
// share their RemoteRoutes with s's, capped so that an append copies: a
// transaction takes its own (txn.ownRoutes) before it changes them in
// place. A node of a 5,000-node cluster holds 5,000 routes, which each
// pod's ACL write would otherwise copy.
func copyState(s *hns.State, shareRoutes bool) *hns.State {
	c := &hns.State{LoadBalancers: slices.Clone(s.LoadBalancers)}
	if s.Networks != nil {
		c.Networks = make([]hns.Network, len(s.Networks))
		for i := range s.Networks {
			if shareRoutes {
				n := s.Networks[i]
				n.Subnets, n.RemoteRoutes = slices.Clone(n.Subnets), slices.Clip(n.RemoteRoutes)
				c.Networks[i] = n
			} else {
				c.Networks[i] = cloneNetwork(&s.Networks[i])
			}
		}
	}
	if s.Endpoints != nil {
		c.Endpoints = make([]hns.Endpoint, len(s.Endpoints))
		for i := range s.Endpoints {
			c.Endpoints[i] = cloneEndpoint(&s.Endpoints[i])
		}
	}
	return c
}

func cloneNetwork(n *hns.Network) hns.Network {
	c := *n
	c.Subnets = slices.Clone(n.Subnets)
	c.RemoteRoutes = slices.Clone(n.RemoteRoutes)
	return c
}

func cloneEndpoint(e *hns.Endpoint) hns.Endpoint {
	c := *e
	if e.Health != nil {
		h := *e.Health
		c.Health = &h
	}
	c.Policies = clonePolicies(e.Policies)
	c.ACLs = slices.Clone(e.ACLs)
	return c
}

// clonePolicies copies policies with the settings that hold slices or
// pointers; the other settings are plain values.
func clonePolicies(ps []plan.Policy) []plan.Policy {
	if ps == nil {
		return nil
	}
	c := make([]plan.Policy, len(ps))
	for i, p := range ps {
		switch s := p.Settings.(type) {
		case plan.OutBoundNAT:
			s.Exceptions = slices.Clone(s.Exceptions)
			p.Settings = s
		case plan.Raw:
			s.JSON = slices.Clone(s.JSON)
			p.Settings = s
		case *plan.OutBoundNAT:
			v := *s
			v.Exceptions = slices.Clone(s.Exceptions)
			p.Settings = v
		case *plan.VSID:
			p.Settings = *s
		case *plan.VxlanPort:
			p.Settings = *s
		case *plan.HostRouteSetting:
			p.Settings = *s
		case *plan.NetAdapterName:
			p.Settings = *s
		case *plan.ProviderAddress:
			p.Settings = *s
		case *plan.SDNRoute:
			p.Settings = *s
		case *plan.RemoteSubnetRouteSetting:
			p.Settings = *s
		}
		c[i] = p
	}
	return c
}

// samePolicies compares two policy lists as sets, by their wire form.
func samePolicies(a, b []plan.Policy) bool {
	key := func(ps []plan.Policy) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			j, err := json.Marshal(p)
			if err != nil {
				j = []byte(plan.Describe(p))
			}
			out[i] = string(j)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}
