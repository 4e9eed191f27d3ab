package check

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/selector"
	"github.com/hnsplan/hnsplan/compiler/topology"
)

// calico checks Calico's own settings against each other: a pool's
// encapsulation against its modes, a disabled pool aimed at Windows nodes,
// NAT exceptions without NAT, VXLAN turned off in Felix; and, with an
// inventory, the intent against the live Calico configuration.
func calico(x *checker) {
	for i := range x.c.Pools {
		poolModes(x, &x.c.Pools[i])
	}
	if x.hasWindows() {
		disabledPools(x)
		natWithoutNAT(x)
		if e := x.c.Felix.VXLANEnabled; e != nil && !*e && x.vxlanInUse() {
			x.reportRel("felix-vxlan-disabled", "", []any{"felix", "vxlanEnabled"}, x.vxlanWhere(),
				"Felix has vxlanEnabled false, but the Windows nodes network with VXLAN (%s): Felix would program no VXLAN routes, while a compile gives each Windows node an Overlay network; set vxlanEnabled true, or leave it out", x.vxlanWhy())
		}
	}
	drift(x)
}

// vxlanWhy says why VXLAN is in use, for messages.
func (x *checker) vxlanWhy() string {
	switch x.c.Networking {
	case intent.CalicoVXLAN, intent.FlannelVXLAN:
		return "networking " + string(x.c.Networking)
	}
	var pools []string
	for _, p := range x.WindowsPools {
		if p.Encapsulation == "VXLAN" {
			pools = append(pools, p.Name)
		}
	}
	return "VXLAN pools " + strings.Join(pools, ", ")
}

// poolModes reports an encapsulation its vxlanMode or ipipMode contradicts:
// Calico encapsulates by the modes alone, hnsplan compiles by the
// encapsulation, so the two would disagree about the pool's traffic.
func poolModes(x *checker, p *intent.Pool) {
	on := func(m string) bool { return m != "" && m != "Never" }
	report := func(field, mode, calicoDoes string) {
		x.reportRel("pool-encapsulation-mode", "", []any{"pools", p.Name, field},
			[]diag.Related{x.rel([]any{"pools", p.Name, "encapsulation"}, "encapsulation %s", p.Encapsulation)},
			"pool %q has encapsulation %s but %s %s: Calico %s, while a compile builds %s for it; make them agree (encapsulation \"VXLAN\" with vxlanMode Always, \"IPIP\" with ipipMode Always, \"None\" with both Never)",
			p.Name, p.Encapsulation, field, mode, calicoDoes, compiledAs(p.Encapsulation))
	}
	switch p.Encapsulation {
	case "VXLAN":
		if p.VXLANMode == "Never" {
			report("vxlanMode", p.VXLANMode, calicoMode(p))
		}
		if on(p.IPIPMode) {
			report("ipipMode", p.IPIPMode, "encapsulates it with IPIP")
		}
	case "IPIP":
		if p.IPIPMode == "Never" {
			report("ipipMode", p.IPIPMode, calicoMode(p))
		}
		if on(p.VXLANMode) {
			report("vxlanMode", p.VXLANMode, "encapsulates it with VXLAN")
		}
	case "None":
		if on(p.VXLANMode) {
			report("vxlanMode", p.VXLANMode, "encapsulates it with VXLAN")
		}
		if on(p.IPIPMode) {
			report("ipipMode", p.IPIPMode, "encapsulates it with IPIP")
		}
	}
}

// calicoMode says what Calico does with a pool by its modes alone.
func calicoMode(p *intent.Pool) string {
	switch {
	case p.VXLANMode != "" && p.VXLANMode != "Never":
		return "encapsulates it with VXLAN"
	case p.IPIPMode != "" && p.IPIPMode != "Never":
		return "encapsulates it with IPIP"
	}
	return "leaves its traffic unencapsulated"
}

func compiledAs(enc string) string {
	switch enc {
	case "VXLAN":
		return "an Overlay (VXLAN) HNS network"
	case "None":
		return "an L2Bridge HNS network"
	}
	return "nothing Windows supports (IPIP)"
}

// disabledPools reports a disabled pool whose own nodeSelector aims it at
// Windows nodes: Calico assigns nothing from a disabled pool, so the
// selector says one thing and disabled another. A retired pool left on the
// default all() selects everything and is no contradiction.
func disabledPools(x *checker) {
	for i := range x.c.Pools {
		p := &x.c.Pools[i]
		if !p.Disabled || strings.TrimSpace(p.NodeSelector) == "all()" {
			continue
		}
		sel, err := selector.Parse(p.NodeSelector)
		if err != nil {
			continue // reported as a schema error
		}
		var win []*intent.Node
		for _, n := range x.Windows {
			if sel.Evaluate(x.Labels[n.Name]) {
				win = append(win, n)
			}
		}
		if len(win) > 0 {
			x.reportRel("disabled-pool-windows", "", []any{"pools", p.Name, "disabled"},
				[]diag.Related{x.rel([]any{"pools", p.Name, "nodeSelector"}, "nodeSelector %q", p.NodeSelector)},
				"pool %q is disabled, but its nodeSelector %q selects Windows nodes (%s): Calico assigns no address from a disabled pool and a compile gives those nodes no block of it; enable the pool, or narrow its nodeSelector so it selects no Windows node",
				p.Name, p.NodeSelector, names(win))
		}
	}
}

// natWithoutNAT reports NAT exceptions asked for where no Windows pod is
// NATed: exceptions exist only in an OutBoundNAT policy, which a Windows
// endpoint gets only from a natOutgoing pool.
func natWithoutNAT(x *checker) {
	if len(x.c.Windows.NATExceptions) == 0 {
		return
	}
	var pools []diag.Related // the Windows pools without natOutgoing
	if !x.usesPodCIDR() {
		for _, p := range x.WindowsPools {
			pools = append(pools, x.rel([]any{"pools", p.Name, "natOutgoing"}, "pool %q: natOutgoing false", p.Name))
		}
	}
	for _, n := range x.Windows {
		natOut := slices.ContainsFunc(x.PoolsOf[n.Name], func(p *topology.Pool) bool { return p.NATOutgoing })
		if x.usesPodCIDR() {
			natOut = x.PodCIDRNATOutgoing(n)
		}
		if natOut {
			return
		}
	}
	x.reportRel("nat-exceptions-without-nat", "", []any{"windows", "natExceptions"}, pools,
		"windows.natExceptions lists %s, but no pool of a Windows node has natOutgoing: a compile gives Windows pods no OutBoundNAT policy, so there is nothing to except; set natOutgoing true on the Windows pools, or remove natExceptions",
		prefixes(x.c.Windows.NATExceptions))
}

// driftf reports a live value that contradicts the intent's, at the
// intent's position, naming both and what a compile does; the live
// value's position is related.
func (x *checker) driftf(at []any, what string, intentVal, liveVal any, live diag.Pos) {
	x.reportRel("calico-config-drift", "", at, []diag.Related{diag.At(live, "the live cluster: %v", show(liveVal))},
		"%s: the intent has %v, the live cluster %v (%s); a compile plans with the intent's %v, and the cluster keeps %v until the intent's Calico resources are applied (`hnsplan export calico`, by server-side apply or its --as patch script, which leave the fields it does not hold); or change the intent to match",
		what, show(intentVal), show(liveVal), live, show(intentVal), show(liveVal))
}

func show(v any) any {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return v
}

// poolDrift reports each field of the intent's pool p the live pool l
// contradicts; where gives the live value's position by the field's name
// (cidr, blockSize, encapsulation, natOutgoing, nodeSelector, disabled).
func poolDrift(x *checker, p *intent.Pool, l intent.Pool, where func(field string) diag.Pos) {
	what := fmt.Sprintf("pool %q ", p.Name)
	at := func(f string) []any { return []any{"pools", p.Name, f} }
	if p.CIDR != l.CIDR {
		x.driftf(at("cidr"), what+"cidr", p.CIDR, l.CIDR, where("cidr"))
	}
	if p.BlockSize != l.BlockSize {
		x.driftf(at("blockSize"), what+"blockSize", p.BlockSize, l.BlockSize, where("blockSize"))
	}
	if p.Encapsulation != l.Encapsulation {
		x.driftf(at("encapsulation"), what+"encapsulation", p.Encapsulation, l.Encapsulation, where("encapsulation"))
	}
	if p.NATOutgoing != l.NATOutgoing {
		x.driftf(at("natOutgoing"), what+"natOutgoing", p.NATOutgoing, l.NATOutgoing, where("natOutgoing"))
	}
	if p.NodeSelector != l.NodeSelector {
		x.driftf(at("nodeSelector"), what+"nodeSelector", p.NodeSelector, l.NodeSelector, where("nodeSelector"))
	}
	if p.Disabled != l.Disabled {
		x.driftf(at("disabled"), what+"disabled", p.Disabled, l.Disabled, where("disabled"))
	}
}

// installationDrift compares the intent with the live operator
// Installation "default": the pools it lists (those of the intent that
// came from its Installation, and every pool the live one has), and its
// service CIDRs.
func installationDrift(x *checker, l *intent.Installation) {
	fromIntent := map[string]bool{}
	for _, r := range x.in.Manifests.Calico.Installations {
		for _, p := range r.Pools() {
			fromIntent[p.Name] = true
		}
	}
	var live []intent.Pool
	for i := range l.Spec.CalicoNetwork.GetIPPools() {
		lp, ok := l.PoolAt(i)
		if !ok {
			continue
		}
		live = append(live, lp)
		k := slices.IndexFunc(x.c.Pools, func(p intent.Pool) bool { return p.Name == lp.Name })
		if k < 0 {
			if !lp.Disabled {
				x.reportRel("calico-config-drift", "", []any{"pools"}, []diag.Related{diag.At(l.PosOf(intent.PoolPath(i)...), "the live Installation's pool %q", lp.Name)},
					"the live Installation's pool %q (%s) is not in the intent: the operator keeps it and Calico assigns from it, while a compile gives no Windows node a block of it; add it to the intent's Installation, or remove it from the cluster's", lp.Name, lp.CIDR)
			}
			continue
		}
		poolDrift(x, &x.c.Pools[k], lp, func(f string) diag.Pos { return l.PosOf(intent.PoolFieldPath(i, f)...) })
	}
	for _, p := range x.c.Pools {
		if fromIntent[p.Name] && !slices.ContainsFunc(live, func(lp intent.Pool) bool { return lp.Name == p.Name }) && !p.Disabled {
			x.reportRel("calico-config-drift", "", []any{"pools", p.Name}, []diag.Related{diag.At(l.Source.Pos, "the live Installation")},
				"pool %q of the intent's Installation is not in the live Installation (%s): the operator creates it only once the Installation is applied (`hnsplan export calico`), and a compile plans blocks of it Calico does not assign until then", p.Name, l.Source.Pos)
		}
	}
	if svc := l.ServiceCIDRs(); len(svc) > 0 && fmt.Sprint(svc) != fmt.Sprint(x.c.ServiceCIDRs) {
		x.driftf([]any{"serviceCIDRs"}, "service CIDRs", x.c.ServiceCIDRs, svc, l.PosOf("spec", "serviceCIDRs"))
	}
}

// drift compares the intent with the live Calico configuration of the
// inventory. A kind the inventory has no object of is not compared: the
// inventory then did not include it.
func drift(x *checker) {
	live := &x.in.Inventory.Calico
	if len(live.IPPools) > 0 {
		byName := map[string]*intent.IPPool{}
		for i := range live.IPPools {
			if _, ok := byName[live.IPPools[i].Name]; !ok {
				byName[live.IPPools[i].Name] = &live.IPPools[i]
			}
		}
		for i := range x.c.Pools {
			p := &x.c.Pools[i]
			lp, ok := byName[p.Name]
			if !ok {
				if !p.Disabled {
					x.report("calico-config-drift", "", []any{"pools", p.Name},
						"pool %q is not in the live cluster (the inventory lists IPPools %s): a compile plans blocks of it that Calico does not assign until the pool is applied (`hnsplan export calico`)", p.Name, livePoolNames(live))
				}
				continue
			}
			poolDrift(x, p, lp.Pool(), func(f string) diag.Pos {
				if f == "encapsulation" {
					f = "vxlanMode"
					if l := lp.Pool(); l.Encapsulation == "IPIP" || p.Encapsulation == "IPIP" {
						f = "ipipMode"
					}
				}
				return lp.PosOf("spec", f)
			})
		}
		for _, lp := range live.IPPools {
			l := lp.Pool()
			if !slices.ContainsFunc(x.c.Pools, func(p intent.Pool) bool { return p.Name == lp.Name }) && !l.Disabled {
				x.reportRel("calico-config-drift", "", []any{"pools"}, []diag.Related{diag.At(lp.Source.Pos, "the live IPPool %q", lp.Name)},
					"the live IPPool %q (%s, %s) is not in the intent: a compile gives no Windows node a block of it, while Calico assigns from it; add it to the intent, or disable or delete it in the cluster", lp.Name, l.CIDR, lp.Source.Pos)
			}
		}
	}
	for _, l := range live.IPAMConfigs {
		if l.Name != "default" {
			continue
		}
		if v := derefBool(l.Spec.StrictAffinity); v != x.c.IPAM.StrictAffinity {
			x.driftf([]any{"ipam", "strictAffinity"}, "ipam strictAffinity", x.c.IPAM.StrictAffinity, v, l.Source.PosOf("spec", "strictAffinity"))
		}
		if v := derefInt(l.Spec.MaxBlocksPerHost, 0); v != x.c.IPAM.MaxBlocksPerHost {
			x.driftf([]any{"ipam", "maxBlocksPerHost"}, "ipam maxBlocksPerHost", x.c.IPAM.MaxBlocksPerHost, v, l.Source.PosOf("spec", "maxBlocksPerHost"))
		}
	}
	for i := range live.Installations {
		if l := &live.Installations[i]; l.Name == "default" {
			installationDrift(x, l)
		}
	}
	vni, port := x.vxlanParams()
	for _, l := range live.FelixConfigs {
		if l.Name != "default" {
			continue
		}
		at := func(f string) diag.Pos { return l.Source.PosOf("spec", f) }
		if v := derefInt(l.Spec.VXLANVNI, intent.DefaultVXLANVNI); v != vni {
			x.driftf([]any{"vxlan", "vni"}, "VXLAN VNI", vni, v, at("vxlanVNI"))
		}
		if v := derefInt(l.Spec.VXLANPort, intent.DefaultVXLANPort); v != port {
			x.driftf([]any{"vxlan", "port"}, "VXLAN port", port, v, at("vxlanPort"))
		}
		if v, w := l.Spec.VXLANEnabled, x.c.Felix.VXLANEnabled; v != nil && w != nil && *v != *w {
			x.driftf([]any{"felix", "vxlanEnabled"}, "felix vxlanEnabled", *w, *v, at("vxlanEnabled"))
		}
		if v, w := l.Spec.IPIPEnabled, x.c.Felix.IPIPEnabled; v != nil && w != nil && *v != *w {
			x.driftf([]any{"felix", "ipipEnabled"}, "felix ipipEnabled", *w, *v, at("ipipEnabled"))
		}
	}
	for _, l := range live.BGPConfigs {
		if l.Name != "default" || x.c.BGP == nil {
			continue
		}
		at := func(f string) diag.Pos { return l.Source.PosOf("spec", f) }
		if v := l.Spec.NodeToNodeMeshEnabled == nil || *l.Spec.NodeToNodeMeshEnabled; v != x.c.BGP.NodeToNodeMesh {
			x.driftf([]any{"bgp", "nodeToNodeMesh"}, "BGP nodeToNodeMesh", x.c.BGP.NodeToNodeMesh, v, at("nodeToNodeMeshEnabled"))
		}
		asn := int64(intent.DefaultASNumber)
		if l.Spec.ASNumber != nil {
			asn = *l.Spec.ASNumber
		}
		if asn != x.c.BGP.ASNumber {
			x.driftf([]any{"bgp", "asNumber"}, "BGP asNumber", x.c.BGP.ASNumber, asn, at("asNumber"))
		}
	}
}

func livePoolNames(live *intent.CalicoConfig) string {
	return shortList(live.IPPools, 5, func(p intent.IPPool) string { return p.Name })
}

func derefBool(p *bool) bool {
	return p != nil && *p
}

func derefInt(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}
