package intent

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

// Calico's configuration resources in their wire form: projectcalico.org/v3
// IPPool, IPAMConfiguration, FelixConfiguration and BGPConfiguration, and
// the crd.projectcalico.org/v1 objects a Kubernetes-datastore cluster
// stores them as (IPAMConfiguration is the CRD kind IPAMConfig there). Only
// the fields hnsplan reads are modelled; in the intent directory every
// other field is held to Calico's own API (package calicoapi: valid ones
// load with an info, others are errors), and in the inventory it is
// ignored. Every optional field is a pointer, so that "not written" (the
// Calico default) and "written" stay apart.

// RuleCalicoConflict is reported when a setting is given both in CUE and in
// a Calico resource of the intent, with different values.
const RuleCalicoConflict = "calico-config-conflict"

// CalicoConfig are Calico configuration resources, each kind in the order
// of its files and documents.
type CalicoConfig struct {
	IPPools      []IPPool
	IPAMConfigs  []IPAMConfig
	FelixConfigs []FelixConfig
	BGPConfigs   []BGPConfig
	// Installations are the tigera-operator's (operator.tigera.io/v1).
	Installations []Installation
}

// Len is the number of resources in c.
func (c *CalicoConfig) Len() int {
	return len(c.IPPools) + len(c.IPAMConfigs) + len(c.FelixConfigs) + len(c.BGPConfigs) + len(c.Installations)
}

// IPPool is a Calico IPPool.
type IPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              IPPoolSpec `json:"spec"`
	Source            Source     `json:"-"`
}

// IPPoolSpec is the spec of an IPPool. CIDR is parsed by Pool.
type IPPoolSpec struct {
	CIDR             string   `json:"cidr"`
	BlockSize        *int     `json:"blockSize,omitempty"`
	VXLANMode        *string  `json:"vxlanMode,omitempty"`
	IPIPMode         *string  `json:"ipipMode,omitempty"`
	NATOutgoing      *bool    `json:"natOutgoing,omitempty"`
	Disabled         *bool    `json:"disabled,omitempty"`
	DisableBGPExport *bool    `json:"disableBGPExport,omitempty"`
	NodeSelector     *string  `json:"nodeSelector,omitempty"`
	AllowedUses      []string `json:"allowedUses,omitempty"`
	AssignmentMode   *string  `json:"assignmentMode,omitempty"`
}

// IPAMConfig is a Calico IPAMConfiguration (the CRD's IPAMConfig).
type IPAMConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              IPAMConfigSpec `json:"spec"`
	Source            Source         `json:"-"`
}

// IPAMConfigSpec is the spec of an IPAMConfiguration.
type IPAMConfigSpec struct {
	StrictAffinity     *bool `json:"strictAffinity,omitempty"`
	MaxBlocksPerHost   *int  `json:"maxBlocksPerHost,omitempty"`
	AutoAllocateBlocks *bool `json:"autoAllocateBlocks,omitempty"`
}

// FelixConfig is a Calico FelixConfiguration.
type FelixConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              FelixConfigSpec `json:"spec"`
	Source            Source          `json:"-"`
}

// FelixConfigSpec holds the FelixConfiguration fields that matter to
// Windows nodes.
type FelixConfigSpec struct {
	VXLANEnabled *bool `json:"vxlanEnabled,omitempty"`
	VXLANVNI     *int  `json:"vxlanVNI,omitempty"`
	VXLANPort    *int  `json:"vxlanPort,omitempty"`
	VXLANMTU     *int  `json:"vxlanMTU,omitempty"`
	IPIPEnabled  *bool `json:"ipipEnabled,omitempty"`
}

// BGPConfig is a Calico BGPConfiguration.
type BGPConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              BGPConfigSpec `json:"spec"`
	Source            Source        `json:"-"`
}

// BGPConfigSpec holds the BGPConfiguration fields hnsplan reads.
type BGPConfigSpec struct {
	NodeToNodeMeshEnabled  *bool         `json:"nodeToNodeMeshEnabled,omitempty"`
	ASNumber               *int64        `json:"asNumber,omitempty"`
	ServiceClusterIPs      []ServiceCIDR `json:"serviceClusterIPs,omitempty"`
	ServiceExternalIPs     []ServiceCIDR `json:"serviceExternalIPs,omitempty"`
	ServiceLoadBalancerIPs []ServiceCIDR `json:"serviceLoadBalancerIPs,omitempty"`
	ListenPort             *int          `json:"listenPort,omitempty"`
	LogSeverityScreen      *string       `json:"logSeverityScreen,omitempty"`
}

// ServiceCIDR is one advertised service range of a BGPConfiguration.
type ServiceCIDR struct {
	CIDR string `json:"cidr"`
}

// Calico's defaults for what a resource leaves out.
const (
	DefaultBlockSize4 = 26
	DefaultBlockSize6 = 122
	DefaultASNumber   = 64512
	DefaultVXLANVNI   = 4096
	DefaultVXLANPort  = 4789
)

// calicoSpecTypes are the Go types the specs of the Calico kinds decode
// into: the fields hnsplan reads.
var calicoSpecTypes = map[string]reflect.Type{
	"IPPool":             reflect.TypeFor[IPPoolSpec](),
	"IPAMConfiguration":  reflect.TypeFor[IPAMConfigSpec](),
	"FelixConfiguration": reflect.TypeFor[FelixConfigSpec](),
	"BGPConfiguration":   reflect.TypeFor[BGPConfigSpec](),
	"Installation":       reflect.TypeFor[InstallationSpec](),
}

// firstPerPosition drops the findings from index start on whose position
// an earlier one of them has.
func firstPerPosition(l diag.List, start int) diag.List {
	seen := map[diag.Pos]bool{}
	out := l[:start]
	for _, f := range l[start:] {
		if f.Pos.Line > 0 && seen[f.Pos] {
			continue
		}
		seen[f.Pos] = true
		out = append(out, f)
	}
	return out
}

// calicoKind maps "apiVersion kind" of a Calico configuration object to
// its kind in v3 terms; intent says whether the intent directory accepts it
// (the v3 form only: the CRD form is storage, not API).
func calicoKind(apiVersion, kind string) (v3kind string, inIntent, ok bool) {
	switch apiVersion {
	case "projectcalico.org/v3":
		switch kind {
		case "IPPool", "IPAMConfiguration", "FelixConfiguration", "BGPConfiguration":
			return kind, true, true
		}
	case "operator.tigera.io/v1":
		if kind == "Installation" {
			return kind, true, true
		}
	case "crd.projectcalico.org/v1":
		switch kind {
		case "IPPool", "FelixConfiguration", "BGPConfiguration":
			return kind, false, true
		case "IPAMConfig":
			return "IPAMConfiguration", false, true
		}
	}
	return "", false, false
}

// addCalico decodes one Calico configuration object into c. With strict
// (the intent), unknown fields are errors and the values are validated as
// Calico's API server would; the inventory's objects are live, so only
// what hnsplan cannot read is reported there.
func (c *CalicoConfig) addCalico(obj *yaml.Node, src Source, kind string, d *yamlDecoder) {
	if d.strict {
		// hnsplan's own reading first (the decoder's and the checks
		// below), then Calico's API for every field: a value both
		// refuse is reported once, in hnsplan's words.
		start := len(*d.errs)
		defer func() {
			// The operator may be newer than hnsplan's catalog of its
			// API: a field that catalog lacks is a warning there.
			unknown := diag.Error
			if kind == "Installation" {
				unknown = diag.Warning
			}
			checkCalicoFields(kind, obj, calicoSpecTypes[kind], unknown, d)
			*d.errs = firstPerPosition(*d.errs, start)
		}()
		lenient := *d
		lenient.unknownOK = true // the fields hnsplan does not model are Calico's API's to judge
		d = &lenient
	}
	into := func(v any) { d.decode(obj, reflect.ValueOf(v).Elem(), "") }
	switch kind {
	case "IPPool":
		var p IPPool
		into(&p)
		p.Source = src
		checkIPPool(&p, obj, d)
		c.IPPools = append(c.IPPools, p)
	case "IPAMConfiguration":
		var p IPAMConfig
		into(&p)
		p.Source = src
		if v := p.Spec.MaxBlocksPerHost; v != nil && *v < 0 {
			d.errorf(lookupNode(obj, []any{"spec", "maxBlocksPerHost"}), "spec.maxBlocksPerHost", "maxBlocksPerHost must be 0 (no limit) or more, not %d", *v)
		}
		c.IPAMConfigs = append(c.IPAMConfigs, p)
	case "FelixConfiguration":
		var p FelixConfig
		into(&p)
		p.Source = src
		checkFelix(&p, obj, d)
		c.FelixConfigs = append(c.FelixConfigs, p)
	case "BGPConfiguration":
		var p BGPConfig
		into(&p)
		p.Source = src
		if a := p.Spec.ASNumber; a != nil && (*a < 1 || *a > 1<<32-1) {
			d.errorf(lookupNode(obj, []any{"spec", "asNumber"}), "spec.asNumber", "asNumber %d is not a 32-bit AS number (1 to 4294967295)", *a)
		}
		for _, f := range []struct {
			name string
			l    []ServiceCIDR
		}{{"serviceClusterIPs", p.Spec.ServiceClusterIPs}, {"serviceExternalIPs", p.Spec.ServiceExternalIPs}, {"serviceLoadBalancerIPs", p.Spec.ServiceLoadBalancerIPs}} {
			for i, s := range f.l {
				if _, err := parseCIDR(s.CIDR, false); err != nil {
					d.errorf(lookupNode(obj, []any{"spec", f.name, i, "cidr"}), fmt.Sprintf("spec.%s[%d].cidr", f.name, i), "%v", err)
				}
			}
		}
		c.BGPConfigs = append(c.BGPConfigs, p)
	case "Installation":
		var p Installation
		into(&p)
		p.Source = src
		checkInstallation(&p, obj, d)
		c.Installations = append(c.Installations, p)
	}
	if d.strict && kind != "IPPool" {
		// Felix, IPAM, BGP and the operator read the configuration named
		// "default"; per-node objects (node.<name>) are not intent hnsplan
		// models.
		if n := lookupNode(obj, []any{"metadata", "name"}); n.Kind == yaml.ScalarNode && n.Value != "" && n.Value != "default" {
			d.errorf(n, "metadata.name", "%s %q is not read: hnsplan takes the cluster-wide %s named \"default\"; name it default, or keep per-node configuration out of the intent", kind, n.Value, kind)
		}
	}
}

func checkIPPool(p *IPPool, obj *yaml.Node, d *yamlDecoder) {
	at := func(path ...any) *yaml.Node { return lookupNode(obj, path) }
	if d.strict {
		if msgs := validation.IsDNS1123Subdomain(p.Name); p.Name != "" && len(msgs) > 0 {
			d.errorf(at("metadata", "name"), "metadata.name", "IPPool name %s is invalid: %s", diag.Excerpt(p.Name), strings.Join(msgs, "; "))
		}
	}
	cidr, err := parseCIDR(p.Spec.CIDR, false)
	if err != nil {
		d.errorf(at("spec", "cidr"), "spec.cidr", "%v", err)
		return
	}
	if cidr != cidr.Masked() {
		d.errs.Errorf(RuleHostBits, nodePos(d.file, at("spec", "cidr")), "spec.cidr", "%s has host bits set; write %s%s", cidr, cidr.Masked(), d.what)
	}
	if b := p.Spec.BlockSize; b != nil && (*b > cidr.Addr().BitLen() || *b < cidr.Bits()) {
		d.errorf(at("spec", "blockSize"), "spec.blockSize", "blockSize %d does not fit the pool %s: use %d to %d", *b, cidr.Masked(), cidr.Bits(), cidr.Addr().BitLen())
	}
	modes := []string{"Always", "CrossSubnet", "Never"}
	for _, m := range []struct {
		field string
		v     *string
	}{{"vxlanMode", p.Spec.VXLANMode}, {"ipipMode", p.Spec.IPIPMode}} {
		if m.v != nil && !slices.Contains(modes, *m.v) {
			d.errorf(at("spec", m.field), "spec."+m.field, "%s must be Always, CrossSubnet or Never, not %s", m.field, diag.Excerpt(*m.v))
		}
	}
	if on := func(v *string) bool { return v != nil && *v != "Never" }; on(p.Spec.VXLANMode) && on(p.Spec.IPIPMode) {
		d.errorf(at("spec", "ipipMode"), "spec.ipipMode", "an IPPool encapsulates with VXLAN or IPIP, not both: vxlanMode is %s and ipipMode %s; set one of them to Never", *p.Spec.VXLANMode, *p.Spec.IPIPMode)
	}
	if m := p.Spec.AssignmentMode; m != nil && *m != "Automatic" && *m != "Manual" {
		d.errorf(at("spec", "assignmentMode"), "spec.assignmentMode", "assignmentMode must be Automatic or Manual, not %s", diag.Excerpt(*m))
	}
}

func checkFelix(p *FelixConfig, obj *yaml.Node, d *yamlDecoder) {
	at := func(f string) *yaml.Node { return lookupNode(obj, []any{"spec", f}) }
	if v := p.Spec.VXLANVNI; v != nil && (*v < 1 || *v > 1<<24-1) {
		d.errorf(at("vxlanVNI"), "spec.vxlanVNI", "vxlanVNI %d is not a 24-bit VXLAN network identifier (1 to 16777215)", *v)
	}
	if v := p.Spec.VXLANPort; v != nil && (*v < 1 || *v > 65535) {
		d.errorf(at("vxlanPort"), "spec.vxlanPort", "vxlanPort %d is not a UDP port (1 to 65535)", *v)
	}
	if v := p.Spec.VXLANMTU; v != nil && d.strict && (*v < 576 || *v > 9216) {
		d.errorf(at("vxlanMTU"), "spec.vxlanMTU", "vxlanMTU %d must be between 576 and 9216", *v)
	}
}

// Pool is the IPPool as hnsplan's pool, Calico's defaults filled in: the
// encapsulation is VXLAN or IPIP when that mode is on, None otherwise. The
// CIDR is invalid if the spec's does not parse.
func (p *IPPool) Pool() Pool {
	cidr, _ := parseCIDR(p.Spec.CIDR, false)
	cidr = cidr.Masked()
	out := Pool{Name: p.Name, CIDR: cidr, VXLANMode: deref(p.Spec.VXLANMode, "Never"), IPIPMode: deref(p.Spec.IPIPMode, "Never"),
		NATOutgoing: deref(p.Spec.NATOutgoing, false), NodeSelector: deref(p.Spec.NodeSelector, "all()"),
		Disabled: deref(p.Spec.Disabled, false), Encapsulation: "None"}
	out.BlockSize = DefaultBlockSize4
	if cidr.IsValid() && cidr.Addr().Is6() {
		out.BlockSize = DefaultBlockSize6
	}
	out.BlockSize = deref(p.Spec.BlockSize, out.BlockSize)
	switch {
	case out.VXLANMode != "Never":
		out.Encapsulation = "VXLAN"
	case out.IPIPMode != "Never":
		out.Encapsulation = "IPIP"
	}
	if out.NodeSelector == "" {
		out.NodeSelector = "all()"
	}
	return out
}

// PosOf returns where the field at path of an IPPool is written, or the
// nearest enclosing position.
func (p *IPPool) PosOf(path ...any) diag.Pos { return p.Source.PosOf(path...) }

// Prefixes returns the CIDRs of a BGPConfiguration service list.
func Prefixes(l []ServiceCIDR) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range l {
		if p, err := parseCIDR(s.CIDR, false); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
