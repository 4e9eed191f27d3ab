package intent

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"cuelang.org/go/cue"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

// written reports whether the user wrote the value at path (below
// `cluster`) in CUE, rather than leaving it to a default.
func (c *Cluster) written(path ...any) bool {
	if c == nil || c.src == nil || !c.src.user.Exists() {
		return false
	}
	return c.src.user.LookupPath(cue.MakePath(selectors(append([]any{"cluster"}, path...))...)).Exists()
}

// merger merges the intent's Calico resources into its cluster: each
// setting has one source. A setting written in CUE and in a resource must
// have the same value there (else a calico-config-conflict error at the
// resource, naming the CUE position); one the CUE leaves to its default
// takes the resource's value, and Cluster.Pos then answers with the
// resource's position.
type merger struct {
	c    *Cluster
	errs *diag.List
}

// set records that the setting at path came from the resource at pos.
func (m *merger) set(pos diag.Pos, path ...any) {
	if m.c.fromCalico == nil {
		m.c.fromCalico = map[string]diag.Pos{}
	}
	m.c.fromCalico[pathKey(path)] = pos
}

// one settles one setting: path below `cluster`, the resource's field and
// value (what, at pos), the CUE value, and how to take the resource's.
func one[T comparable](m *merger, res string, pos diag.Pos, field string, resVal T, path []any, cueVal T, take func()) {
	if m.c.written(path...) {
		if resVal != cueVal {
			m.errs.Add(diag.Finding{Rule: RuleCalicoConflict, Severity: diag.Error, Pos: pos, Path: field,
				Message: fmt.Sprintf("%s sets %s %v, but %s is %v at %s: give the setting one source (remove it from one of them, or make the two equal)",
					res, strings.TrimPrefix(field, "spec."), show(resVal), cuePath(path), show(cueVal), m.c.Pos(path...)),
			}.Relate(diag.At(m.c.Pos(path...), "%s is %v", cuePath(path), show(cueVal))))
		}
		return
	}
	take()
	m.set(pos, path...)
}

func show(v any) any {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return v
}

// mergeCalico merges cfg into c (see merger). Each kind but IPPool is one
// object, "default"; a second is an error.
func mergeCalico(c *Cluster, cfg *CalicoConfig, errs *diag.List) {
	m := &merger{c: c, errs: errs}
	seen := map[string]diag.Pos{}
	dup := func(kind, name string, src Source) bool {
		key := kind + "/" + name
		if first, ok := seen[key]; ok {
			errs.Add(diag.Finding{Rule: RuleCalicoConflict, Severity: diag.Error, Pos: src.Pos, Path: "metadata.name",
				Message: fmt.Sprintf("%s %q is given twice: first at %s; keep one", kind, name, first),
			}.Relate(diag.At(first, "the first %s %q", kind, name)))
			return true
		}
		seen[key] = src.Pos
		return false
	}
	for i := range cfg.IPPools {
		if p := &cfg.IPPools[i]; !dup("IPPool", p.Name, p.Source) {
			m.pool(p)
		}
	}
	slices.SortFunc(c.Pools, func(a, b Pool) int { return strings.Compare(a.Name, b.Name) })
	for i := range cfg.IPAMConfigs {
		if p := &cfg.IPAMConfigs[i]; !dup("IPAMConfiguration", p.Name, p.Source) {
			m.ipam(p)
		}
	}
	for i := range cfg.FelixConfigs {
		if p := &cfg.FelixConfigs[i]; !dup("FelixConfiguration", p.Name, p.Source) {
			m.felix(p)
		}
	}
	for i := range cfg.BGPConfigs {
		if p := &cfg.BGPConfigs[i]; !dup("BGPConfiguration", p.Name, p.Source) {
			m.bgp(p)
		}
	}
	for i := range cfg.Installations {
		if p := &cfg.Installations[i]; !dup("Installation", p.Name, p.Source) {
			m.installation(p, cfg)
		}
	}
}

func (m *merger) pool(r *IPPool) {
	eff := r.Pool()
	res := fmt.Sprintf("IPPool %q", r.Name)
	at := func(f string) diag.Pos { return r.Source.PosOf("spec", f) }
	// The encapsulation is the mode that is on (else None): its position
	// is that mode's.
	encPos := at("vxlanMode")
	if eff.Encapsulation == "IPIP" {
		encPos = at("ipipMode")
	}
	i := slices.IndexFunc(m.c.Pools, func(p Pool) bool { return p.Name == r.Name })
	if i < 0 {
		m.c.Pools = append(m.c.Pools, eff)
		m.set(r.Source.Pos, "pools", r.Name)
		for f, pos := range map[string]diag.Pos{"cidr": at("cidr"), "blockSize": at("blockSize"), "vxlanMode": at("vxlanMode"), "ipipMode": at("ipipMode"),
			"natOutgoing": at("natOutgoing"), "nodeSelector": at("nodeSelector"), "disabled": at("disabled"), "encapsulation": encPos} {
			m.set(pos, "pools", r.Name, f)
		}
		return
	}
	p := &m.c.Pools[i]
	path := func(f string) []any { return []any{"pools", r.Name, f} }
	one(m, res, at("cidr"), "spec.cidr", eff.CIDR, path("cidr"), p.CIDR, func() { p.CIDR = eff.CIDR })
	one(m, res, at("blockSize"), "spec.blockSize", eff.BlockSize, path("blockSize"), p.BlockSize, func() { p.BlockSize = eff.BlockSize })
	one(m, res, encPos, "encapsulation", eff.Encapsulation, path("encapsulation"), p.Encapsulation, func() { p.Encapsulation = eff.Encapsulation })
	one(m, res, at("vxlanMode"), "spec.vxlanMode", eff.VXLANMode, path("vxlanMode"), p.VXLANMode, func() { p.VXLANMode = eff.VXLANMode })
	one(m, res, at("ipipMode"), "spec.ipipMode", eff.IPIPMode, path("ipipMode"), p.IPIPMode, func() { p.IPIPMode = eff.IPIPMode })
	one(m, res, at("natOutgoing"), "spec.natOutgoing", eff.NATOutgoing, path("natOutgoing"), p.NATOutgoing, func() { p.NATOutgoing = eff.NATOutgoing })
	one(m, res, at("nodeSelector"), "spec.nodeSelector", eff.NodeSelector, path("nodeSelector"), p.NodeSelector, func() { p.NodeSelector = eff.NodeSelector })
	one(m, res, at("disabled"), "spec.disabled", eff.Disabled, path("disabled"), p.Disabled, func() { p.Disabled = eff.Disabled })
}

func (m *merger) ipam(r *IPAMConfig) {
	res := fmt.Sprintf("IPAMConfiguration %q", r.Name)
	at := func(f string) diag.Pos { return r.Source.PosOf("spec", f) }
	ipam := &m.c.IPAM
	sa, mb := deref(r.Spec.StrictAffinity, false), deref(r.Spec.MaxBlocksPerHost, 0)
	one(m, res, at("strictAffinity"), "spec.strictAffinity", sa, []any{"ipam", "strictAffinity"}, ipam.StrictAffinity, func() { ipam.StrictAffinity = sa })
	one(m, res, at("maxBlocksPerHost"), "spec.maxBlocksPerHost", mb, []any{"ipam", "maxBlocksPerHost"}, ipam.MaxBlocksPerHost, func() { ipam.MaxBlocksPerHost = mb })
}

func (m *merger) felix(r *FelixConfig) {
	res := fmt.Sprintf("FelixConfiguration %q", r.Name)
	at := func(f string) diag.Pos { return r.Source.PosOf("spec", f) }
	s := &r.Spec
	// Felix's own defaults are the schema's (VNI 4096, port 4789): only
	// what the resource writes is a setting.
	vx := func() *VXLAN {
		if m.c.VXLAN == nil {
			m.c.VXLAN = &VXLAN{VNI: DefaultVXLANVNI, Port: DefaultVXLANPort}
		}
		return m.c.VXLAN
	}
	cur := VXLAN{VNI: DefaultVXLANVNI, Port: DefaultVXLANPort}
	if m.c.VXLAN != nil {
		cur = *m.c.VXLAN
	}
	if v := s.VXLANVNI; v != nil {
		one(m, res, at("vxlanVNI"), "spec.vxlanVNI", *v, []any{"vxlan", "vni"}, cur.VNI, func() { vx().VNI = *v })
	}
	if v := s.VXLANPort; v != nil {
		one(m, res, at("vxlanPort"), "spec.vxlanPort", *v, []any{"vxlan", "port"}, cur.Port, func() { vx().Port = *v })
	}
	if v := s.VXLANMTU; v != nil {
		one(m, res, at("vxlanMTU"), "spec.vxlanMTU", *v, []any{"vxlan", "mtu"}, cur.MTU, func() { vx().MTU = *v })
	}
	f := &m.c.Felix
	boolPtr := func(field string, v *bool, path []any, cur **bool) {
		if v == nil {
			return
		}
		var have bool
		if *cur != nil {
			have = **cur
		}
		one(m, res, at(field), "spec."+field, *v, path, have, func() { b := *v; *cur = &b })
	}
	boolPtr("ipipEnabled", s.IPIPEnabled, []any{"felix", "ipipEnabled"}, &f.IPIPEnabled)
	boolPtr("vxlanEnabled", s.VXLANEnabled, []any{"felix", "vxlanEnabled"}, &f.VXLANEnabled)
}

func (m *merger) bgp(r *BGPConfig) {
	res := fmt.Sprintf("BGPConfiguration %q", r.Name)
	at := func(f string) diag.Pos { return r.Source.PosOf("spec", f) }
	if m.c.BGP == nil {
		m.c.BGP = &BGP{NodeToNodeMesh: true, ASNumber: DefaultASNumber}
		m.set(r.Source.Pos, "bgp")
	}
	b := m.c.BGP
	mesh, asn := deref(r.Spec.NodeToNodeMeshEnabled, true), deref(r.Spec.ASNumber, DefaultASNumber)
	one(m, res, at("nodeToNodeMeshEnabled"), "spec.nodeToNodeMeshEnabled", mesh, []any{"bgp", "nodeToNodeMesh"}, b.NodeToNodeMesh, func() { b.NodeToNodeMesh = mesh })
	one(m, res, at("asNumber"), "spec.asNumber", asn, []any{"bgp", "asNumber"}, b.ASNumber, func() { b.ASNumber = asn })
	ips := Prefixes(r.Spec.ServiceClusterIPs)
	one(m, res, at("serviceClusterIPs"), "spec.serviceClusterIPs", prefixList(ips), []any{"bgp", "serviceClusterIPs"}, prefixList(b.ServiceClusterIPs), func() { b.ServiceClusterIPs = ips })
}

// pathKey is the key of a path in Cluster.fromCalico.
func pathKey(path []any) string { return fmt.Sprintf("%q", path) }

// prefixList is a comparable form of a prefix list: "[a b]".
func prefixList(ps []netip.Prefix) string { return fmt.Sprint(ps) }

// requireStrictAffinity reports a strictAffinity given neither in CUE nor
// by an IPAMConfiguration of the intent: it has no safe default. A
// cluster whose Windows network a CNI owns needs none: the CNI gives the
// Windows pods their addresses. c is the merged cluster (nil when the CUE
// did not decode).
func requireStrictAffinity(user cue.Value, src *source, cfg *CalicoConfig, c *Cluster, errs *diag.List) {
	if !user.Exists() || !user.LookupPath(cue.ParsePath("cluster")).Exists() || userPolicyOnly(user) {
		return
	}
	if c != nil && c.PolicyOnly() {
		return // the operator's Installation made it so (its provider)
	}
	for _, r := range cfg.IPAMConfigs {
		if r.Spec.StrictAffinity != nil {
			return
		}
	}
	if user.LookupPath(cue.ParsePath("cluster.ipam.strictAffinity")).Exists() {
		return
	}
	at := []cue.Selector{cue.Str("cluster"), cue.Str("ipam")}
	errs.Add(diag.Finding{Rule: RuleSchema, Severity: diag.Error, Path: "cluster.ipam.strictAffinity", Pos: src.posOf(at),
		Message: "field \"strictAffinity\" is required but not present: set cluster.ipam.strictAffinity (Windows nodes need true), or give it in a projectcalico.org/v3 IPAMConfiguration \"default\" in the intent directory"})
}

// userPolicyOnly says whether the user's own value (before the schema's
// defaults) makes a CNI the Windows network's owner, as Cluster.PolicyOnly
// does for the decoded cluster.
func userPolicyOnly(user cue.Value) bool {
	str := func(path string) string {
		s, _ := user.LookupPath(cue.ParsePath(path)).String()
		return s
	}
	owner := str("cluster.windows.networkOwner")
	if owner == "" {
		owner = defaultOwner(Networking(str("cluster.networking")), str("cluster.platform"))
	}
	return owner == OwnerCNI
}

// requirePoolCIDRs reports a CUE pool without a cidr that no IPPool of the
// intent gives one, and drops it from c (which may be nil): a pool without
// a CIDR is not a pool the rules or the compiler can reason about.
func requirePoolCIDRs(user cue.Value, src *source, cfg *CalicoConfig, c *Cluster, errs *diag.List) {
	if !user.Exists() {
		return
	}
	pools := user.LookupPath(cue.ParsePath("cluster.pools"))
	if !pools.Exists() {
		return
	}
	it, err := pools.Fields()
	if err != nil {
		return
	}
	given := map[string]bool{}
	for _, r := range cfg.IPPools {
		given[r.Name] = true
	}
	for it.Next() {
		name := it.Selector().Unquoted()
		if given[name] || it.Value().LookupPath(cue.ParsePath("cidr")).Exists() {
			continue
		}
		at := []cue.Selector{cue.Str("cluster"), cue.Str("pools"), cue.Str(name)}
		errs.Add(diag.Finding{Rule: RuleSchema, Severity: diag.Error, Path: cuePath([]any{"pools", name, "cidr"}), Pos: src.posOf(at),
			Message: fmt.Sprintf("field \"cidr\" is required but not present: set cluster.pools.%s.cidr, or give the pool as a projectcalico.org/v3 IPPool named %q in the intent directory", name, name)})
		if c != nil {
			c.Pools = slices.DeleteFunc(c.Pools, func(p Pool) bool { return p.Name == name })
		}
	}
}
