package check

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/topology"
)

// vxlanInUse reports whether Windows nodes network with VXLAN.
func (x *checker) vxlanInUse() bool {
	switch x.c.Networking {
	case intent.CalicoVXLAN, intent.FlannelVXLAN:
		return true
	}
	return slices.ContainsFunc(x.WindowsPools, func(p *topology.Pool) bool { return p.Encapsulation == "VXLAN" })
}

// vxlanWhere returns the related positions of what makes the Windows
// nodes use VXLAN: the networking, or the VXLAN pools.
func (x *checker) vxlanWhere() []diag.Related {
	switch x.c.Networking {
	case intent.CalicoVXLAN, intent.FlannelVXLAN:
		return []diag.Related{x.rel([]any{"networking"}, "networking %s", x.c.Networking)}
	}
	var out []diag.Related
	for _, p := range x.WindowsPools {
		if p.Encapsulation == "VXLAN" {
			out = append(out, x.rel([]any{"pools", p.Name, "encapsulation"}, "pool %q: encapsulation VXLAN", p.Name))
		}
	}
	return out
}

// vxlanParams returns the VNI and port in force and where they are set.
func (x *checker) vxlanParams() (vni, port int) {
	if v := x.c.VXLAN; v != nil {
		return v.VNI, v.Port
	}
	return 4096, 4789
}

func encapsulation(x *checker) {
	if !x.hasWindows() {
		return
	}
	for _, p := range x.WindowsPools {
		switch {
		case p.Encapsulation == "IPIP":
			x.report("ipip-on-windows", "", []any{"pools", p.Name, "encapsulation"},
				"pool %q serves Windows nodes (%s) with IPIP encapsulation, which Windows does not support; use VXLAN or None", p.Name, names(p.Windows))
		case p.IPIPMode != "" && p.IPIPMode != "Never":
			x.report("ipip-on-windows", "", []any{"pools", p.Name, "ipipMode"},
				"pool %q serves Windows nodes (%s) with ipipMode %s; Windows has no IPIP, set ipipMode \"Never\"", p.Name, names(p.Windows), p.IPIPMode)
		}
		if p.VXLANMode == "CrossSubnet" {
			x.report("vxlan-cross-subnet", "", []any{"pools", p.Name, "vxlanMode"},
				"pool %q serves Windows nodes (%s) with vxlanMode CrossSubnet, which Windows does not support; use \"Always\"", p.Name, names(p.Windows))
		}
	}
	if e := x.c.Felix.IPIPEnabled; e != nil && *e {
		x.report("ipip-on-windows", "", []any{"felix", "ipipEnabled"},
			"felix.ipipEnabled is true in a cluster with Windows nodes; Windows has no IPIP")
	}

	vni, port := x.vxlanParams()
	if x.vxlanInUse() {
		if port != 4789 {
			x.report("vxlan-port", "", []any{"vxlan", "port"}, "VXLAN port %d: Windows supports VXLAN only on UDP port 4789", port)
		}
		if x.c.VXLAN != nil && x.c.VXLAN.MTU != 0 {
			x.report("vxlan-mtu-ignored", "", []any{"vxlan", "mtu"},
				"vxlan.mtu %d is ignored on Windows nodes: HNS takes the MTU from the host interface", x.c.VXLAN.MTU)
		}
		if vni > 65535 {
			x.report("vxlan-vni-16bit", "", []any{"vxlan", "vni"},
				"VNI %d does not fit the 16-bit IsolationId hcsshim sends for remote subnet routes; use a VNI from 4096 to 65535", vni)
		}
		for _, n := range x.Windows {
			if n.WindowsBuild == "" {
				continue // windows-build-unsupported reports it
			}
			if b, err := ParseBuild(n.WindowsBuild); err == nil && !vxlanCapable(b) {
				x.reportRel("vxlan-windows-build", n.Name, []any{"nodes", n.Name, "windows", "build"}, x.vxlanWhere(),
					"node %s runs build %s, which has no Calico VXLAN support: it needs 1809 (17763) or the 1903 line from build 18317", n.Name, b)
			}
		}
	}
	switch {
	case x.c.Networking == intent.FlannelVXLAN && vni != 4096:
		x.report("vxlan-vni-range", "", []any{"vxlan", "vni"}, "VNI %d: flannel on Windows works only with VNI 4096", vni)
	case x.vxlanInUse() && (vni < 4096 || vni > 16777215):
		x.report("vxlan-vni-range", "", []any{"vxlan", "vni"}, "VNI %d is out of range for Windows: use 4096 to 16777215 (Windows reserves VNIs below 4096)", vni)
	}
	if x.c.Networking == intent.CalicoVXLAN && x.c.BGP != nil && (x.c.BGP.NodeToNodeMesh || len(x.c.BGP.Peers) > 0) {
		what := "a node-to-node mesh"
		if len(x.c.BGP.Peers) > 0 {
			what = fmt.Sprintf("%d BGP peers", len(x.c.BGP.Peers))
		}
		x.reportRel("vxlan-with-bgp", "", []any{"bgp"}, []diag.Related{x.rel([]any{"networking"}, "networking %s", x.c.Networking)},
			"calico-vxlan networking with %s: Calico for Windows runs VXLAN without BGP; remove the bgp section or set nodeToNodeMesh false", what)
	}

	// Windows pools of more than one encapsulation: reported at the first
	// pool whose type differs from the first pool's.
	if len(x.WindowsPools) > 1 {
		byType := map[string][]string{}
		var order []string
		for _, p := range x.WindowsPools {
			if _, ok := byType[p.Encapsulation]; !ok {
				order = append(order, p.Encapsulation)
			}
			byType[p.Encapsulation] = append(byType[p.Encapsulation], p.Name)
		}
		if len(order) > 1 {
			var parts []string
			for _, t := range order {
				parts = append(parts, fmt.Sprintf("%s (%s)", t, strings.Join(byType[t], ", ")))
			}
			first := byType[order[1]][0]
			var others []diag.Related // the first pool of each other type
			for _, t := range append(order[:1:1], order[2:]...) {
				others = append(others, x.rel([]any{"pools", byType[t][0], "encapsulation"}, "pool %q: encapsulation %s", byType[t][0], t))
			}
			x.reportRel("mixed-pool-types", "", []any{"pools", first, "encapsulation"}, others,
				"Windows pools mix encapsulation types: %s; a Windows node has one HNS network of one type", strings.Join(parts, "; "))
		}
	}

	for _, p := range x.WindowsPools {
		if p.CIDR.Addr().Is6() && (p.Encapsulation == "VXLAN" || x.c.Networking == intent.CalicoVXLAN || x.c.Networking == intent.FlannelVXLAN) {
			x.report("ipv6-overlay", "", []any{"pools", p.Name, "cidr"},
				"IPv6 pool %s serves Windows nodes (%s) on a VXLAN overlay; Windows overlay networks are IPv4 only", p.CIDR, names(p.Windows))
		}
	}
	allV6 := len(x.c.ServiceCIDRs) > 0
	for _, s := range x.c.ServiceCIDRs {
		allV6 = allV6 && s.Addr().Is6()
	}
	for _, p := range x.Pools {
		allV6 = allV6 && p.CIDR.Addr().Is6()
	}
	if allV6 {
		x.report("ipv6-only", "", []any{"serviceCIDRs"},
			"the cluster is IPv6 only (pools and service CIDRs); Windows nodes need IPv4 (dual-stack at most)")
	}
}
