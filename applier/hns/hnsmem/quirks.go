package hnsmem

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// A Quirk is one way real HNS may read back otherwise than it was asked,
// or accept what the model refuses. Nothing has run on a Windows host
// yet, so each is a possibility the public evidence raises (the real
// documents in applier/hns/hnswin/testdata/real, and the research note
// hcsshim-hns.md), modelled so the agent is tested against it. All are
// off by default (WithQuirks, hnsplan-agent --mem-quirks);
// docs/first-windows-host.md says how a real host confirms or retires
// each.
type Quirk string

const (
	// QuirkNoVxlanPortEcho: a network's VxlanPort policy is not read back
	// (hnswin fills in 4789 only on hosts without the feature; a network
	// Calico made has none).
	QuirkNoVxlanPortEcho Quirk = "no-vxlanport-echo"
	// QuirkNoACLID: ACLs read back without their Id (azure-container-
	// networking#3550: none sent, none back; whether HNS keeps one sent
	// is unverified).
	QuirkNoACLID Quirk = "no-acl-id"
	// QuirkACLAnyEmpty: Protocols "256" (any) reads back "" (Azure NPM
	// now sends "" where it sent "256": both spellings are in use).
	QuirkACLAnyEmpty Quirk = "acl-any-empty"
	// QuirkACLExtraFields: HNS re-serialises ACL settings in its own key
	// order with fields of its own ("Scope": 0, azure-container-
	// networking#1752), and lists them in its own order.
	QuirkACLExtraFields Quirk = "acl-extra-fields"
	// QuirkACLPriorityDefault: an ACL sent without a Priority (0 is
	// omitted on the wire: the plan's host rules) reads back with a
	// default (the model's: DefaultACLPriority).
	QuirkACLPriorityDefault Quirk = "acl-priority-default"
	// QuirkDuplicateEndpointNames: creating an endpoint with a name that
	// is taken succeeds and makes a second one (calico#4280).
	QuirkDuplicateEndpointNames Quirk = "duplicate-endpoint-names"
	// QuirkDuplicateEndpointIPs: creating an endpoint on an address
	// another endpoint of the network holds succeeds, and both hold it
	// (Azure/AKS#5653: a stale endpoint and a new pod's, on real AKS
	// nodes; without it the model refuses, an assumption).
	QuirkDuplicateEndpointIPs Quirk = "duplicate-endpoint-ips"
	// QuirkVSIDUnreadable: a subnet's VSID reads back absent (a network
	// made through the v1 API keeps it in a form the v2 read may not
	// show).
	QuirkVSIDUnreadable Quirk = "vsid-unreadable"
	// QuirkVSIDEchoDiffers: a subnet's VSID reads back as another number
	// than was sent (one more): a read-back that no write can mend, to
	// test the agent's loop breaker.
	QuirkVSIDEchoDiffers Quirk = "vsid-echo-differs"
	// QuirkRouteBatchPartial: a batched route op (hns.KindRoutes, one
	// ModifyNetworkSettings request with many RemoteSubnetRoute policies)
	// that fails keeps the routes applied before the failure. Without it
	// a failed batch changes nothing (all or nothing). Which one real HNS
	// does is unverified: no public source shows a batch of network
	// policies failing in part, and Felix and flannel send one route per
	// request. The agent assumes neither: after a failed batch it reads
	// the network back (hns.RoutesLeft).
	QuirkRouteBatchPartial Quirk = "route-batch-partial"
)

// Quirks lists every quirk, in a fixed order.
var Quirks = []Quirk{
	QuirkNoVxlanPortEcho, QuirkNoACLID, QuirkACLAnyEmpty, QuirkACLExtraFields,
	QuirkACLPriorityDefault, QuirkDuplicateEndpointNames, QuirkDuplicateEndpointIPs, QuirkVSIDUnreadable, QuirkVSIDEchoDiffers,
	QuirkRouteBatchPartial,
}

// DefaultACLPriority is the priority QuirkACLPriorityDefault reads back
// for an ACL sent without one. What real HNS fills in is unknown; this
// one is inside the range the plan's rules use, so that it can collide.
const DefaultACLPriority = 1000

// ParseQuirks reads a comma-separated list of quirk names ("" is none).
func ParseQuirks(list string) ([]Quirk, error) {
	var out []Quirk
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !slices.Contains(Quirks, Quirk(f)) {
			names := make([]string, len(Quirks))
			for i, q := range Quirks {
				names[i] = string(q)
			}
			return nil, fmt.Errorf("unknown HNS quirk %q: want a comma-separated list of %s", f, strings.Join(names, ", "))
		}
		if !slices.Contains(out, Quirk(f)) {
			out = append(out, Quirk(f))
		}
	}
	return out, nil
}

// WithQuirks turns quirks on.
func WithQuirks(qs ...Quirk) Option {
	return func(c *config) { c.quirks = append(c.quirks, qs...) }
}

type quirkSet []Quirk

func (s quirkSet) has(q Quirk) bool { return slices.Contains(s, q) }

// readBack applies the read-side quirks to a snapshot: what the agent
// reads is not what the model holds.
func (s quirkSet) readBack(st *hns.State) {
	if len(s) == 0 {
		return
	}
	for i := range st.Networks {
		n := &st.Networks[i]
		if s.has(QuirkNoVxlanPortEcho) {
			n.VXLANPort = 0
		}
		for j := range n.Subnets {
			switch sub := &n.Subnets[j]; {
			case sub.VNI == 0:
			case s.has(QuirkVSIDUnreadable):
				sub.VNI = 0
			case s.has(QuirkVSIDEchoDiffers):
				sub.VNI++
			}
		}
	}
	for i := range st.Endpoints {
		e := &st.Endpoints[i]
		for j := range e.ACLs {
			a := &e.ACLs[j]
			if s.has(QuirkNoACLID) {
				a.Id = ""
			}
			if s.has(QuirkACLAnyEmpty) && a.Protocols == strconv.Itoa(plan.ProtocolAny) {
				a.Protocols = ""
			}
			if s.has(QuirkACLPriorityDefault) && a.Priority == 0 {
				a.Priority = DefaultACLPriority
			}
			if s.has(QuirkACLExtraFields) {
				*a = reserialised(*a)
			}
		}
		if s.has(QuirkACLExtraFields) {
			slices.Reverse(e.ACLs) // HNS's order, not the request's
		}
	}
}

// hnsACL is an ACL as HNS writes it back (azure-container-networking
// #3550: Protocols, LocalAddresses, RemoteAddresses, Priority, Action,
// Direction, RuleType), with fields of its own (#1752: Scope).
type hnsACL struct {
	Id               string `json:",omitempty"`
	Protocols        string `json:",omitempty"`
	LocalAddresses   string `json:",omitempty"`
	RemoteAddresses  string `json:",omitempty"`
	LocalPorts       string `json:",omitempty"`
	RemotePorts      string `json:",omitempty"`
	Priority         uint16
	Action           string
	Direction        string
	RuleType         string `json:",omitempty"`
	Scope            int
	Flags            int
	MaxPortPoolUsage int
}

// reserialised is a as a client reads it from HNS's re-serialised JSON.
func reserialised(a plan.ACL) plan.ACL {
	b, err := json.Marshal(hnsACL{Id: a.Id, Protocols: a.Protocols, LocalAddresses: a.LocalAddresses, RemoteAddresses: a.RemoteAddresses,
		LocalPorts: a.LocalPorts, RemotePorts: a.RemotePorts, Priority: a.Priority, Action: a.Action, Direction: a.Direction, RuleType: a.RuleType})
	if err != nil {
		panic(err) // plain strings and numbers
	}
	var out plan.ACL
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}
