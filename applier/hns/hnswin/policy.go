package hnswin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// rawPolicy is an HNS policy as hcn carries it on networks and endpoints:
// a type and its settings as JSON. The portable translation works on
// rawPolicy; the Windows files copy it to and from hcn's policy types.
type rawPolicy struct {
	Type     string
	Settings json.RawMessage
}

// HNS network policy types hnswin reads but never writes.
const (
	typeDrMacAddress = "DrMacAddress" // the DR MAC HNS gives an Overlay network
	// defaultVXLANPort is the port of every Overlay network on a host
	// without the VxlanPort feature.
	defaultVXLANPort = 4789
)

// Settings of the network policies hnswin reads, in HNS's JSON. The VNI
// is read as 32 bits, as the schema has it (hcsshim's struct has 16).
type (
	remoteRouteSettings struct {
		DestinationPrefix           string
		IsolationId                 uint32
		ProviderAddress             string
		DistributedRouterMacAddress string
	}
	vxlanPortSettings    struct{ Port uint16 }
	netAdapterSettings   struct{ NetworkAdapterName string }
	providerAddrSettings struct{ ProviderAddress string }
	drMACSettings        struct{ Address string }
	vsidSettings         struct{ IsolationId uint32 }
)

// readNetPolicy records one network policy in n. Policy types the model
// does not hold are ignored.
func readNetPolicy(n *hns.Network, p rawPolicy) error {
	var err error
	switch p.Type {
	case plan.TypeVxlanPort:
		var s vxlanPortSettings
		if err = unmarshalSettings(p, &s); err == nil {
			n.VXLANPort = s.Port
		}
	case plan.TypeHostRoute:
		n.HostRoute = true
	case plan.TypeNetAdapterName:
		var s netAdapterSettings
		if err = unmarshalSettings(p, &s); err == nil {
			n.AdapterName = s.NetworkAdapterName
		}
	case plan.TypeRemoteSubnetRoute:
		var r hns.RemoteRoute
		if r, err = parseRoute(p.Settings); err == nil {
			n.RemoteRoutes = append(n.RemoteRoutes, r)
		}
	case plan.TypeProviderAddress:
		var s providerAddrSettings
		if err = unmarshalSettings(p, &s); err == nil {
			n.ProviderAddress, err = parseAddr(s.ProviderAddress)
		}
	case typeDrMacAddress:
		var s drMACSettings
		if err = unmarshalSettings(p, &s); err == nil {
			n.DRMAC = readMAC(s.Address)
		}
	}
	if err != nil {
		return fmt.Errorf("network %q: %s policy %s: %w", n.Name, p.Type, p.Settings, err)
	}
	return nil
}

func unmarshalSettings(p rawPolicy, v any) error {
	if len(p.Settings) == 0 {
		return nil
	}
	return json.Unmarshal(p.Settings, v)
}

// parseRoute reads the settings of a RemoteSubnetRoute policy.
func parseRoute(settings json.RawMessage) (hns.RemoteRoute, error) {
	var s remoteRouteSettings
	if err := json.Unmarshal(settings, &s); err != nil {
		return hns.RemoteRoute{}, err
	}
	prefix, err := parsePrefix(s.DestinationPrefix)
	if err != nil {
		return hns.RemoteRoute{}, err
	}
	pa, err := parseAddr(s.ProviderAddress)
	if err != nil {
		return hns.RemoteRoute{}, err
	}
	return hns.RemoteRoute{Prefix: prefix, VNI: s.IsolationId, ProviderAddress: pa, DRMAC: readMAC(s.DistributedRouterMacAddress)}, nil
}

// readSubnetVNI returns the VSID of a subnet's policies (each a whole
// {"Type","Settings"} object, as hcn.Subnet holds them, or the v1 form
// {"Type":"VSID","VSID":4096}), or 0: absent, which Diff takes for
// unknown, not for VNI 0.
func readSubnetVNI(policies []json.RawMessage) (uint32, error) {
	for _, raw := range policies {
		p, err := readPolicy(raw)
		if err != nil {
			return 0, fmt.Errorf("subnet policy: %w", err)
		}
		if p.Type != plan.TypeVSID {
			continue
		}
		var s vsidSettings
		if err := unmarshalSettings(p, &s); err != nil {
			return 0, fmt.Errorf("subnet policy %s: %w", raw, err)
		}
		return s.IsolationId, nil
	}
	return 0, nil
}

// vxlanPortPolicy says whether an Overlay network is created with a
// VxlanPort policy for port. A host without the VxlanPort feature (HNS
// before 10.3, e.g. Windows Server 2019) takes none: it always uses 4789,
// and any other port cannot be had there.
func vxlanPortPolicy(port uint16, supported bool) (bool, error) {
	switch {
	case port == 0:
		return false, nil
	case supported:
		return true, nil
	case port == defaultVXLANPort:
		return false, nil
	}
	return false, &hns.Error{Call: "VxlanPort", Code: codeRequestUnsupported,
		Msg: fmt.Sprintf("VXLAN port %d needs the VxlanPort feature (HNS 10.3); this host only has port %d", port, defaultVXLANPort)}
}

// netPolicies are the policies a network is created with: VxlanPort,
// HostRoute and NetAdapterName (RemoteSubnetRoutes are ops of their own).
func netPolicies(n *hns.Network, vxlanPortSupported bool) ([]rawPolicy, error) {
	var out []rawPolicy
	add := func(typ string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		out = append(out, rawPolicy{Type: typ, Settings: b})
		return nil
	}
	withPort, err := vxlanPortPolicy(n.VXLANPort, vxlanPortSupported)
	if err != nil {
		return nil, err
	}
	if withPort {
		if err := add(plan.TypeVxlanPort, vxlanPortSettings{Port: n.VXLANPort}); err != nil {
			return nil, err
		}
	}
	if n.HostRoute {
		if err := add(plan.TypeHostRoute, struct{}{}); err != nil {
			return nil, err
		}
	}
	if n.AdapterName != "" {
		if err := add(plan.TypeNetAdapterName, netAdapterSettings{NetworkAdapterName: n.AdapterName}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// netPolicyDelta is what turns a network's VxlanPort, HostRoute and
// NetAdapterName policies (have, as read) into want's: the policies to
// remove, exactly as read back, and those to add.
func netPolicyDelta(have []rawPolicy, want *hns.Network, vxlanPortSupported bool) (add, remove []rawPolicy, err error) {
	wantPolicies, err := netPolicies(want, vxlanPortSupported)
	if err != nil {
		return nil, nil, err
	}
	managed := map[string]bool{plan.TypeVxlanPort: true, plan.TypeHostRoute: true, plan.TypeNetAdapterName: true}
	// A policy stays if want has one of its type with the same settings.
	same := func(a, b rawPolicy) bool { return a.Type == b.Type && sameJSON(a.Settings, b.Settings) }
	for _, h := range have {
		if !managed[h.Type] {
			continue
		}
		if !containsFunc(wantPolicies, func(w rawPolicy) bool { return same(h, w) }) {
			remove = append(remove, h)
		}
	}
	for _, w := range wantPolicies {
		if !containsFunc(have, func(h rawPolicy) bool { return same(h, w) }) {
			add = append(add, w)
		}
	}
	return add, remove, nil
}

func containsFunc(ps []rawPolicy, f func(rawPolicy) bool) bool {
	for _, p := range ps {
		if f(p) {
			return true
		}
	}
	return false
}

// sameJSON reports whether two settings hold the same values, ignoring
// key order, key case and zero values ({} and {"Port":0} are the same).
func sameJSON(a, b json.RawMessage) bool {
	return subsumes(a, b) && subsumes(b, a)
}

// checkVNI16 refuses a VNI that hcsshim's RemoteSubnetRoute settings
// cannot carry: their IsolationId is 16 bits (the HNS schema's is 32).
// The compiler's rule vxlan-vni-16bit reports it earlier.
func checkVNI16(vni uint32) error {
	if vni > 0xFFFF {
		return &hns.Error{Call: "RemoteSubnetRoute", Code: hns.CodeInvalidPolicy,
			Msg: fmt.Sprintf("VNI %d does not fit the 16-bit IsolationId of hcsshim's RemoteSubnetRoute policy", vni)}
	}
	return nil
}

// routeBatch is what a batched route op sends, given the network's
// policies as read (have): to add, the routes of rs not there already; to
// remove, the RemoteSubnetRoute policies of have that are routes of rs,
// exactly as read (HNS matches a removal on the full settings). Routes
// already as wanted are left out, so a retried batch sends only what is
// left, and an empty batch is no call at all.
func routeBatch(have []rawPolicy, rs []hns.RemoteRoute, remove bool) (add []hns.RemoteRoute, drop []rawPolicy, err error) {
	held := map[hns.RemoteRoute][]rawPolicy{}
	for _, p := range have {
		if p.Type != plan.TypeRemoteSubnetRoute {
			continue
		}
		h, err := parseRoute(p.Settings)
		if err != nil {
			return nil, nil, fmt.Errorf("RemoteSubnetRoute policy %s: %w", p.Settings, err)
		}
		held[h] = append(held[h], p)
	}
	seen := map[hns.RemoteRoute]bool{}
	for _, r := range rs {
		key := r
		key.Prefix, key.DRMAC = r.Prefix.Masked(), readMAC(r.DRMAC)
		if seen[key] {
			continue // twice in one request
		}
		seen[key] = true
		switch ps := held[key]; {
		case remove:
			drop = append(drop, ps...)
		case len(ps) == 0:
			add = append(add, r)
		}
	}
	return add, drop, nil
}

// findRoutes returns the RemoteSubnetRoute policies in have that are r
// (or, if byPrefix, that merely have r's prefix), exactly as read.
func findRoutes(have []rawPolicy, r hns.RemoteRoute, byPrefix bool) ([]rawPolicy, error) {
	var out []rawPolicy
	want := r
	want.Prefix, want.DRMAC = r.Prefix.Masked(), readMAC(r.DRMAC)
	for _, p := range have {
		if p.Type != plan.TypeRemoteSubnetRoute {
			continue
		}
		h, err := parseRoute(p.Settings)
		if err != nil {
			return nil, fmt.Errorf("RemoteSubnetRoute policy %s: %w", p.Settings, err)
		}
		if h == want || byPrefix && h.Prefix == want.Prefix {
			out = append(out, p)
		}
	}
	return out, nil
}

// readEndpointPolicies splits an endpoint's policies into its ACLs and its
// other policies. An ACL is a policy of type "ACL" in any case, as the ACL
// writers (aclwrite.go) have it: what a snapshot calls the endpoint's ACLs
// is what an ACL update replaces.
func readEndpointPolicies(ps []rawPolicy) (policies []plan.Policy, acls []plan.ACL, err error) {
	for _, p := range ps {
		if isACLType(p.Type) {
			a, err := parseACL(p.Settings)
			if err != nil {
				return nil, nil, err
			}
			acls = append(acls, a)
			continue
		}
		policies = append(policies, decodePolicy(p))
	}
	return policies, acls, nil
}

// decodePolicy reads a non-ACL endpoint policy into plan's typed settings
// when plan knows the type and the typed form keeps every non-zero value
// HNS gave; otherwise into plan.Raw, so that sending it back (an ACL
// update re-sends the whole list) changes nothing.
func decodePolicy(p rawPolicy) plan.Policy {
	settings := p.Settings
	if len(bytes.TrimSpace(settings)) == 0 || string(bytes.TrimSpace(settings)) == "null" {
		settings = json.RawMessage("{}")
	}
	raw := func() plan.Policy {
		var c bytes.Buffer
		if err := json.Compact(&c, settings); err != nil {
			c.Reset()
			c.Write(settings)
		}
		return plan.Policy{Type: p.Type, Settings: plan.Raw{Type: p.Type, JSON: c.Bytes()}}
	}
	wire, err := json.Marshal(rawPolicy{Type: p.Type, Settings: settings})
	if err != nil {
		return raw()
	}
	var typed plan.Policy
	if err := json.Unmarshal(wire, &typed); err != nil {
		return raw()
	}
	if _, ok := typed.Settings.(plan.Raw); ok {
		return typed
	}
	back, err := json.Marshal(typed.Settings)
	if err != nil || !subsumes(back, settings) {
		return raw()
	}
	return typed
}

// encodePolicy renders an endpoint policy for HNS.
func encodePolicy(p plan.Policy) (rawPolicy, error) {
	if p.Type == "" {
		return rawPolicy{}, fmt.Errorf("policy without a Type")
	}
	switch s := p.Settings.(type) {
	case plan.ACL:
		b, err := marshalACL(s)
		return rawPolicy{Type: p.Type, Settings: b}, err
	case nil:
		return rawPolicy{Type: p.Type, Settings: json.RawMessage("{}")}, nil
	case plan.Raw:
		if len(s.JSON) == 0 {
			return rawPolicy{Type: p.Type, Settings: json.RawMessage("{}")}, nil
		}
		return rawPolicy{Type: p.Type, Settings: s.JSON}, nil
	}
	// plan.Policy's own encoding checks that Type and Settings agree.
	b, err := json.Marshal(p)
	if err != nil {
		return rawPolicy{}, err
	}
	var w rawPolicy
	if err := json.Unmarshal(b, &w); err != nil {
		return rawPolicy{}, err
	}
	return w, nil
}

// endpointPolicies renders an endpoint's whole policy list: its other
// policies, then one ACL policy per ACL. ACLs in policies are sent too.
func endpointPolicies(policies []plan.Policy, acls []plan.ACL) ([]rawPolicy, error) {
	out := make([]rawPolicy, 0, len(policies)+len(acls))
	for _, p := range policies {
		r, err := encodePolicy(p)
		if err != nil {
			return nil, fmt.Errorf("%s policy: %w", p.Type, err)
		}
		out = append(out, r)
	}
	for _, a := range acls {
		r, err := encodePolicy(plan.NewPolicy(a))
		if err != nil {
			return nil, fmt.Errorf("ACL %q: %w", a.Id, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// subsumes reports whether every non-zero value of the JSON object have
// is in the JSON object got, with the same value (keys matched without
// regard to case, as encoding/json does).
func subsumes(got, have json.RawMessage) bool {
	var g, h map[string]any
	if decodeObject(got, &g) != nil || decodeObject(have, &h) != nil {
		return false
	}
	for k, hv := range h {
		if isZeroJSON(hv) {
			continue
		}
		gv, ok := g[k]
		if !ok {
			for gk, v := range g {
				if strings.EqualFold(gk, k) {
					gv, ok = v, true
					break
				}
			}
		}
		if !ok || !reflect.DeepEqual(gv, hv) {
			return false
		}
	}
	return true
}

func decodeObject(b json.RawMessage, v *map[string]any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		*v = map[string]any{}
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if *v == nil { // "null"
		*v = map[string]any{}
	}
	return nil
}

func isZeroJSON(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case bool:
		return !v
	case json.Number:
		f, err := v.Float64()
		return err == nil && f == 0
	case []any:
		return len(v) == 0
	case map[string]any:
		for _, e := range v {
			if !isZeroJSON(e) {
				return false
			}
		}
		return true
	}
	return false
}

// impliedVXLANPort fills in the port of an Overlay network read without a
// VxlanPort policy on a host without the VxlanPort feature: there every
// Overlay network uses 4789, which is what a plan asking for 4789 wants.
func impliedVXLANPort(n *hns.Network, vxlanPortSupported bool) {
	if n.Type == "Overlay" && n.VXLANPort == 0 && !vxlanPortSupported {
		n.VXLANPort = defaultVXLANPort
	}
}
