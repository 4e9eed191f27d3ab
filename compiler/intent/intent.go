// Package intent loads a cluster's network intent — one CUE package plus the
// Kubernetes manifests beside it — and the live inventory, into typed Go
// values. It is the only package that imports CUE.
//
// Load reports every problem it finds as a diag.Finding with the file:line:col
// of its cause; it does not stop at the first.
package intent

import (
	"net/netip"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

// Intent is everything an intent directory says.
type Intent struct {
	Dir       string    // the directory as given
	Cluster   *Cluster  // nil if the CUE package did not load
	Manifests Manifests // the Kubernetes manifests below Dir
	Inventory Inventory // live state from --inventory files
	Lock      *Lock     // hnsplan.lock.json beside the intent; nil if absent
}

// Networking is the data plane of the Windows nodes.
type Networking string

const (
	CalicoVXLAN   Networking = "calico-vxlan"
	CalicoBGP     Networking = "calico-bgp"
	FlannelHostGW Networking = "flannel-host-gw"
	FlannelVXLAN  Networking = "flannel-vxlan"
	StaticRoutes  Networking = "static-routes"
	CloudProvider Networking = "cloud-provider"
)

// Cluster is the `cluster` value of the intent, defaults filled in. Every
// CIDR is parsed and masked; Pos finds where any field was written.
type Cluster struct {
	Name              string
	Datastore         string // "kubernetes" | "etcd"
	Networking        Networking
	ServiceCIDRs      []netip.Prefix
	DNSDomain         string
	KubernetesVersion string // "1.33", or "" if unset
	CalicoVersion     string // "3.30", or "" if unset
	OperatorManaged   bool
	Platform          string // "" if unset
	IPAM              IPAM
	VXLAN             *VXLAN // nil if unset
	BGP               *BGP   // nil if unset
	Felix             Felix
	Windows           Windows
	Pools             []Pool // sorted by name
	Nodes             []Node // sorted by name
	// Constraints maps a rule id to "error", "warning", "info" or "off".
	Constraints map[string]string

	src *source
	// fromCalico holds where the settings that came from the intent's
	// Calico resources (and not from CUE) are written, by fmt.Sprint of
	// their path below `cluster`: Pos answers with them.
	fromCalico map[string]diag.Pos
}

// IPAM is how pod addresses are assigned.
type IPAM struct {
	Type             string // "calico" | "host-local"
	StrictAffinity   bool
	MaxBlocksPerHost int // 0: no limit
}

// VXLAN holds the cluster's VXLAN parameters.
type VXLAN struct {
	VNI  int
	Port int
	MTU  int // 0 if unset
}

// BGP holds the cluster's BGP settings.
type BGP struct {
	NodeToNodeMesh    bool
	ASNumber          int64
	ServiceClusterIPs []netip.Prefix
	Peers             []BGPPeer
}

// BGPPeer is one explicit BGP peer.
type BGPPeer struct {
	Address  netip.Addr
	ASNumber int64
}

// Felix holds the Felix settings that matter to Windows nodes.
type Felix struct {
	IPIPEnabled  *bool // nil if unset
	VXLANEnabled *bool // nil if unset
}

// Windows holds the settings of the Windows nodes' HNS networking.
type Windows struct {
	NetworkName string
	// NetworkOwner is who creates the network and the pod endpoints:
	// OwnerHnsplan, or OwnerCNI (the platform's CNI or flanneld; hnsplan
	// enforces network policy only). The default is filled in.
	NetworkOwner string
	// NetworkMatch are the RE2 patterns (each matched against a whole
	// network name) of the networks the pods' endpoints are on, with
	// OwnerCNI: written, or the default of the CNI; nil with
	// OwnerHnsplan. NetworkMatchSet says they were written.
	NetworkMatch    []string
	NetworkMatchSet bool
	// VXLANMACPrefix is the pod endpoints' MAC prefix ("0E-2A"), upper
	// case.
	VXLANMACPrefix                string
	UseSingleNetwork              bool
	DisableHostSubnetNATExclusion bool
	NATExceptions                 []netip.Prefix
	KubeProxy                     KubeProxy
	Replacement                   string // "drain" | "manual"
	// Rollout is windows.rollout; nil when the intent does not set it.
	Rollout *Rollout
}

// Rollout is how the Windows nodes take turns replacing their network.
type Rollout struct {
	MaxUnavailable string // a count ("1") or a percentage ("40%")
	Order          string // a node label key; "" for no order
	// VXLANChange is the pace of a replace caused by the VXLAN VNI or port
	// alone: plan.VXLANRolling (the default) or plan.VXLANAllAtOnce.
	VXLANChange string
	// BuildRegression is plan.BuildHold or plan.BuildProceed (the
	// default): whether a node on a Windows build with a known
	// regression may start a replace.
	BuildRegression string
}

// KubeProxy holds the kube-proxy settings of the Windows nodes.
type KubeProxy struct {
	DSR              bool
	HostnameOverride bool
}

// Pool is a Calico IPPool.
type Pool struct {
	Name          string
	CIDR          netip.Prefix
	BlockSize     int
	Encapsulation string // "VXLAN" | "IPIP" | "None"
	VXLANMode     string // "" if unset
	IPIPMode      string // "" if unset
	NATOutgoing   bool
	NodeSelector  string
	Disabled      bool
}

// Node is one Kubernetes node.
type Node struct {
	Name string
	OS   string // "windows" | "linux"
	// Addr is the node's interface address and Subnet the network it is on
	// (the address's prefix, masked): "172.20.41.103/19" gives 172.20.41.103
	// and 172.20.32.0/19.
	Addr                    netip.Addr
	Subnet                  netip.Prefix
	Interface               string
	WindowsBuild            string         // "10.0.17763.1432", or ""
	PodCIDR                 netip.Prefix   // zero if unset
	Blocks                  []netip.Prefix // pinned IPAM blocks
	Labels                  map[string]string
	MaxPods                 int // 0 if unset
	RouteReflector          bool
	SourceDestCheckDisabled *bool
	RemoteAccessInstalled   *bool
	MACSpoofing             *bool
}

// Network owners (windows.networkOwner).
const (
	OwnerHnsplan = "hnsplan"
	OwnerCNI     = "cni"
)

// PolicyOnly reports whether another program (the platform's CNI,
// flanneld) owns the Windows nodes' HNS network and pod endpoints: the
// plans then hold the policy and the networks to find the endpoints on,
// and nothing to create.
func (c *Cluster) PolicyOnly() bool { return c.Windows.NetworkOwner == OwnerCNI }

// CNI names the program that owns the Windows pods' network when hnsplan
// does not (PolicyOnly): "azure-cni", "vpc-cni", "flanneld", or "cni"
// when the intent does not say which.
func (c *Cluster) CNI() string {
	switch c.Networking {
	case FlannelVXLAN, FlannelHostGW:
		return "flanneld"
	case CloudProvider:
		switch c.Platform {
		case "aks", "azure":
			return "azure-cni"
		case "eks", "aws":
			return "vpc-cni"
		}
	}
	return "cni"
}

// defaultOwner is windows.networkOwner when the intent does not set it:
// the CNI owns the network where hnsplan cannot (the managed platforms'
// CNIs; flanneld's VXLAN network, whose routes flanneld programs).
func defaultOwner(n Networking, platform string) string {
	switch {
	case n == CloudProvider && (platform == "aks" || platform == "eks"), n == FlannelVXLAN:
		return OwnerCNI
	}
	return OwnerHnsplan
}

// defaultNetworkMatch is windows.networkMatch when the intent does not set
// it: what each CNI names its HNS network (docs/aks.md, docs/eks.md,
// docs/flannel.md give the sources), or nil when that is not known.
func defaultNetworkMatch(c *Cluster) []string {
	switch c.CNI() {
	case "azure-cni":
		// azure (the conflist's name), azure-vlan<id>-<subnet> (multitenancy),
		// azure-<MAC> (delegated NICs): Calico's KUBE_NETWORK "azure.*".
		return []string{"azure.*"}
	case "vpc-cni":
		// vpc-bridge's "<conf name>br<ENI MAC>", vpcbr0ea1551f9f9a: Calico's "vpc.*".
		return []string{"vpc.*"}
	case "flanneld":
		if c.Networking == FlannelHostGW {
			return []string{"cbr0"} // the host-gw backend's default name
		}
		// The vxlan backend's default name flannel.<VNI>; Microsoft's SDN
		// scripts name it vxlan0.
		return []string{`flannel\.[0-9]+`, "vxlan0"}
	}
	return nil
}

// IsWindows reports whether n is a Windows node.
func (n *Node) IsWindows() bool { return n.OS == "windows" }

// Pos returns where the value at path (field names and list indexes below
// `cluster`, e.g. "pools", "default", "cidr") was written. A value that was
// not written, such as a default, takes the position of the nearest
// enclosing value that was.
func (c *Cluster) Pos(path ...any) diag.Pos {
	if c == nil {
		return diag.Pos{}
	}
	// A setting a Calico resource gave, or a pool it added, is at the
	// resource; a value written in CUE below it stays at the CUE.
	for i := len(path); i > 0 && len(c.fromCalico) > 0; i-- {
		if p, ok := c.fromCalico[pathKey(path[:i])]; ok {
			return p
		}
		if c.written(path[:i]...) {
			break
		}
	}
	if c.src == nil {
		return diag.Pos{}
	}
	return c.src.pos(append([]any{"cluster"}, path...))
}

// Manifests are the Kubernetes objects of the intent directory, each in the
// order of its file and document.
type Manifests struct {
	NetworkPolicies []NetworkPolicy
	CalicoPolicies  []CalicoPolicy // NetworkPolicy and GlobalNetworkPolicy
	Tiers           []Tier
	// HostEndpoints are Calico HostEndpoints: valid Calico, read so that
	// a user's directory loads, and reported as not reaching pods.
	HostEndpoints []HostEndpoint
	Namespaces    []Namespace
	Services      []Service
	// Calico are the projectcalico.org/v3 IPPools, IPAMConfigurations,
	// FelixConfigurations and BGPConfigurations: settings of the cluster,
	// merged into Intent.Cluster by Load.
	Calico  CalicoConfig
	Files   int // how many YAML files were read
	objects int
	peers   int // of all policies, counted against MaxPeers
	values  int // YAML values of all documents, counted against MaxIntentValues
}

// Len is the number of objects in m.
func (m *Manifests) Len() int { return m.objects }

// Source says where a manifest object was read.
type Source struct {
	File string // as given, relative to the working directory where possible
	Doc  int    // 1-based document index in the file
	Item int    // 1-based index in a v1 List, 0 if not in a list
	Pos  diag.Pos
	node *yaml.Node
}

// PosOf returns where the field at path (field names and list indexes,
// e.g. "spec", "ingress", 0, "ports") is written in the manifest, or the
// nearest enclosing position.
func (s *Source) PosOf(path ...any) diag.Pos {
	if s.node == nil {
		return s.Pos
	}
	return nodePos(s.File, lookupNode(s.node, path))
}

// NetworkPolicy is a networking.k8s.io/v1 NetworkPolicy.
type NetworkPolicy struct {
	networkingv1.NetworkPolicy
	Source Source
}

// Namespace is a v1 Namespace.
type Namespace struct {
	corev1.Namespace
	Source Source
}

// Service is a v1 Service.
type Service struct {
	corev1.Service
	Source Source
}

// Inventory is live cluster state: never committed, given with --inventory.
// Its objects' Sources carry positions but no node trees, to keep the
// memory of a 50,000-pod inventory small.
type Inventory struct {
	Pods            []Pod
	Namespaces      []Namespace
	Services        []Service
	Nodes           []KubeNode
	EndpointSlices  []EndpointSlice
	BlockAffinities []BlockAffinity
	// Calico is the live Calico configuration, from its
	// crd.projectcalico.org/v1 or projectcalico.org/v3 objects.
	Calico CalicoConfig
	Files  []string
}

// KubeNode is a v1 Node from the inventory (Node is the intent's node).
type KubeNode struct {
	corev1.Node
	Source Source
}

// EndpointSlice is a discovery.k8s.io/v1 EndpointSlice from the inventory.
type EndpointSlice struct {
	discoveryv1.EndpointSlice
	Source Source
}

// BlockAffinity is a Calico BlockAffinity: a node's claim on an IPAM block.
type BlockAffinity struct {
	Name    string
	Node    string
	CIDR    netip.Prefix
	State   string // "confirmed", "pending", "pendingDeletion"
	Deleted bool
	Source  Source
}
