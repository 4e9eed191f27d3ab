package hns

// Owned names the network the agent owns and that network's host
// endpoint, as the agent's state directory records them: what lets it
// recognise its network once a plan renames it. HNS objects are keyed by
// name, never by GUID (a recreated network gets a new one).
type Owned struct {
	Network      string `json:"network"`
	HostEndpoint string `json:"hostEndpoint"`
}

// ReasonRenamed is why a network is replaced when the plan gives the
// agent's network another name: HNS cannot rename a network.
const ReasonRenamed = "network-name-changed"

// Previous returns the network the agent owns under another name than
// the plan's, and its host endpoint's name ("" if none is known), or nil.
// Only a network the agent has positive evidence of owning is returned,
// and only while the plan's network does not exist:
//
//   - the network want.Owned records (the state directory's record), if
//     HNS still holds it;
//   - with no record at all (lost, or written by no agent yet), the one
//     network whose identity is exactly the plan's (type, subnets with
//     their gateways and VNI, VXLAN port): two networks on one block
//     with one VNI cannot both work, so it is the node's network under
//     its old name. Its host endpoint is the endpoint on it at the
//     plan's host endpoint address. With more than one such network
//     there is no telling which: none is returned.
//
// A network that merely shares something with the plan is never
// returned: what is not proven the agent's is never deleted.
func Previous(have *State, want *Want) (n *Network, hostEndpoint string) {
	if have.Network(want.Network.Name) != nil {
		return nil, ""
	}
	if o := want.Owned; o != nil {
		if o.Network == want.Network.Name {
			return nil, "" // ours is the plan's, and gone (a reboot): it is created
		}
		if n := have.Network(o.Network); n != nil {
			return n, o.HostEndpoint
		}
		return nil, ""
	}
	id := identity(&want.Network)
	for i := range have.Networks {
		if identity(&have.Networks[i]) != id {
			continue
		}
		if n != nil {
			return nil, "" // ambiguous: no evidence which is ours
		}
		n = &have.Networks[i]
	}
	if n == nil {
		return nil, ""
	}
	for _, e := range have.EndpointsOn(n.Name) {
		if want.HostEndpoint.IP.IsValid() && e.IP.Addr() == want.HostEndpoint.IP.Addr() {
			hostEndpoint = e.Name
		}
	}
	return n, hostEndpoint
}
