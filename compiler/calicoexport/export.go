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
	Name string `yaml:"name"`
}

type object[S any] struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   meta   `yaml:"metadata"`
	Spec       S      `yaml:"spec"`
}

type ipamSpec struct {
	StrictAffinity   bool `yaml:"strictAffinity"`
	MaxBlocksPerHost int  `yaml:"maxBlocksPerHost,omitempty"`
}

type felixSpec struct {
	VXLANEnabled *bool `yaml:"vxlanEnabled,omitempty"`
	VXLANVNI     int   `yaml:"vxlanVNI,omitempty"`
	VXLANPort    int   `yaml:"vxlanPort,omitempty"`
	VXLANMTU     int   `yaml:"vxlanMTU,omitempty"`
	IPIPEnabled  *bool `yaml:"ipipEnabled,omitempty"`
}

type serviceCIDR struct {
	CIDR string `yaml:"cidr"`
}

type bgpSpec struct {
	NodeToNodeMeshEnabled bool          `yaml:"nodeToNodeMeshEnabled"`
	ASNumber              int64         `yaml:"asNumber"`
	ServiceClusterIPs     []serviceCIDR `yaml:"serviceClusterIPs,omitempty"`
}

// Installation: only the fields hnsplan sets.
type installationSpec struct {
	CalicoNetwork *calicoNetwork `yaml:"calicoNetwork,omitempty"`
	ServiceCIDRs  []string       `yaml:"serviceCIDRs,omitempty"`
}

type calicoNetwork struct {
	IPPools []installationPool `yaml:"ipPools"`
}

type installationPool struct {
	Name                  string `yaml:"name"`
	CIDR                  string `yaml:"cidr"`
	BlockSize             int    `yaml:"blockSize"`
	Encapsulation         string `yaml:"encapsulation"`
	NATOutgoing           string `yaml:"natOutgoing"`
	NodeSelector          string `yaml:"nodeSelector"`
	DisableNewAllocations bool   `yaml:"disableNewAllocations,omitempty"`
}

type poolSpec struct {
	CIDR         string `yaml:"cidr"`
	BlockSize    int    `yaml:"blockSize"`
	VXLANMode    string `yaml:"vxlanMode"`
	IPIPMode     string `yaml:"ipipMode"`
	NATOutgoing  bool   `yaml:"natOutgoing"`
	NodeSelector string `yaml:"nodeSelector"`
	Disabled     bool   `yaml:"disabled"`
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

// patchJSON is v as compact JSON, its keys in the YAML field order.
func patchJSON(v any) (string, error) {
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return "", err
	}
	var b strings.Builder
	if err := writeJSON(&b, &n); err != nil {
		return "", err
	}
	return b.String(), nil
}

// writeJSON writes a YAML node tree as JSON, keeping the mapping order.
func writeJSON(b *strings.Builder, n *yaml.Node) error {
	switch n.Kind {
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(n.Content[i].Value)
			b.Write(k)
			b.WriteByte(':')
			if err := writeJSON(b, n.Content[i+1]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, c); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return err
		}
		j, err := json.Marshal(v)
		if err != nil {
			return err
		}
		// A shell single-quoted string cannot hold a quote: escape it in JSON.
		b.WriteString(strings.ReplaceAll(string(j), "'", `\u0027`))
	default:
		return fmt.Errorf("cannot write YAML node kind %d as JSON", n.Kind)
	}
	return nil
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
