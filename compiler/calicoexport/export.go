// Package calicoexport writes the Calico resources that match an intent:
// its IPPools, the IPAMConfiguration, the FelixConfiguration and (with a
// bgp section) the BGPConfiguration, as projectcalico.org/v3 YAML. Each
// holds only hnsplan's settings, so it is applied so that it sets them and
// leaves every other field as it is: by server-side apply with the field
// manager hnsplan (the default form, whose header says so), or by merge
// patches (Patch) — never by a replace (calicoctl apply), which would drop
// every field the export does not hold. With the tigera-operator
// (operatorManaged), the pools are the operator's: the export writes them,
// with the service CIDRs, into its Installation, and no IPPool, which the
// operator would revert. The intent stays the single source of truth: the
// resources, added to the intent directory, agree with it setting for
// setting.
package calicoexport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hnsplan/hnsplan/compiler/intent"
)

// FileName is the file `hnsplan export calico -o DIR` writes in DIR, and
// PatchFileName the one it writes with --as patch.
const (
	FileName      = "calico.yaml"
	PatchFileName = "calico-patch.sh"
)

type meta struct {
	Name string `json:"name" yaml:"name"`
}

type object[S any] struct {
	APIVersion string `json:"apiVersion" yaml:"apiVersion"`
	Kind       string `json:"kind" yaml:"kind"`
	Metadata   meta   `json:"metadata" yaml:"metadata"`
	Spec       S      `json:"spec" yaml:"spec"`
}

type ipamSpec struct {
	StrictAffinity   bool `json:"strictAffinity" yaml:"strictAffinity"`
	MaxBlocksPerHost int  `json:"maxBlocksPerHost,omitempty" yaml:"maxBlocksPerHost,omitempty"`
}

type felixSpec struct {
	VXLANEnabled *bool `json:"vxlanEnabled,omitempty" yaml:"vxlanEnabled,omitempty"`
	VXLANVNI     int   `json:"vxlanVNI,omitempty" yaml:"vxlanVNI,omitempty"`
	VXLANPort    int   `json:"vxlanPort,omitempty" yaml:"vxlanPort,omitempty"`
	VXLANMTU     int   `json:"vxlanMTU,omitempty" yaml:"vxlanMTU,omitempty"`
	IPIPEnabled  *bool `json:"ipipEnabled,omitempty" yaml:"ipipEnabled,omitempty"`
}

type serviceCIDR struct {
	CIDR string `json:"cidr" yaml:"cidr"`
}

type bgpSpec struct {
	NodeToNodeMeshEnabled bool          `json:"nodeToNodeMeshEnabled" yaml:"nodeToNodeMeshEnabled"`
	ASNumber              int64         `json:"asNumber" yaml:"asNumber"`
	ServiceClusterIPs     []serviceCIDR `json:"serviceClusterIPs,omitempty" yaml:"serviceClusterIPs,omitempty"`
}

// Installation: only the fields hnsplan sets.
type installationSpec struct {
	CalicoNetwork *calicoNetwork `json:"calicoNetwork,omitempty" yaml:"calicoNetwork,omitempty"`
	ServiceCIDRs  []string       `json:"serviceCIDRs,omitempty" yaml:"serviceCIDRs,omitempty"`
}

type calicoNetwork struct {
	IPPools []installationPool `json:"ipPools" yaml:"ipPools"`
}

type installationPool struct {
	Name                  string `json:"name" yaml:"name"`
	CIDR                  string `json:"cidr" yaml:"cidr"`
	BlockSize             int    `json:"blockSize" yaml:"blockSize"`
	Encapsulation         string `json:"encapsulation" yaml:"encapsulation"`
	NATOutgoing           string `json:"natOutgoing" yaml:"natOutgoing"`
	NodeSelector          string `json:"nodeSelector" yaml:"nodeSelector"`
	DisableNewAllocations bool   `json:"disableNewAllocations,omitempty" yaml:"disableNewAllocations,omitempty"`
}

type poolSpec struct {
	CIDR         string `json:"cidr" yaml:"cidr"`
	BlockSize    int    `json:"blockSize" yaml:"blockSize"`
	VXLANMode    string `json:"vxlanMode" yaml:"vxlanMode"`
	IPIPMode     string `json:"ipipMode" yaml:"ipipMode"`
	NATOutgoing  bool   `json:"natOutgoing" yaml:"natOutgoing"`
	NodeSelector string `json:"nodeSelector" yaml:"nodeSelector"`
	Disabled     bool   `json:"disabled" yaml:"disabled"`
}

const apiVersion = "projectcalico.org/v3"

// Form is how the export is to be applied.
type Form int

const (
	// Apply is YAML for server-side apply with the field manager hnsplan:
	// kubectl apply --server-side --field-manager=hnsplan -f FILE.
	Apply Form = iota
	// Patch is a shell script of merge patches, one per resource
	// (kubectl patch --type merge), creating the IPPools that are missing.
	Patch
)

// FieldManager is the field manager the export's server-side apply names.
const FieldManager = "hnsplan"

// doc is one exported resource.
type doc struct {
	kind     string
	resource string // kubectl's plural.group
	name     string
	obj      any  // the whole object, for YAML
	spec     any  // its spec, for a merge patch
	create   bool // may not exist yet: created, not patched
}

// Export returns the Calico resources of c in the given form: the
// IPAMConfiguration, the FelixConfiguration, the BGPConfiguration if c has
// BGP settings, then the IPPools by name; with the operator (c is
// operatorManaged), the Installation's pools and service CIDRs instead of
// the IPPools. The output depends on c and form only. c must have loaded
// without error: a pool whose encapsulation its modes contradict is
// exported by its modes' words.
func Export(c *intent.Cluster, form Form) ([]byte, error) {
	var docs []doc
	ipam := ipamSpec{StrictAffinity: c.IPAM.StrictAffinity, MaxBlocksPerHost: c.IPAM.MaxBlocksPerHost}
	docs = append(docs, doc{"IPAMConfiguration", "ipamconfigurations.projectcalico.org", "default", object[ipamSpec]{apiVersion, "IPAMConfiguration", meta{"default"}, ipam}, ipam, false})

	var felix felixSpec
	if usesVXLAN(c) || c.VXLAN != nil {
		felix.VXLANVNI, felix.VXLANPort = intent.DefaultVXLANVNI, intent.DefaultVXLANPort
		if c.VXLAN != nil {
			felix.VXLANVNI, felix.VXLANPort, felix.VXLANMTU = c.VXLAN.VNI, c.VXLAN.Port, c.VXLAN.MTU
		}
	}
	felix.VXLANEnabled, felix.IPIPEnabled = c.Felix.VXLANEnabled, c.Felix.IPIPEnabled
	docs = append(docs, doc{"FelixConfiguration", "felixconfigurations.projectcalico.org", "default", object[felixSpec]{apiVersion, "FelixConfiguration", meta{"default"}, felix}, felix, false})

	if b := c.BGP; b != nil {
		spec := bgpSpec{NodeToNodeMeshEnabled: b.NodeToNodeMesh, ASNumber: b.ASNumber}
		for _, p := range b.ServiceClusterIPs {
			spec.ServiceClusterIPs = append(spec.ServiceClusterIPs, serviceCIDR{p.String()})
		}
		docs = append(docs, doc{"BGPConfiguration", "bgpconfigurations.projectcalico.org", "default", object[bgpSpec]{apiVersion, "BGPConfiguration", meta{"default"}, spec}, spec, false})
	}

	pools := slices.Clone(c.Pools)
	slices.SortFunc(pools, func(a, b intent.Pool) int { return strings.Compare(a.Name, b.Name) })
	if c.OperatorManaged {
		spec := installationSpec{}
		if len(pools) > 0 {
			spec.CalicoNetwork = &calicoNetwork{}
		}
		for _, p := range pools {
			nat := "Disabled"
			if p.NATOutgoing {
				nat = "Enabled"
			}
			spec.CalicoNetwork.IPPools = append(spec.CalicoNetwork.IPPools, installationPool{Name: p.Name, CIDR: p.CIDR.String(),
				BlockSize: p.BlockSize, Encapsulation: encapsulation(p), NATOutgoing: nat, NodeSelector: p.NodeSelector, DisableNewAllocations: p.Disabled})
		}
		for _, s := range c.ServiceCIDRs {
			spec.ServiceCIDRs = append(spec.ServiceCIDRs, s.String())
		}
		docs = append(docs, doc{"Installation", "installations.operator.tigera.io", "default", object[installationSpec]{"operator.tigera.io/v1", "Installation", meta{"default"}, spec}, spec, false})
	} else {
		for _, p := range pools {
			spec := poolSpec{CIDR: p.CIDR.String(), BlockSize: p.BlockSize,
				VXLANMode: mode(p.VXLANMode, p.Encapsulation == "VXLAN"), IPIPMode: mode(p.IPIPMode, p.Encapsulation == "IPIP"),
				NATOutgoing: p.NATOutgoing, NodeSelector: p.NodeSelector, Disabled: p.Disabled}
			docs = append(docs, doc{"IPPool", "ippools.projectcalico.org", p.Name, object[poolSpec]{apiVersion, "IPPool", meta{p.Name}, spec}, spec, true})
		}
	}
	if form == Patch {
		return patchScript(c, docs)
	}
	return applyYAML(c, docs)
}

// applyYAML writes docs as YAML for server-side apply.
func applyYAML(c *intent.Cluster, docs []doc) ([]byte, error) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# The Calico resources of cluster %q, written by `hnsplan export calico` from its\n", c.Name)
	buf.WriteString("# intent. Each holds hnsplan's settings only: apply it so that it sets them and\n")
	buf.WriteString("# leaves every other field (and other managers' fields) as it is, by server-side apply:\n")
	buf.WriteString("#   kubectl apply --server-side --field-manager=" + FieldManager + " -f FILE\n")
	buf.WriteString("# (add --force-conflicts to take over a field another manager set before). Do not\n")
	buf.WriteString("# apply it with `calicoctl apply` or `kubectl replace`: a replace drops every field\n")
	buf.WriteString("# this file does not hold. Without server-side apply: `hnsplan export calico --as patch`.\n")
	if c.OperatorManaged {
		buf.WriteString("# The tigera-operator manages the IP pools: they are in its Installation (which holds\n")
		buf.WriteString("# only spec.calicoNetwork.ipPools and spec.serviceCIDRs here), not as IPPools, which\n")
		buf.WriteString("# it would revert. The operator writes its defaults into the ipPools list, so the\n")
		buf.WriteString("# second apply on needs --force-conflicts; the rest of the Installation stays as it is.\n")
	} else {
		buf.WriteString("# Kept in the intent directory, they must agree with the CUE (hnsplan vet checks it).\n")
	}
	for i, d := range docs {
		if i > 0 {
			buf.WriteString("---\n")
		}
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err := enc.Encode(d.obj); err != nil {
			return nil, fmt.Errorf("export calico: %v", err)
		}
		if err := enc.Close(); err != nil {
			return nil, fmt.Errorf("export calico: %v", err)
		}
	}
	return buf.Bytes(), nil
}

// patchScript writes docs as a POSIX shell script of merge patches: each
// sets the fields it names and leaves the others (a list it names is
// replaced whole, as JSON merge patch does). An IPPool may be new: it is
// created if missing, then patched.
func patchScript(c *intent.Cluster, docs []doc) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("#!/bin/sh\n")
	fmt.Fprintf(&buf, "# The Calico settings of cluster %q, written by `hnsplan export calico --as patch`\n", c.Name)
	buf.WriteString("# from its intent, as merge patches: each sets hnsplan's fields and leaves every other\n")
	buf.WriteString("# field as it is. Run it with a kubeconfig for the cluster (the projectcalico.org\n")
	buf.WriteString("# resources need the Calico API server; with calicoctl, run the commented equivalents).\n")
	buf.WriteString("set -eu\n")
	for _, d := range docs {
		spec, err := patchJSON(d.spec)
		if err != nil {
			return nil, fmt.Errorf("export calico: %v", err)
		}
		fmt.Fprintf(&buf, "\n# %s %s\n", d.kind, d.name)
		if d.create {
			fmt.Fprintf(&buf, "kubectl get %s %s >/dev/null 2>&1 ||\n  kubectl create -f - <<'EOF'\n", d.resource, d.name)
			enc := yaml.NewEncoder(&buf)
			enc.SetIndent(2)
			if err := enc.Encode(d.obj); err != nil {
				return nil, fmt.Errorf("export calico: %v", err)
			}
			enc.Close()
			buf.WriteString("EOF\n")
		}
		if !strings.HasSuffix(d.resource, ".operator.tigera.io") {
			fmt.Fprintf(&buf, "# calicoctl patch %s %s --patch '{\"spec\":%s}'\n", strings.ToLower(d.kind), d.name, spec)
		}
		fmt.Fprintf(&buf, "kubectl patch %s %s --type merge -p '{\"spec\":%s}'\n", d.resource, d.name, spec)
	}
	return buf.Bytes(), nil
}

// patchJSON is v as compact JSON for a shell single-quoted argument: a
// quote, which such an argument cannot hold, is written \u0027.
func patchJSON(v any) (string, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // a selector's && stays readable
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.ReplaceAll(strings.TrimSuffix(b.String(), "\n"), "'", `\u0027`), nil
}

// encapsulation is a pool's encapsulation in the operator's words.
func encapsulation(p intent.Pool) string {
	cross := func(m string) string {
		if m == "CrossSubnet" {
			return "CrossSubnet"
		}
		return ""
	}
	switch p.Encapsulation {
	case "VXLAN":
		return "VXLAN" + cross(p.VXLANMode)
	case "IPIP":
		return "IPIP" + cross(p.IPIPMode)
	}
	return "None"
}

// mode is a pool's mode as written, or Always for the encapsulation in
// use and Never otherwise.
func mode(written string, on bool) string {
	switch {
	case written != "":
		return written
	case on:
		return "Always"
	}
	return "Never"
}

// usesVXLAN reports whether any pool or the networking uses VXLAN.
func usesVXLAN(c *intent.Cluster) bool {
	if c.Networking == intent.CalicoVXLAN || c.Networking == intent.FlannelVXLAN {
		return true
	}
	return slices.ContainsFunc(c.Pools, func(p intent.Pool) bool { return p.Encapsulation == "VXLAN" })
}
