package hns

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// This file is Diff for a policy-only plan (Want.Foreign): the network
// and the pod endpoints are another program's (Azure CNI, the VPC CNI,
// flanneld), and the agent programs the endpoints' ACL lists only.

// PodEndpoints lists the endpoints of have whose ACL lists the agent
// programs for want: on the plan's network, every endpoint but the host
// endpoint (and its duplicates) and kube-proxy's remote endpoints; in a
// policy-only plan, every local endpoint on a network Foreign matches.
func PodEndpoints(have *State, want *Want) []*Endpoint {
	if want.Foreign == nil {
		var out []*Endpoint
		for _, e := range have.EndpointsOn(want.Network.Name) {
			if e.Name != want.HostEndpoint.Name && !e.Remote {
				out = append(out, e)
			}
		}
		return out
	}
	var out []*Endpoint
	for i := range have.Endpoints {
		if e := &have.Endpoints[i]; !e.Remote && want.Foreign.Match(e.Network) {
			out = append(out, e)
		}
	}
	return out
}

// diffForeign is Diff for a policy-only plan: an ACL op for each pod
// endpoint on a matching network whose ACL list is not the pod's (want's
// own ACLs for its address, plus the owner's ACLs SplitForeignACLs keeps).
// Every endpoint holding a pod's address gets its ACLs, duplicates too
// (Azure/AKS#5653: a stale endpoint can hold a live pod's address): the
// pod is protected whichever one carries its traffic. An endpoint whose
// address is no pod's of this node is left as it is. Nothing is created,
// deleted or replaced.
func diffForeign(have *State, want *Want) []Op {
	var ops []Op
	for _, e := range PodEndpoints(have, want) {
		ours, ok := want.PodACLs[e.IP.Addr()]
		if !ok {
			continue
		}
		read := want.Echo.echoACLs(e)
		keep, drop := SplitForeignACLs(read)
		full := CanonicalACLs(slices.Concat(keep, ours))
		if EquivalentACLs(full, read) {
			continue
		}
		reason := "ACL list differs"
		if len(drop) > 0 {
			reason += "; " + droppedWhy(drop)
		}
		ops = append(ops, Op{Action: Update, Kind: KindACL, Name: e.Name, ID: e.ID, Network: e.Network, ACLs: full, Reason: reason})
	}
	return ops
}

// SplitForeignACLs sorts the ACL list of an endpoint another program
// owns, as read, into the owner's ACLs the agent keeps and the ACLs it
// drops; what is in neither is the agent's own (replaced by its list).
//
// The agent's ACLs are those of its priorities: Switch rules 900
// (allow-host-to-endpoint) to 65000, and its Host-layer allow of any
// protocol (sent at priority 0; HNS may read it back at its own default).
// An ACL outside them is another writer's:
//
//   - a Block is kept, whatever its priority: it only narrows what the
//     pod may do (AKS blocks pods from the wireserver, 168.63.129.16
//     ports 80 and 32526, at priority 200);
//   - an Allow past 65000 is kept: the agent's list ends in a catch-all
//     at 65000 or less in each direction, so it never decides (AKS's
//     Allow In and Out at 65500);
//   - an Allow before 900 is dropped: it would decide before the policy
//     and could let in what the policy denies (a leftover of Azure NPM,
//     priorities 201 and 222). Dropping it fails closed.
//
// The same rule holds whatever the agent's plan: an Allow of the owner's
// that decides first is never kept.
func SplitForeignACLs(acls []plan.ACL) (keep, drop []plan.ACL) {
	for _, a := range acls {
		switch {
		case ownACL(&a):
		case a.Action == "Block" || a.Priority > plan.MaxACLPriority:
			keep = append(keep, a)
		default:
			drop = append(drop, a)
		}
	}
	return keep, drop
}

// ownACL says whether a is in the agent's priorities (SplitForeignACLs).
func ownACL(a *plan.ACL) bool {
	if a.RuleType == "Host" {
		return a.Action == "Allow" && anyProtocol(a.Protocols) == "" && a.LocalAddresses == "" && a.RemoteAddresses == "" &&
			a.LocalPorts == "" && a.RemotePorts == ""
	}
	return a.Priority >= plan.MinSwitchACLPrio && a.Priority <= plan.MaxACLPriority
}

// droppedWhy says which Allow ACLs of another writer an ACL write drops.
func droppedWhy(drop []plan.ACL) string {
	var d []string
	for i, a := range drop {
		if i == 3 {
			d = append(d, fmt.Sprintf("and %d more", len(drop)-3))
			break
		}
		s := a.Direction + " priority " + strconv.Itoa(int(a.Priority))
		if a.Id != "" {
			s = a.Id + " (" + s + ")"
		}
		d = append(d, s)
	}
	return fmt.Sprintf("drops %d Allow ACL(s) of another writer that would decide before the policy: %s", len(drop), strings.Join(d, ", "))
}

// SharedAddresses lists the pod addresses of want that more than one of
// have's pod endpoints hold, with the endpoints' names: a stale endpoint
// a CNI failed to delete, holding the address of the pod that has it now
// (Azure/AKS#5653). Each gets the pod's ACLs; this says which to remove.
func SharedAddresses(have *State, want *Want) map[netip.Addr][]string {
	by := map[netip.Addr][]string{}
	for _, e := range PodEndpoints(have, want) {
		if _, ok := want.PodACLs[e.IP.Addr()]; ok {
			by[e.IP.Addr()] = append(by[e.IP.Addr()], e.Name)
		}
	}
	for a, names := range by {
		if len(names) < 2 {
			delete(by, a)
		}
	}
	return by
}
