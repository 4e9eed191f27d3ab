package intent

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

// The tigera-operator's operator.tigera.io/v1 Installation "default": how
// most Calico clusters, Windows ones included, are configured. Its pools,
// service CIDRs, provider, CNI and Windows settings are settings of the
// cluster (merged with one source each, see merger.installation); in an
// inventory the live one is compared with the intent. Only the fields
// hnsplan reads are modelled; every other field of the operator's API is
// an info (package calicoapi), and a field that API does not have a
// warning, since the operator may be newer than hnsplan's catalog of it.

// Installation is the operator's Installation.
type Installation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              InstallationSpec `json:"spec"`
	Source            Source           `json:"-"`
}

// InstallationSpec holds the Installation fields hnsplan reads.
type InstallationSpec struct {
	KubernetesProvider *string                    `json:"kubernetesProvider,omitempty"`
	CNI                *InstallationCNI           `json:"cni,omitempty"`
	CalicoNetwork      *InstallationCalicoNetwork `json:"calicoNetwork,omitempty"`
	ServiceCIDRs       []string                   `json:"serviceCIDRs,omitempty"`
	WindowsNodes       *InstallationWindowsNodes  `json:"windowsNodes,omitempty"`
}

// InstallationCNI is the Installation's spec.cni.
type InstallationCNI struct {
	Type *string `json:"type,omitempty"` // Calico, AzureVNET, AmazonVPC, GKE
	IPAM *struct {
		Type *string `json:"type,omitempty"` // Calico, HostLocal, AzureVNET, AmazonVPC
	} `json:"ipam,omitempty"`
}

// InstallationCalicoNetwork is the Installation's spec.calicoNetwork.
type InstallationCalicoNetwork struct {
	BGP     *string            `json:"bgp,omitempty"` // Enabled, Disabled
	IPPools []InstallationPool `json:"ipPools,omitempty"`
}

// GetIPPools returns the pools; none if n is nil.
func (n *InstallationCalicoNetwork) GetIPPools() []InstallationPool {
	if n == nil {
		return nil
	}
	return n.IPPools
}

// InstallationPool is one of spec.calicoNetwork.ipPools: the operator
// creates (and, since it manages them, keeps) an IPPool of each.
type InstallationPool struct {
	Name             string   `json:"name,omitempty"`
	CIDR             string   `json:"cidr"`
	BlockSize        *int     `json:"blockSize,omitempty"`
	Encapsulation    *string  `json:"encapsulation,omitempty"`
	NATOutgoing      *string  `json:"natOutgoing,omitempty"` // Enabled, Disabled
	NodeSelector     *string  `json:"nodeSelector,omitempty"`
	DisableBGPExport *bool    `json:"disableBGPExport,omitempty"`
	AllowedUses      []string `json:"allowedUses,omitempty"`
	// DisableNewAllocations (newer operators) is the IPPool's disabled.
	DisableNewAllocations *bool `json:"disableNewAllocations,omitempty"`
}

// InstallationWindowsNodes is the Installation's spec.windowsNodes.
type InstallationWindowsNodes struct {
	CNIBinDir      *string `json:"cniBinDir,omitempty"`
	CNIConfigDir   *string `json:"cniConfigDir,omitempty"`
	CNILogDir      *string `json:"cniLogDir,omitempty"`
	VXLANMACPrefix *string `json:"vxlanMACPrefix,omitempty"`
	VXLANAdapter   *string `json:"vxlanAdapter,omitempty"`
}

// The operator's defaults (its core controller fills them in).
const (
	DefaultVXLANMACPrefix = "0E-2A" // Calico's VXLAN_MAC_PREFIX
)

// PosOf returns where the field at path of the Installation is written,
// or the nearest enclosing position.
func (r *Installation) PosOf(path ...any) diag.Pos { return r.Source.PosOf(path...) }

// PoolPath is the path of the Installation's pool i.
func PoolPath(i int, field ...any) []any {
	return append([]any{"spec", "calicoNetwork", "ipPools", i}, field...)
}

// Pools returns the Installation's pools as hnsplan's, with the operator's
// defaults (its IP pool controller's): the name default-ipv4-ippool
// (default-ipv6-ippool) for a pool without one; for IPv4 blockSize 26,
// natOutgoing Enabled and an encapsulation of IPIP under the Calico CNI,
// None under another; for IPv6 blockSize 122, natOutgoing Disabled and no
// encapsulation; nodeSelector all(). A pool whose CIDR does not parse is
// left out (the loader reported it).
func (r *Installation) Pools() []Pool {
	var out []Pool
	for i := range r.poolCount() {
		if p, ok := r.PoolAt(i); ok {
			out = append(out, p)
		}
	}
	return out
}

func (r *Installation) poolCount() int { return len(r.Spec.CalicoNetwork.GetIPPools()) }

// PoolAt is spec.calicoNetwork.ipPools[i] as Pools gives it; false if its
// CIDR does not parse.
func (r *Installation) PoolAt(i int) (Pool, bool) {
	ip := r.Spec.CalicoNetwork.IPPools[i]
	cidr, err := parseCIDR(ip.CIDR, false)
	if err != nil {
		return Pool{}, false
	}
	cidr = cidr.Masked()
	v6 := cidr.Addr().Is6()
	p := Pool{Name: ip.Name, CIDR: cidr, BlockSize: DefaultBlockSize4, NodeSelector: deref(ip.NodeSelector, "all()"),
		VXLANMode: "Never", IPIPMode: "Never", Encapsulation: "None", Disabled: deref(ip.DisableNewAllocations, false)}
	nat, enc := "Enabled", "IPIP"
	if r.cniType() != "Calico" {
		enc = "None"
	}
	if v6 {
		p.BlockSize, nat, enc = DefaultBlockSize6, "Disabled", "None"
	}
	if p.Name == "" {
		p.Name = map[bool]string{true: "default-ipv6-ippool", false: "default-ipv4-ippool"}[v6]
	}
	p.BlockSize = deref(ip.BlockSize, p.BlockSize)
	p.NATOutgoing = deref(ip.NATOutgoing, nat) == "Enabled"
	switch enc := deref(ip.Encapsulation, enc); enc {
	case "VXLAN", "VXLANCrossSubnet":
		p.Encapsulation, p.VXLANMode = "VXLAN", map[bool]string{true: "CrossSubnet", false: "Always"}[enc == "VXLANCrossSubnet"]
	case "IPIP", "IPIPCrossSubnet":
		p.Encapsulation, p.IPIPMode = "IPIP", map[bool]string{true: "CrossSubnet", false: "Always"}[enc == "IPIPCrossSubnet"]
	}
	return p, true
}

// PoolFieldPath is the path, in the Installation, of the field of pool i
// that gives hnsplan's pool field f (cidr, blockSize, encapsulation,
// vxlanMode, ipipMode, natOutgoing, nodeSelector, disabled).
func PoolFieldPath(i int, f string) []any {
	switch f {
	case "vxlanMode", "ipipMode":
		f = "encapsulation"
	case "disabled":
		f = "disableNewAllocations"
	}
	return PoolPath(i, f)
}

// cniType is spec.cni.type, Calico when not given.
func (r *Installation) cniType() string {
	if r.Spec.CNI == nil {
		return "Calico"
	}
	return deref(r.Spec.CNI.Type, "Calico")
}

var macPrefixRE = regexp.MustCompile(`^[0-9A-Fa-f]{2}-[0-9A-Fa-f]{2}$`)

// checkInstallation checks what the operator's schema cannot: the pools'
// CIDRs and block sizes, the service CIDRs, and that no two pools share a
// name or a CIDR.
func checkInstallation(r *Installation, obj *yaml.Node, d *yamlDecoder) {
	at := func(path ...any) *yaml.Node { return lookupNode(obj, path) }
	if cn := r.Spec.CalicoNetwork; cn != nil {
		names := map[string]int{}
		cidrs := map[netip.Prefix]int{}
		for i, ip := range cn.IPPools {
			cidr, err := parseCIDR(ip.CIDR, false)
			if err != nil {
				d.errorf(at(PoolPath(i, "cidr")...), fmt.Sprintf("spec.calicoNetwork.ipPools[%d].cidr", i), "%v", err)
				continue
			}
			if cidr != cidr.Masked() {
				d.errs.Errorf(RuleHostBits, nodePos(d.file, at(PoolPath(i, "cidr")...)), fmt.Sprintf("spec.calicoNetwork.ipPools[%d].cidr", i), "%s has host bits set; write %s%s", cidr, cidr.Masked(), d.what)
			}
			if b := ip.BlockSize; b != nil && (*b > cidr.Addr().BitLen() || *b < cidr.Bits()) {
				d.errorf(at(PoolPath(i, "blockSize")...), fmt.Sprintf("spec.calicoNetwork.ipPools[%d].blockSize", i), "blockSize %d does not fit the pool %s: use %d to %d", *b, cidr.Masked(), cidr.Bits(), cidr.Addr().BitLen())
			}
			name := ip.Name
			if name == "" {
				name = map[bool]string{true: "default-ipv6-ippool", false: "default-ipv4-ippool"}[cidr.Addr().Is6()]
			}
			if j, dup := names[name]; dup {
				d.errorf(at(PoolPath(i)...), fmt.Sprintf("spec.calicoNetwork.ipPools[%d]", i), "pool %q is given twice, here and at ipPools[%d]: give each pool its own name", name, j)
			}
			names[name] = i
			if j, dup := cidrs[cidr.Masked()]; dup {
				d.errorf(at(PoolPath(i, "cidr")...), fmt.Sprintf("spec.calicoNetwork.ipPools[%d].cidr", i), "%s is the CIDR of ipPools[%d] too: pools must not overlap", cidr.Masked(), j)
			}
			cidrs[cidr.Masked()] = i
		}
	}
	for i, s := range r.Spec.ServiceCIDRs {
		if p, err := parseCIDR(s, false); err != nil {
			d.errorf(at("spec", "serviceCIDRs", i), fmt.Sprintf("spec.serviceCIDRs[%d]", i), "%v", err)
		} else if p != p.Masked() {
			d.errs.Errorf(RuleHostBits, nodePos(d.file, at("spec", "serviceCIDRs", i)), fmt.Sprintf("spec.serviceCIDRs[%d]", i), "%s has host bits set; write %s%s", p, p.Masked(), d.what)
		}
	}
	if w := r.Spec.WindowsNodes; w != nil && w.VXLANMACPrefix != nil && !macPrefixRE.MatchString(*w.VXLANMACPrefix) {
		d.errorf(at("spec", "windowsNodes", "vxlanMACPrefix"), "spec.windowsNodes.vxlanMACPrefix", "vxlanMACPrefix %s must be two hexadecimal bytes, e.g. \"0E-2A\"", diag.Excerpt(*w.VXLANMACPrefix))
	}
}

// ServiceCIDRs returns the Installation's service CIDRs that parse.
func (r *Installation) ServiceCIDRs() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range r.Spec.ServiceCIDRs {
		if p, err := parseCIDR(s, false); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// Platform is hnsplan's platform for the Installation's
// kubernetesProvider, and whether it names one hnsplan knows.
func (r *Installation) Platform() (string, bool) {
	if r.Spec.KubernetesProvider == nil {
		return "", false
	}
	p, ok := map[string]string{"AKS": "aks", "EKS": "eks", "GKE": "gcp", "OpenShift": "openshift", "RKE2": "rke"}[*r.Spec.KubernetesProvider]
	return p, ok
}

// IPAMType is hnsplan's ipam.type for the Installation's
// spec.cni.ipam.type, and whether it gives one.
func (r *Installation) IPAMType() (string, bool) {
	if r.Spec.CNI == nil || r.Spec.CNI.IPAM == nil || r.Spec.CNI.IPAM.Type == nil {
		return "", false
	}
	t, ok := map[string]string{"Calico": "calico", "HostLocal": "host-local"}[*r.Spec.CNI.IPAM.Type]
	return t, ok
}

// installation merges the operator's Installation into the cluster. The
// pools it lists are the operator's to create and manage: a pool the CUE
// or an IPPool of the intent also gives is one error naming both places.
// The service CIDRs, the provider, the IPAM plugin and the Windows
// settings each have one source: a value the CUE writes too must be the
// same (else a calico-config-conflict error naming both). Its CNI and BGP
// must fit cluster.networking, and its presence makes the cluster
// operator-managed.
func (m *merger) installation(r *Installation, cfg *CalicoConfig) {
	c := m.c
	at := r.PosOf
	conflict := func(pos diag.Pos, field string, path []any, format string, args ...any) {
		m.errs.Add(diag.Finding{Rule: RuleCalicoConflict, Severity: diag.Error, Pos: pos, Path: field,
			Message: fmt.Sprintf(format, args...)}.Relate(diag.At(c.Pos(path...), "%s", cuePath(path))))
	}
	if c.written("operatorManaged") && !c.OperatorManaged {
		conflict(r.Source.Pos, "", []any{"operatorManaged"}, "the intent holds the operator's Installation, but cluster.operatorManaged is false at %s: set operatorManaged true (or leave it out), or remove the Installation", c.Pos("operatorManaged"))
	} else if !c.OperatorManaged {
		c.OperatorManaged = true
		m.set(r.Source.Pos, "operatorManaged")
	}

	// Pools.
	for i := range r.poolCount() {
		p, ok := r.PoolAt(i)
		if !ok {
			continue // reported by the loader
		}
		field := fmt.Sprintf("spec.calicoNetwork.ipPools[%d]", i)
		pos := at(PoolPath(i)...)
		if c.written("pools", p.Name) {
			conflict(pos, field, []any{"pools", p.Name}, "pool %q is given twice: here, in the Installation, and as cluster.pools.%s at %s; the operator creates and manages the Installation's pools, so give the pool in one place (remove cluster.pools.%[2]s, or the Installation's ipPools[%[4]d])", p.Name, p.Name, c.Pos("pools", p.Name), i)
			continue
		}
		if k := slices.IndexFunc(cfg.IPPools, func(ipp IPPool) bool { return ipp.Name == p.Name }); k >= 0 {
			other := cfg.IPPools[k].Source.Pos
			m.errs.Add(diag.Finding{Rule: RuleCalicoConflict, Severity: diag.Error, Pos: pos, Path: field,
				Message: fmt.Sprintf("pool %q is given twice: here, in the Installation, and as an IPPool at %s; the operator creates and manages the Installation's pools and would revert that IPPool, so give the pool in one place", p.Name, other),
			}.Relate(diag.At(other, "IPPool %q", p.Name)))
			continue
		}
		if k := slices.IndexFunc(c.Pools, func(q Pool) bool { return q.CIDR == p.CIDR }); k >= 0 {
			q := c.Pools[k]
			conflict(at(PoolPath(i, "cidr")...), field+".cidr", []any{"pools", q.Name, "cidr"}, "pool %q has the CIDR %s of pool %q (%s): pools must not overlap", p.Name, p.CIDR, q.Name, c.Pos("pools", q.Name, "cidr"))
			continue
		}
		c.Pools = append(c.Pools, p)
		m.set(pos, "pools", p.Name)
		for _, f := range []string{"cidr", "blockSize", "encapsulation", "vxlanMode", "ipipMode", "natOutgoing", "nodeSelector", "disabled"} {
			m.set(at(PoolFieldPath(i, f)...), "pools", p.Name, f)
		}
	}
	slices.SortFunc(c.Pools, func(a, b Pool) int { return strings.Compare(a.Name, b.Name) })

	// Settings with one source.
	res := "the Installation"
	if len(r.Spec.ServiceCIDRs) > 0 {
		svc := r.ServiceCIDRs()
		one(m, res, at("spec", "serviceCIDRs"), "spec.serviceCIDRs", prefixList(svc), []any{"serviceCIDRs"}, prefixList(c.ServiceCIDRs), func() { c.ServiceCIDRs = svc })
	}
	if p, ok := r.Platform(); ok {
		one(m, res, at("spec", "kubernetesProvider"), "spec.kubernetesProvider", p, []any{"platform"}, c.Platform, func() { c.Platform = p; c.networkDefaults() })
	}
	if t, ok := r.IPAMType(); ok {
		one(m, res, at("spec", "cni", "ipam", "type"), "spec.cni.ipam.type", t, []any{"ipam", "type"}, c.IPAM.Type, func() { c.IPAM.Type = t })
	}
	if w := r.Spec.WindowsNodes; w != nil {
		if v := w.VXLANMACPrefix; v != nil && macPrefixRE.MatchString(*v) {
			pfx := strings.ToUpper(*v)
			one(m, res, at("spec", "windowsNodes", "vxlanMACPrefix"), "spec.windowsNodes.vxlanMACPrefix", pfx, []any{"windows", "vxlanMACPrefix"}, c.Windows.VXLANMACPrefix, func() { c.Windows.VXLANMACPrefix = pfx })
		}
		if v := w.VXLANAdapter; v != nil && *v != "" {
			for i := range c.Nodes {
				n := &c.Nodes[i]
				if n.OS != "windows" {
					continue
				}
				one(m, res, at("spec", "windowsNodes", "vxlanAdapter"), "spec.windowsNodes.vxlanAdapter", *v, []any{"nodes", n.Name, "interface"}, n.Interface, func() { n.Interface = *v })
			}
		}
	}

	// What must fit the networking.
	cni := r.cniType()
	switch calicoCNI := strings.HasPrefix(string(c.Networking), "calico-"); {
	case cni == "Calico" && !calicoCNI && c.Networking != "":
		conflict(at("spec", "cni", "type"), "spec.cni.type", []any{"networking"}, "the Installation runs the Calico CNI (spec.cni.type %s), but cluster.networking is %q at %s: set networking calico-vxlan or calico-bgp, or give the Installation the CNI that networks the pods", cni, c.Networking, c.Pos("networking"))
	case cni != "Calico" && calicoCNI:
		conflict(at("spec", "cni", "type"), "spec.cni.type", []any{"networking"}, "the Installation's CNI is %s, but cluster.networking is %q at %s, Calico's own networking: set networking cloud-provider, or the Installation's spec.cni.type Calico", cni, c.Networking, c.Pos("networking"))
	}
	if cn := r.Spec.CalicoNetwork; cn != nil && deref(cn.BGP, "Enabled") == "Disabled" && c.Networking == CalicoBGP {
		conflict(at("spec", "calicoNetwork", "bgp"), "spec.calicoNetwork.bgp", []any{"networking"}, "the Installation disables BGP (spec.calicoNetwork.bgp Disabled), but cluster.networking is calico-bgp at %s, which routes by BGP: enable BGP, or set networking calico-vxlan with VXLAN pools", c.Pos("networking"))
	}
}

// requireServiceCIDRs reports a cluster with no service CIDR from the CUE
// nor from the operator's Installation.
func requireServiceCIDRs(c *Cluster, errs *diag.List) {
	if c == nil || len(c.ServiceCIDRs) > 0 || c.written("serviceCIDRs") {
		return
	}
	errs.Add(diag.Finding{Rule: RuleSchema, Severity: diag.Error, Path: "cluster.serviceCIDRs", Pos: c.Pos(),
		Message: "field \"serviceCIDRs\" is required but not present: list the cluster's service CIDRs (kube-apiserver --service-cluster-ip-range) in cluster.serviceCIDRs, e.g. [\"10.96.0.0/12\"], or give them as spec.serviceCIDRs of the operator's Installation in the intent directory"})
}
