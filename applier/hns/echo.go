package hns

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// Echo is the agent's baseline of what HNS echoes: for each object whose
// read-back after a write was not exactly what the agent sent, the two
// forms side by side. Real HNS re-serialises what it is given (its own
// field order, fields of its own such as Scope, an Id or a VxlanPort
// policy left out, "256" read back as ""), so comparing HNS with the
// request alone would rewrite, or worse replace, an object on every pass.
//
// Diff compares an object with its baseline first: while HNS still reads
// back exactly what it read back after the agent's write, the object holds
// what the agent sent, and only the plan's own change causes an op. Any
// other read (an operator's edit, a reboot that lost the object, another
// controller) is compared with the plan directly, with the tolerance of
// the codec (see EquivalentACLs, and identity fields read back absent are
// unknown, never changed). So losing the baseline costs at most one more
// write per object, never a replace.
//
// An object HNS echoes exactly has no record: the baseline stays as small
// as HNS's deviations. Echo is not safe for concurrent use.
type Echo struct {
	Version   int                      `json:"version"`
	Networks  map[string]*NetworkEcho  `json:"networks,omitempty"`  // by network name
	Endpoints map[string]*EndpointEcho `json:"endpoints,omitempty"` // by EndpointKey
	// Replaces holds the last network replace the agent ran (plan digest
	// and reason): the same one never runs twice automatically.
	Replaces []ReplaceRecord `json:"replaces,omitempty"`
}

// EchoVersion is the format of Echo the agent reads and writes.
const EchoVersion = 1

// NetworkEcho is a network's baseline: its identity and policies as sent
// and as read back (routes are ops of their own; ProviderAddress and
// DrMacAddress are HNS's).
type NetworkEcho struct {
	Sent Network `json:"sent"`
	Read Network `json:"read"`
	Echoed
}

// EndpointEcho is an endpoint's baseline: for the host endpoint, its
// address, MAC, flags, policies and ACLs; for a pod endpoint, its ACLs.
type EndpointEcho struct {
	Name string   `json:"name"`
	Sent Endpoint `json:"sent"`
	Read Endpoint `json:"read"`
	// Pod is set for a pod endpoint: only its ACLs are the agent's.
	Pod bool `json:"pod,omitempty"`
	Echoed
}

// Echoed is how the read-back of an object compares with what was sent.
type Echoed struct {
	// Writes counts the writes of the same Sent whose read-back did not
	// echo it (0: it did, with HNS's known normalisations).
	Writes int `json:"writes,omitempty"`
	// Mismatch is set once the read-back still differs after two writes
	// (or once, for what only a replace could write again): the object is
	// reported, and not written again until the plan or the object changes.
	Mismatch []Mismatch `json:"mismatch,omitempty"`
}

// trusted says whether Diff may take Sent for what HNS holds while it
// reads back Read: the echo was confirmed, or it is a reported mismatch
// that writing again would not mend.
func (e Echoed) trusted() bool { return e.Writes == 0 || len(e.Mismatch) > 0 }

// ReplaceRecord is one network replace the agent ran.
type ReplaceRecord struct {
	PlanDigest string `json:"planDigest"`
	Reason     string `json:"reason"`
}

// Mismatch is one field HNS read back otherwise than the agent sent it
// (hns-readback-mismatch).
type Mismatch struct {
	Object string `json:"object"` // "network Calico", "endpoint Calico_ep"
	Field  string `json:"field"`  // "VNI", "ACLs", ...
	Sent   string `json:"sent"`
	Read   string `json:"read"`
}

func (m Mismatch) String() string {
	return fmt.Sprintf("%s: %s sent %s, read back %s", m.Object, m.Field, m.Sent, m.Read)
}

// NewEcho returns an empty baseline.
func NewEcho() *Echo { return &Echo{Version: EchoVersion} }

// EndpointKey is the key of an endpoint's baseline: its HNS ID (names
// are not unique in HNS), or its name when it has none.
func EndpointKey(e *Endpoint) string {
	if e.ID != "" {
		return "id:" + strings.ToLower(e.ID)
	}
	return "name:" + e.Name
}

// echoNetwork is the network Diff compares with the plan: n itself, or,
// while n reads back exactly as after the agent's last write, the
// identity and policies the agent sent (routes stay n's).
func (e *Echo) echoNetwork(n *Network) *Network {
	if e == nil || n == nil {
		return n
	}
	r := e.Networks[n.Name]
	if r == nil || !r.trusted() || !sameNetworkForm(&r.Read, n) {
		return n
	}
	c := *n
	c.Type, c.Subnets, c.VXLANPort, c.HostRoute, c.AdapterName = r.Sent.Type, r.Sent.Subnets, r.Sent.VXLANPort, r.Sent.HostRoute, r.Sent.AdapterName
	return &c
}

// echoEndpoint is the host endpoint Diff compares with the plan.
func (e *Echo) echoEndpoint(ep *Endpoint) *Endpoint {
	if e == nil || ep == nil || len(e.Endpoints) == 0 {
		return ep
	}
	r := e.Endpoints[EndpointKey(ep)]
	if r == nil || r.Pod || !r.trusted() || !sameEndpointForm(&r.Read, ep) {
		return ep
	}
	c := *ep
	c.IP, c.MAC, c.Remote, c.HostAttached, c.Policies, c.ACLs = r.Sent.IP, r.Sent.MAC, r.Sent.Remote, r.Sent.HostAttached, r.Sent.Policies, r.Sent.ACLs
	return &c
}

// echoACLs is the ACL list of a pod endpoint Diff compares with the plan.
func (e *Echo) echoACLs(ep *Endpoint) []plan.ACL {
	if e == nil || len(e.Endpoints) == 0 {
		return ep.ACLs
	}
	r := e.Endpoints[EndpointKey(ep)]
	if r == nil || !r.Pod || !r.trusted() || !slices.Equal(CanonicalACLs(r.Read.ACLs), CanonicalACLs(ep.ACLs)) {
		return ep.ACLs
	}
	return r.Sent.ACLs
}

// Replaced says whether the replace of the plan with digest for reason
// already ran: it is not run again automatically.
func (e *Echo) Replaced(digest, reason string) bool {
	if e == nil {
		return false
	}
	return slices.Contains(e.Replaces, ReplaceRecord{PlanDigest: digest, Reason: reason})
}

// NoteReplace records that the replace of the plan with digest for
// reason ran. Only the last replace is kept: going back and forth
// between two plans replaces each time, but a replace that leaves the
// network reading back as before is not run again for the same plan.
func (e *Echo) NoteReplace(digest, reason string) {
	e.Replaces = []ReplaceRecord{{PlanDigest: digest, Reason: reason}}
}

// Mismatches lists the reported mismatches, sorted.
func (e *Echo) Mismatches() []Mismatch {
	if e == nil {
		return nil
	}
	var out []Mismatch
	for _, r := range e.Networks {
		out = append(out, r.Mismatch...)
	}
	for _, r := range e.Endpoints {
		out = append(out, r.Mismatch...)
	}
	slices.SortFunc(out, func(a, b Mismatch) int {
		return strings.Compare(a.Object+"\x00"+a.Field, b.Object+"\x00"+b.Field)
	})
	return out
}

// netForm is a network as its baseline holds it: identity and policies.
func netForm(n *Network) Network {
	return Network{Name: n.Name, Type: n.Type, Subnets: slices.Clone(n.Subnets), VXLANPort: n.VXLANPort, HostRoute: n.HostRoute, AdapterName: n.AdapterName}
}

func sameNetworkForm(a, b *Network) bool {
	return a.Type == b.Type && slices.Equal(a.Subnets, b.Subnets) && a.VXLANPort == b.VXLANPort && a.HostRoute == b.HostRoute && a.AdapterName == b.AdapterName
}

func sameEndpointForm(a, b *Endpoint) bool {
	return a.Network == b.Network && a.IP == b.IP && a.MAC == b.MAC && a.Remote == b.Remote && a.HostAttached == b.HostAttached &&
		samePolicies(a.Policies, b.Policies) && slices.Equal(CanonicalACLs(a.ACLs), CanonicalACLs(b.ACLs))
}

// networkEchoes lists the fields of read that do not echo sent. A field
// read back absent (VNI 0, no VxlanPort policy, no gateway) is unknown,
// not a mismatch; identity says whether a mismatching field is one only
// a replace could write again.
func networkEchoes(sent, read *Network) (ms []Mismatch, identity bool) {
	obj := "network " + sent.Name
	add := func(field string, s, r any, ident bool) {
		ms = append(ms, Mismatch{Object: obj, Field: field, Sent: fmt.Sprint(s), Read: fmt.Sprint(r)})
		identity = identity || ident
	}
	if sent.Type != read.Type && read.Type != "" {
		add("Type", sent.Type, read.Type, true)
	}
	if len(sent.Subnets) != len(read.Subnets) {
		add("Subnets", sent.Subnets, read.Subnets, true)
	} else {
		for i, s := range sent.Subnets {
			r := read.Subnets[i]
			if s.Prefix != r.Prefix {
				add("Subnet", s.Prefix, r.Prefix, true)
			}
			if r.Gateway.IsValid() && s.Gateway != r.Gateway {
				add(fmt.Sprintf("Subnet %s gateway", s.Prefix), s.Gateway, r.Gateway, true)
			}
			if r.VNI != 0 && s.VNI != r.VNI {
				add("VNI", s.VNI, r.VNI, true)
			}
		}
	}
	if read.VXLANPort != 0 && sent.VXLANPort != read.VXLANPort {
		add("VxlanPort", sent.VXLANPort, read.VXLANPort, true)
	}
	if sent.HostRoute != read.HostRoute {
		add("HostRoute", sent.HostRoute, read.HostRoute, false)
	}
	if sent.AdapterName != read.AdapterName {
		add("NetAdapterName", quoted(sent.AdapterName), quoted(read.AdapterName), false)
	}
	return ms, identity
}

// endpointEchoes lists the fields of read that do not echo sent; pod
// endpoints are compared on their ACLs only.
func endpointEchoes(sent, read *Endpoint, pod bool) []Mismatch {
	obj := "endpoint " + sent.Name
	var ms []Mismatch
	add := func(field string, s, r any) {
		ms = append(ms, Mismatch{Object: obj, Field: field, Sent: fmt.Sprint(s), Read: fmt.Sprint(r)})
	}
	if !pod {
		if sent.IP != read.IP {
			add("IP", sent.IP, read.IP)
		}
		if sent.MAC != "" && !SameMAC(sent.MAC, read.MAC) {
			add("MAC", sent.MAC, read.MAC)
		}
		if sent.Remote != read.Remote {
			add("Remote", sent.Remote, read.Remote)
		}
		if sent.HostAttached != read.HostAttached {
			add("HostAttached", sent.HostAttached, read.HostAttached)
		}
		if !samePolicies(sent.Policies, read.Policies) {
			add("Policies", describePolicies(sent.Policies), describePolicies(read.Policies))
		}
	}
	if s, r, ok := unechoedACL(sent.ACLs, read.ACLs); !ok {
		add("ACLs", s, r)
	}
	return ms
}

func quoted(s string) string { return fmt.Sprintf("%q", s) }

func describePolicies(ps []plan.Policy) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = plan.Describe(p)
	}
	slices.Sort(out)
	return "[" + strings.Join(out, "; ") + "]"
}

// SameMAC compares two MAC addresses as HNS does: without regard to case
// or to the separator ("0e:2a:..." is "0E-2A-...").
func SameMAC(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == ':' {
			x = '-'
		}
		if y == ':' {
			y = '-'
		}
		if x != y && lower(x) != lower(y) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// NetworkMismatches lists the identity and policy fields of read (a
// network as HNS reads it back) that differ from sent.
func NetworkMismatches(sent, read *Network) []Mismatch {
	s, r := netForm(sent), netForm(read)
	ms, _ := networkEchoes(&s, &r)
	return ms
}
