// Package calicoexport writes the Calico resources that match an intent:
// its IPPools, the IPAMConfiguration, the FelixConfiguration and (with a
// bgp section) the BGPConfiguration, as projectcalico.org/v3 YAML that
// `kubectl apply -f` (with the Calico API server) or `calicoctl apply -f`
// takes. The intent stays the single source of truth: the resources, added
// to the intent directory, agree with it setting for setting.
package calicoexport

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hnsplan/hnsplan/compiler/intent"
)

// FileName is the file `hnsplan export calico -o DIR` writes in DIR.
const FileName = "calico.yaml"

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

// Export returns the Calico resources of c as one multi-document YAML
// file: the IPAMConfiguration, the FelixConfiguration, the
// BGPConfiguration if c has BGP settings, then the IPPools by name. The
// output depends on c only. c must have loaded without error: a pool whose
// encapsulation its modes contradict is exported by its modes' words.
func Export(c *intent.Cluster) ([]byte, error) {
	var docs []any
	docs = append(docs, object[ipamSpec]{apiVersion, "IPAMConfiguration", meta{"default"},
		ipamSpec{StrictAffinity: c.IPAM.StrictAffinity, MaxBlocksPerHost: c.IPAM.MaxBlocksPerHost}})

	var felix felixSpec
	if usesVXLAN(c) || c.VXLAN != nil {
		felix.VXLANVNI, felix.VXLANPort = intent.DefaultVXLANVNI, intent.DefaultVXLANPort
		if c.VXLAN != nil {
			felix.VXLANVNI, felix.VXLANPort, felix.VXLANMTU = c.VXLAN.VNI, c.VXLAN.Port, c.VXLAN.MTU
		}
	}
	felix.VXLANEnabled, felix.IPIPEnabled = c.Felix.VXLANEnabled, c.Felix.IPIPEnabled
	docs = append(docs, object[felixSpec]{apiVersion, "FelixConfiguration", meta{"default"}, felix})

	if b := c.BGP; b != nil {
		spec := bgpSpec{NodeToNodeMeshEnabled: b.NodeToNodeMesh, ASNumber: b.ASNumber}
		for _, p := range b.ServiceClusterIPs {
			spec.ServiceClusterIPs = append(spec.ServiceClusterIPs, serviceCIDR{p.String()})
		}
		docs = append(docs, object[bgpSpec]{apiVersion, "BGPConfiguration", meta{"default"}, spec})
	}

	pools := slices.Clone(c.Pools)
	slices.SortFunc(pools, func(a, b intent.Pool) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range pools {
		docs = append(docs, object[poolSpec]{apiVersion, "IPPool", meta{p.Name}, poolSpec{
			CIDR: p.CIDR.String(), BlockSize: p.BlockSize,
			VXLANMode: mode(p.VXLANMode, p.Encapsulation == "VXLAN"), IPIPMode: mode(p.IPIPMode, p.Encapsulation == "IPIP"),
			NATOutgoing: p.NATOutgoing, NodeSelector: p.NodeSelector, Disabled: p.Disabled,
		}})
	}

	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# The Calico resources of cluster %q, written by `hnsplan export calico` from its\n", c.Name)
	buf.WriteString("# intent. Apply with `kubectl apply -f` (Calico API server) or `calicoctl apply -f`;\n")
	buf.WriteString("# kept in the intent directory, they must agree with the CUE (hnsplan vet checks it).\n")
	for i, d := range docs {
		if i > 0 {
			buf.WriteString("---\n")
		}
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err := enc.Encode(d); err != nil {
			return nil, fmt.Errorf("export calico: %v", err)
		}
		if err := enc.Close(); err != nil {
			return nil, fmt.Errorf("export calico: %v", err)
		}
	}
	return buf.Bytes(), nil
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
