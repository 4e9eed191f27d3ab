package hnsmem

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// txn is one atomic change: it works on a copy of the state.
type txn struct {
	st  *hns.State
	seq uint64
	cfg *config
	// owned are the networks whose RemoteRoutes the transaction has
	// copied (copyState shares them with the committed state).
	owned map[string]bool
	// seeding adds what a node already holds (Seed): HNS holds it, so
	// what a create would refuse of it (an address another endpoint of
	// the network holds, Azure/AKS#5653) is taken as it is.
	seeding bool
}

// ownRoutes gives n (network name) RemoteRoutes of the transaction's
// own, before they are changed in place.
func (t *txn) ownRoutes(n *hns.Network, name string) {
	if t.owned[name] {
		return
	}
	if t.owned == nil {
		t.owned = map[string]bool{}
	}
	n.RemoteRoutes, t.owned[name] = slices.Clone(n.RemoteRoutes), true
}

// newID returns a GUID-shaped ID, deterministic: the first group says
// what the object is, the last is the counter. Plans never use IDs.
func (t *txn) newID(kind uint32) string {
	t.seq++
	return fmt.Sprintf("%08x-0000-0000-0000-%012x", kind, t.seq)
}

// describeCall names the HNS call(s) an op stands for.
func describeCall(op hns.Op) (method, object, request string) {
	object = op.Name
	switch op.Kind {
	case hns.KindNetwork:
		switch op.Action {
		case hns.Create:
			return "hcnCreateNetwork", object, ""
		case hns.Delete:
			return "hcnDeleteNetwork", object, ""
		case hns.Replace:
			return "hcnDeleteNetwork+hcnCreateNetwork", object, ""
		}
	case hns.KindRoute:
		object = op.Network
		switch op.Action {
		case hns.Create:
			request = "Add RemoteSubnetRoute " + op.Name
		case hns.Delete:
			request = "Remove RemoteSubnetRoute " + op.Name
		case hns.Replace:
			request = "Remove+Add RemoteSubnetRoute " + op.Name
		}
		return "hcnModifyNetwork", object, request
	case hns.KindRoutes:
		verb := map[hns.Action]string{hns.Create: "Add", hns.Delete: "Remove"}[op.Action]
		if verb == "" || len(op.Routes) == 0 {
			break
		}
		return "hcnModifyNetwork", op.Network, fmt.Sprintf("%s %d RemoteSubnetRoute (%s … %s)", verb, len(op.Routes), op.Routes[0].Prefix, op.Routes[len(op.Routes)-1].Prefix)
	case hns.KindNetPolicies:
		if s := op.NetworkSpec; s != nil {
			request = fmt.Sprintf("Policy HostRoute=%t NetAdapterName=%q", s.HostRoute, s.AdapterName)
		}
		return "hcnModifyNetwork", object, request
	case hns.KindEndpoint:
		switch op.Action {
		case hns.Create:
			return "hcnCreateEndpoint", object, ""
		case hns.Delete:
			return "hcnDeleteEndpoint", object, ""
		case hns.Replace:
			return "hcnDeleteEndpoint+hcnCreateEndpoint", object, ""
		case hns.Update:
			n := 0
			if s := op.EndpointSpec; s != nil {
				n = len(s.Policies) + len(s.ACLs)
			}
			return "hcnModifyEndpoint", object, fmt.Sprintf("Update Policy (%d policies)", n)
		}
	case hns.KindACL:
		return "hcnModifyEndpoint", object, fmt.Sprintf("Update Policy (its other policies + %d ACLs)", len(op.ACLs))
	}
	return fmt.Sprintf("Apply(%s %s)", op.Action.Symbol(), op.Kind), object, ""
}

// apply performs op on t.st. Errors that are not *hns.Error are ops HNS
// could not even be asked (a missing spec, an action a kind lacks).
func (t *txn) apply(op hns.Op) error {
	method, _, _ := describeCall(op)
	switch op.Kind {
	case hns.KindNetwork:
		return t.applyNetwork(op)
	case hns.KindRoute:
		return t.applyRoute(op)
	case hns.KindRoutes:
		_, err := t.applyRoutes(op, len(op.Routes))
		return err
	case hns.KindNetPolicies:
		if op.Action != hns.Update {
			break
		}
		if op.NetworkSpec == nil {
			return badOp(op, "no NetworkSpec")
		}
		return t.setNetPolicies(op.Name, op.NetworkSpec)
	case hns.KindEndpoint:
		return t.applyEndpoint(op)
	case hns.KindACL:
		if op.Action != hns.Update {
			break
		}
		return t.setACLs(method, op)
	}
	return badOp(op, "unsupported kind or action")
}

func badOp(op hns.Op, why string) error {
	return fmt.Errorf("hnsmem: invalid op %q: %s", op.String(), why)
}

// --- networks ---

func (t *txn) applyNetwork(op hns.Op) error {
	switch op.Action {
	case hns.Delete:
		return t.deleteNetwork("hcnDeleteNetwork", op.Name)
	case hns.Create, hns.Replace:
	default:
		return badOp(op, "a network is created, deleted or replaced; its policies change with netpolicies and route ops")
	}
	if op.NetworkSpec == nil {
		return badOp(op, "no NetworkSpec")
	}
	spec := *op.NetworkSpec
	if spec.Name == "" {
		spec.Name = op.Name
	}
	if spec.Name != op.Name {
		return badOp(op, fmt.Sprintf("NetworkSpec names %q", spec.Name))
	}
	if op.Action == hns.Replace {
		// Replace is delete + create, one Apply (hcsshim-hns.md §3
		// "Immutability": type, subnets and VSID cannot change in place, so
		// the network is recreated). The delete respects references.
		// A rename (From) deletes the network under its old name.
		if err := t.deleteNetwork("hcnDeleteNetwork", cmp.Or(op.From, spec.Name)); err != nil {
			return err
		}
	}
	return t.createNetwork("hcnCreateNetwork", &spec, false)
}

var networkTypes = []string{
	// hcsshim-hns.md §2 network table: hcsshim's enum, plus the schema's.
	"NAT", "ICS", "Transparent", "L2Bridge", "L2Tunnel", "Overlay", "Private", "Internal", "Mirrored",
}

// createNetwork is hcnCreateNetwork. seed keeps a given ProviderAddress and
// DR MAC and never treats an existing network as the same one.
func (t *txn) createNetwork(call string, spec *hns.Network, seed bool) error {
	if spec.Name == "" {
		return herr(call, CodeInvalidNetwork, "a network needs a name")
	}
	if !slices.Contains(networkTypes, spec.Type) {
		return herr(call, CodeInvalidNetwork, "network %q: unknown type %q", spec.Name, spec.Type)
	}
	for i, s := range spec.Subnets {
		if err := checkSubnet(call, spec, i, s); err != nil {
			return err
		}
	}
	// A VxlanPort policy needs HNS ≥10.3 (hcsshim-hns.md §3 "Feature
	// checks", VxlanPortSupported).
	if spec.VXLANPort != 0 && !t.cfg.features.VxlanPort {
		return herr(call, CodeInvalidPolicyType, "network %q: this HNS does not support the VxlanPort policy", spec.Name)
	}
	for _, r := range spec.RemoteRoutes {
		if err := t.checkRoute(call, r); err != nil {
			return err
		}
	}
	if have := t.st.Network(spec.Name); have != nil {
		// Idempotence (hns.Client: "an op whose effect is already there is
		// a no-op"); any other network of that name is a conflict, as
		// HcnCreateNetwork reports it (hcsshim-hns.md §3 "Errors",
		// NETWORK_ALREADY_EXISTS).
		if !seed && sameNetwork(have, spec) {
			return nil
		}
		return herr(call, hns.CodeNetworkAlreadyExists, "a network named %q already exists", spec.Name)
	}
	n := cloneNetwork(spec)
	n.ID = t.newID(idKindNetwork)
	n.RemoteRoutes = nil
	if !seed {
		n.ProviderAddress, n.DRMAC = netip.Addr{}, ""
	}
	if n.Type == "Overlay" {
		// HNS adds ProviderAddress (the management IP) and DrMacAddress to a
		// new Overlay network by itself (hcsshim-hns.md §3 "Immutability";
		// §4 flannel polls for ProviderAddress and reads the DR MAC from
		// the HNS-generated DrMacAddress policy; calico-windows.md §3
		// reads DrMacAddress as the VXLAN tunnel MAC).
		if !n.ProviderAddress.IsValid() {
			n.ProviderAddress = t.cfg.mgmt
		}
		if n.DRMAC == "" {
			n.DRMAC = drMAC(n.Name)
		}
	}
	t.st.Networks = append(t.st.Networks, n)
	// RemoteSubnetRoute policies sent with the create are added like any
	// other (hcsshim-hns.md §2, example output: a network created with one).
	for _, r := range spec.RemoteRoutes {
		if err := t.addRoute(call, n.Name, r); err != nil {
			return err
		}
	}
	return nil
}

// drMAC is the DR MAC HNS makes up for an Overlay network: deterministic
// here, from a hash of the name, in Hyper-V's OUI 00-15-5D, upper case with
// dashes as HNS writes MACs (hcsshim-hns.md §2, MacAddress "0E-2A-…").
func drMAC(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	s := h.Sum32()
	return fmt.Sprintf("00-15-5D-%02X-%02X-%02X", byte(s>>16), byte(s>>8), byte(s))
}

// checkSubnet validates a subnet as hcsshim and HNS do: a valid prefix and
// a default route whose next hop (the gateway) is inside it. hcsshim's
// Create rejects a subnet that has a prefix but no route with a NextHop,
// or no 0.0.0.0/0 route (hcsshim-hns.md §2, last line of the network
// table notes, a client-side check in hcnnetwork.go); the model reports it
// as INVALID_NETWORK (§3 "Errors", 0x803B000A).
func checkSubnet(call string, n *hns.Network, i int, s hns.Subnet) error {
	switch {
	case !s.Prefix.IsValid():
		return herr(call, CodeInvalidNetwork, "network %q subnet %d: no address prefix", n.Name, i)
	case !s.Gateway.IsValid():
		return herr(call, CodeInvalidNetwork, "network %q subnet %s: no default route (a 0.0.0.0/0 route with a NextHop)", n.Name, s.Prefix)
	case !s.Prefix.Contains(s.Gateway):
		return herr(call, CodeInvalidNetwork, "network %q subnet %s: gateway %s is outside the subnet", n.Name, s.Prefix, s.Gateway)
	}
	for _, o := range n.Subnets[:i] {
		if o.Prefix.Overlaps(s.Prefix) {
			return herr(call, CodeInvalidNetwork, "network %q: subnets %s and %s overlap", n.Name, o.Prefix, s.Prefix)
		}
	}
	return nil
}

// sameNetwork reports whether have already is what spec asks: same
// identity and policies, and every route spec carries.
func sameNetwork(have, spec *hns.Network) bool {
	if have.Type != spec.Type || !slices.Equal(have.Subnets, spec.Subnets) || have.VXLANPort != spec.VXLANPort ||
		have.HostRoute != spec.HostRoute || have.AdapterName != spec.AdapterName || have.NonPersistent != spec.NonPersistent {
		return false
	}
	for _, r := range spec.RemoteRoutes {
		if !slices.Contains(have.RemoteRoutes, r) {
			return false
		}
	}
	return true
}

// deleteNetwork is hcnDeleteNetwork. An absent network is a no-op
// (idempotence). One with endpoints is refused with ENTITY_HAS_REFERENCES
// ("cannot be removed while it still has references", hcsshim-hns.md §3
// "Errors"), or, with RefuseDeleteWithEndpoints(false), deleted with them:
// §3 "Deleting a network that still has endpoints" leaves it unverified.
func (t *txn) deleteNetwork(call, name string) error {
	if t.st.Network(name) == nil {
		return nil
	}
	if eps := t.st.EndpointsOn(name); len(eps) > 0 && t.cfg.refuseDelete {
		return herr(call, hns.CodeEntityHasReferences, "network %q cannot be removed while it still has references (%d endpoints, e.g. %q)", name, len(eps), eps[0].Name)
	}
	t.st.Endpoints = slices.DeleteFunc(t.st.Endpoints, func(e hns.Endpoint) bool { return e.Network == name })
	t.st.Networks = slices.DeleteFunc(t.st.Networks, func(n hns.Network) bool { return n.Name == name })
	return nil
}

// setNetPolicies is hcnModifyNetwork with the HostRoute and NetAdapterName
// policies (added or removed in place: hcsshim-hns.md §3, network policies
// Add/Remove; flannel and Calico add HostRoute after creating the network,
// §4 and calico-windows.md §3). Only those two are read from spec: type,
// subnets, VSID and VxlanPort are identity (§3 "Immutability") and routes
// have ops of their own.
func (t *txn) setNetPolicies(name string, spec *hns.Network) error {
	n := t.st.Network(name)
	if n == nil {
		return herr("hcnModifyNetwork", hns.CodeNetworkNotFound, "network %q not found", name)
	}
	n.HostRoute, n.AdapterName = spec.HostRoute, spec.AdapterName
	return nil
}

// --- endpoints ---

func (t *txn) applyEndpoint(op hns.Op) error {
	if op.Action == hns.Delete {
		if op.ID != "" { // one of several of that name
			t.st.Endpoints = slices.DeleteFunc(t.st.Endpoints, func(e hns.Endpoint) bool { return e.ID == op.ID })
			return nil
		}
		t.deleteEndpoint(op.Name)
		return nil
	}
	if op.EndpointSpec == nil {
		return badOp(op, "no EndpointSpec")
	}
	spec := *op.EndpointSpec
	if spec.Name == "" {
		spec.Name = op.Name
	}
	if spec.Network == "" {
		spec.Network = op.Network
	}
	if spec.Name != op.Name || op.Network != "" && spec.Network != op.Network {
		return badOp(op, fmt.Sprintf("EndpointSpec is %q on %q", spec.Name, spec.Network))
	}
	switch op.Action {
	case hns.Create:
		return t.createEndpoint("hcnCreateEndpoint", &spec)
	case hns.Replace:
		// Replace is delete + create, one Apply; an absent endpoint is
		// just created.
		t.deleteEndpoint(spec.Name)
		return t.createEndpoint("hcnCreateEndpoint", &spec)
	case hns.Update:
		return t.updateEndpoint(&spec, op.ID)
	}
	return badOp(op, "unsupported action")
}

// createEndpoint is hcnCreateEndpoint.
func (t *txn) createEndpoint(call string, spec *hns.Endpoint) error {
	if spec.Name == "" {
		return herr(call, CodeInvalidEndpoint, "an endpoint needs a name")
	}
	// The network must exist (the plugins require it, hcsshim-hns.md §4;
	// lookups of a missing network fail with NETWORK_NOT_FOUND, §3).
	n := t.st.Network(spec.Network)
	if n == nil {
		return herr(call, hns.CodeNetworkNotFound, "network %q not found", spec.Network)
	}
	if spec.MAC != "" && !validMAC(spec.MAC) {
		// MacAddress is written "0E-2A-…" (hcsshim-hns.md §2 endpoint table).
		return herr(call, CodeInvalidEndpoint, "endpoint %q: MacAddress %q is not a MAC like 0E-2A-0A-F4-01-05", spec.Name, spec.MAC)
	}
	policies, acls := splitPolicies(spec.Policies)
	acls = append(acls, spec.ACLs...)
	if err := checkACLs(call, spec.Name, acls); err != nil {
		return err
	}
	if have := t.st.Endpoint(spec.Name); have != nil && !t.cfg.quirks.has(QuirkDuplicateEndpointNames) {
		// Idempotence: the same endpoint again is a no-op. Another one of
		// that name is refused. Real HNS keys endpoints by GUID and may
		// accept a duplicate name (calico-windows.md §5, #9142 "duplicated
		// Calico_ep HNS endpoints"; calico#4280 "plenty of same looking
		// endpoints"): the quirk duplicate-endpoint-names models that, and
		// then every create makes a new endpoint, a retried one too.
		want := *spec
		want.Policies, want.ACLs = policies, acls
		if sameEndpoint(have, &want) {
			return nil
		}
		return herr(call, CodeInvalidEndpoint, "an endpoint named %q already exists (on %q, %s)", spec.Name, have.Network, have.IP)
	}
	if err := t.checkEndpointIP(call, n, spec); err != nil {
		return err
	}
	e := cloneEndpoint(spec)
	e.ID = t.newID(idKindEndpoint)
	e.Policies = clonePolicies(policies)
	e.ACLs = hns.CanonicalACLs(acls)
	if e.MAC == "" {
		// HNS picks a MAC from the network's MacPool when none is given
		// (hcsshim-hns.md §2, MacPool; WantFromPlan: `"" lets HNS choose`).
		e.MAC = fmt.Sprintf("00-15-5D-%02X-%02X-%02X", byte(t.seq>>16), byte(t.seq>>8), byte(t.seq))
	}
	t.st.Endpoints = append(t.st.Endpoints, e)
	return nil
}

// checkEndpointIP validates an endpoint's address against its network.
func (t *txn) checkEndpointIP(call string, n *hns.Network, spec *hns.Endpoint) error {
	if !spec.IP.IsValid() {
		return herr(call, CodeInvalidIP, "endpoint %q: no IP address", spec.Name)
	}
	a := spec.IP.Addr()
	// A local endpoint's address is in one of the network's subnets and is
	// neither the subnet's network nor broadcast address (INVALID_IP,
	// hcsshim-hns.md §3 "Errors"; calico-windows.md §3 reserves .0 and the
	// last address of every block), nor its gateway, which HNS reserves
	// unless the subnet says DoNotReserveGatewayAddress (hcsshim-hns.md §2
	// Subnet Flags 1) — ADDR_INVALID_OR_RESERVED. A remote endpoint
	// (kube-proxy's, for a pod on another node; hcsshim-hns.md §4) is not
	// in the local subnets, so only its format is checked.
	if !spec.Remote {
		i := slices.IndexFunc(n.Subnets, func(s hns.Subnet) bool { return s.Prefix.Contains(a) })
		if i < 0 {
			return herr(call, CodeInvalidIP, "endpoint %q: %s is in no subnet of network %q", spec.Name, a, n.Name)
		}
		s := n.Subnets[i]
		switch {
		case a == s.Prefix.Masked().Addr() && s.Prefix.Bits() < s.Prefix.Addr().BitLen()-1:
			return herr(call, CodeInvalidIP, "endpoint %q: %s is the network address of %s", spec.Name, a, s.Prefix)
		case a.Is4() && s.Prefix.Bits() < 31 && a == broadcast(s.Prefix):
			return herr(call, CodeInvalidIP, "endpoint %q: %s is the broadcast address of %s", spec.Name, a, s.Prefix)
		case a == s.Gateway:
			return herr(call, CodeAddrInvalidOrReserved, "endpoint %q: %s is the gateway of %s, reserved by HNS", spec.Name, a, s.Prefix)
		}
	}
	// Two endpoints of a network cannot share an address (an assumption:
	// ADDR_INVALID_OR_RESERVED, hcsshim-hns.md §3 "Errors", is the
	// closest documented code), unless QuirkDuplicateEndpointIPs.
	if t.cfg.quirks.has(QuirkDuplicateEndpointIPs) || t.seeding {
		return nil
	}
	for _, o := range t.st.EndpointsOn(n.Name) {
		if o.Name != spec.Name && o.IP.Addr() == a {
			return herr(call, CodeAddrInvalidOrReserved, "endpoint %q: %s is already endpoint %q's", spec.Name, a, o.Name)
		}
	}
	return nil
}

func broadcast(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func sameEndpoint(have, want *hns.Endpoint) bool {
	return have.Network == want.Network && have.IP == want.IP && have.Remote == want.Remote &&
		have.HostAttached == want.HostAttached && (want.MAC == "" || have.MAC == want.MAC) &&
		samePolicies(have.Policies, want.Policies) &&
		slices.Equal(hns.CanonicalACLs(have.ACLs), hns.CanonicalACLs(want.ACLs))
}

// updateEndpoint is hcnModifyEndpoint with RequestType Update, which
// "replaces settings with the ones provided" (hcsshim-hns.md §3
// "RequestType values"): the endpoint's whole policy list becomes spec's
// policies and ACLs; whatever spec leaves out is gone. The request carries
// policies only, so spec's address, MAC and flags are not read.
func (t *txn) updateEndpoint(spec *hns.Endpoint, id string) error {
	const call = "hcnModifyEndpoint"
	e := t.endpoint(spec.Name, id)
	if e == nil || e.Network != spec.Network {
		return herr(call, hns.CodeEndpointNotFound, "endpoint %q not found on network %q", spec.Name, spec.Network)
	}
	policies, acls := splitPolicies(spec.Policies)
	acls = append(acls, spec.ACLs...)
	if err := checkACLs(call, spec.Name, acls); err != nil {
		return err
	}
	e.Policies, e.ACLs = clonePolicies(policies), hns.CanonicalACLs(acls)
	return nil
}

// setACLs is the ACL op: hcnModifyEndpoint with RequestType Update and the
// endpoint's full policy list, its other policies as held plus op.ACLs.
// Update replaces the whole list, so a client re-sends the non-ACL
// policies it reads at the call (hcsshim-hns.md §0 "Endpoint ACL changes
// in practice", §3: Azure NPM "Make sure other policies are applied
// first"; calico-windows.md §2: Calico re-sends the full ACL list): the
// model keeps them as they are, which is what a client that sends them
// back unchanged makes of them.
func (t *txn) setACLs(call string, op hns.Op) error {
	e := t.endpoint(op.Name, op.ID)
	if e == nil || op.Network != "" && e.Network != op.Network {
		return herr(call, hns.CodeEndpointNotFound, "endpoint %q not found on network %q", op.Name, op.Network)
	}
	if err := checkACLs(call, op.Name, op.ACLs); err != nil {
		return err
	}
	e.ACLs = hns.CanonicalACLs(slices.Clone(op.ACLs))
	return nil
}

// endpoint finds the endpoint an op acts on: by its ID when the op gives
// one (names may repeat, see DuplicateEndpointNames), else the first of
// that name, as hcn.GetEndpointByName does.
func (t *txn) endpoint(name, id string) *hns.Endpoint {
	if id == "" {
		return t.st.Endpoint(name)
	}
	for i := range t.st.Endpoints {
		if e := &t.st.Endpoints[i]; e.ID == id && e.Name == name {
			return e
		}
	}
	return nil
}

// deleteEndpoint is hcnDeleteEndpoint; an absent endpoint is a no-op.
func (t *txn) deleteEndpoint(name string) {
	t.st.Endpoints = slices.DeleteFunc(t.st.Endpoints, func(e hns.Endpoint) bool { return e.Name == name })
}

// splitPolicies separates ACL policies from the others: HNS holds one
// policy list per endpoint; hns.Endpoint keeps ACLs apart.
func splitPolicies(ps []plan.Policy) (others []plan.Policy, acls []plan.ACL) {
	for _, p := range ps {
		switch s := p.Settings.(type) {
		case plan.ACL:
			acls = append(acls, s)
		case *plan.ACL:
			acls = append(acls, *s)
		default:
			others = append(others, p)
		}
	}
	return others, acls
}
