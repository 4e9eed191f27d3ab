package intent

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// wireCluster is `cluster` as CUE exports it, defaults filled in. Decoding
// from JSON is several times faster than cue.Value.Decode.
type wireCluster struct {
	Name              string   `json:"name"`
	Datastore         string   `json:"datastore"`
	Networking        string   `json:"networking"`
	ServiceCIDRs      []string `json:"serviceCIDRs"`
	DNSDomain         string   `json:"dnsDomain"`
	KubernetesVersion string   `json:"kubernetesVersion"`
	CalicoVersion     string   `json:"calicoVersion"`
	OperatorManaged   bool     `json:"operatorManaged"`
	Platform          string   `json:"platform"`
	IPAM              IPAM     `json:"ipam"`
	VXLAN             *struct {
		VNI  int `json:"vni"`
		Port int `json:"port"`
		MTU  int `json:"mtu"`
	} `json:"vxlan"`
	BGP *struct {
		NodeToNodeMesh    bool     `json:"nodeToNodeMesh"`
		ASNumber          int64    `json:"asNumber"`
		ServiceClusterIPs []string `json:"serviceClusterIPs"`
		Peers             []struct {
			Address  string `json:"address"`
			ASNumber int64  `json:"asNumber"`
		} `json:"peers"`
	} `json:"bgp"`
	Felix   Felix `json:"felix"`
	Windows struct {
		NetworkName                   string    `json:"networkName"`
		NetworkOwner                  string    `json:"networkOwner"`
		NetworkMatch                  []string  `json:"networkMatch"`
		VXLANMACPrefix                string    `json:"vxlanMACPrefix"`
		UseSingleNetwork              bool      `json:"useSingleNetwork"`
		DisableHostSubnetNATExclusion bool      `json:"disableHostSubnetNATExclusion"`
		NATExceptions                 []string  `json:"natExceptions"`
		KubeProxy                     KubeProxy `json:"kubeProxy"`
		Replacement                   string    `json:"replacement"`
		Rollout                       *struct {
			MaxUnavailable  any    `json:"maxUnavailable"` // a count or "40%"
			Order           string `json:"order"`
			VXLANChange     string `json:"vxlanChange"`
			BuildRegression string `json:"buildRegression"`
		} `json:"rollout"`
	} `json:"windows"`
	Pools map[string]struct {
		CIDR          string `json:"cidr"`
		BlockSize     int    `json:"blockSize"`
		Encapsulation string `json:"encapsulation"`
		VXLANMode     string `json:"vxlanMode"`
		IPIPMode      string `json:"ipipMode"`
		NATOutgoing   bool   `json:"natOutgoing"`
		NodeSelector  string `json:"nodeSelector"`
		Disabled      bool   `json:"disabled"`
	} `json:"pools"`
	Nodes map[string]struct {
		OS        string `json:"os"`
		Address   string `json:"address"`
		Interface string `json:"interface"`
		Windows   *struct {
			Build string `json:"build"`
		} `json:"windows"`
		PodCIDR                 string            `json:"podCIDR"`
		Blocks                  []string          `json:"blocks"`
		Labels                  map[string]string `json:"labels"`
		MaxPods                 int               `json:"maxPods"`
		RouteReflector          bool              `json:"routeReflector"`
		SourceDestCheckDisabled *bool             `json:"sourceDestCheckDisabled"`
		RemoteAccessInstalled   *bool             `json:"remoteAccessInstalled"`
		MACSpoofing             *bool             `json:"macSpoofing"`
	} `json:"nodes"`
	Constraints map[string]string `json:"constraints"`
}

// The kube-proxy defaults are the schema's; a missing kubeProxy struct must
// not turn hostnameOverride false.
var defaultKubeProxy = KubeProxy{DSR: false, HostnameOverride: true}

var cueIdent = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)
var dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// decodeCluster converts the exported `cluster` value into a Cluster,
// checking what the schema cannot: CIDRs are parsed and must not have host
// bits set, names are Kubernetes names, block sizes fit their pools.
//
// With partial set, data is the user's own value, which failed the schema:
// only the checks that need no defaults run, and nothing the schema
// already reports is reported again. The result is then not usable.
func decodeCluster(data []byte, src *source, errs *diag.List, partial bool) *Cluster {
	var w struct {
		Cluster wireCluster `json:"cluster"`
	}
	w.Cluster.Windows.KubeProxy = defaultKubeProxy
	if err := json.Unmarshal(data, &w); err != nil {
		if partial {
			return nil // a type error, which the schema reported
		}
		panic("intent: CUE exported JSON that does not fit wireCluster: " + err.Error())
	}
	wc := &w.Cluster
	c := &Cluster{
		Name: wc.Name, Datastore: wc.Datastore, Networking: Networking(wc.Networking),
		DNSDomain: wc.DNSDomain, KubernetesVersion: wc.KubernetesVersion, CalicoVersion: wc.CalicoVersion,
		OperatorManaged: wc.OperatorManaged, Platform: wc.Platform, IPAM: wc.IPAM, Felix: wc.Felix,
		Constraints: wc.Constraints, src: src,
	}
	cidr := func(s string, path ...any) netip.Prefix {
		p, err := parseCIDR(s, false)
		if err != nil {
			if partial {
				return netip.Prefix{}
			}
			errs.Errorf(RuleSchema, c.Pos(path...), cuePath(path), "%v", err)
			return netip.Prefix{}
		}
		if p != p.Masked() {
			errs.Errorf(RuleHostBits, c.Pos(path...), cuePath(path), "%s has host bits set; write %s", p, p.Masked())
		}
		return p.Masked()
	}
	cidrs := func(ss []string, path ...any) []netip.Prefix {
		out := make([]netip.Prefix, 0, len(ss))
		for i, s := range ss {
			out = append(out, cidr(s, append(slices.Clone(path), i)...))
		}
		return out
	}

	c.ServiceCIDRs = cidrs(wc.ServiceCIDRs, "serviceCIDRs")
	if len(c.ServiceCIDRs) == 0 && wc.ServiceCIDRs != nil {
		// Written, but empty; none at all is for requireServiceCIDRs,
		// once the Installation has had its say.
		errs.Errorf(RuleSchema, c.Pos("serviceCIDRs"), "cluster.serviceCIDRs", "list at least one service CIDR (kube-apiserver --service-cluster-ip-range), e.g. [\"10.96.0.0/12\"]")
	}
	if wc.VXLAN != nil {
		c.VXLAN = &VXLAN{VNI: wc.VXLAN.VNI, Port: wc.VXLAN.Port, MTU: wc.VXLAN.MTU}
		if v := c.VXLAN.VNI; (v < 1 || v > 1<<24-1) && !(partial && v == 0) {
			errs.Errorf(RuleSchema, c.Pos("vxlan", "vni"), "cluster.vxlan.vni", "VNI %d is not a 24-bit VXLAN network identifier (1 to 16777215)", v)
		}
		if p := c.VXLAN.Port; (p < 1 || p > 65535) && !(partial && p == 0) {
			errs.Errorf(RuleSchema, c.Pos("vxlan", "port"), "cluster.vxlan.port", "port %d is not a UDP port (1 to 65535)", p)
		}
	}
	if b := wc.BGP; b != nil {
		c.BGP = &BGP{NodeToNodeMesh: b.NodeToNodeMesh, ASNumber: b.ASNumber, ServiceClusterIPs: cidrs(b.ServiceClusterIPs, "bgp", "serviceClusterIPs")}
		for _, p := range b.Peers {
			a, _ := netip.ParseAddr(p.Address) // the schema checked net.IP
			c.BGP.Peers = append(c.BGP.Peers, BGPPeer{Address: a, ASNumber: p.ASNumber})
		}
	}
	c.Windows = Windows{
		NetworkName: wc.Windows.NetworkName, UseSingleNetwork: wc.Windows.UseSingleNetwork,
		DisableHostSubnetNATExclusion: wc.Windows.DisableHostSubnetNATExclusion,
		NATExceptions:                 cidrs(wc.Windows.NATExceptions, "windows", "natExceptions"),
		KubeProxy:                     wc.Windows.KubeProxy, Replacement: wc.Windows.Replacement,
		VXLANMACPrefix: cmp.Or(strings.ToUpper(wc.Windows.VXLANMACPrefix), DefaultVXLANMACPrefix),
	}
	if r := wc.Windows.Rollout; r != nil {
		c.Windows.Rollout = &Rollout{MaxUnavailable: fmt.Sprint(r.MaxUnavailable), Order: r.Order, VXLANChange: r.VXLANChange, BuildRegression: r.BuildRegression}
	}
	c.Windows.NetworkOwner = wc.Windows.NetworkOwner
	c.Windows.NetworkMatch, c.Windows.NetworkMatchSet = wc.Windows.NetworkMatch, wc.Windows.NetworkMatch != nil
	c.networkDefaults()
	for i, m := range c.Windows.NetworkMatch {
		if err := plan.CheckNetworkPattern(m); err != nil {
			errs.Errorf(RuleSchema, c.Pos("windows", "networkMatch", i), cuePath([]any{"windows", "networkMatch", i}), "%v", err)
		}
	}
	if n := len(c.Windows.NetworkMatch); n > plan.MaxNetworkPatterns {
		errs.Errorf(RuleSchema, c.Pos("windows", "networkMatch"), "cluster.windows.networkMatch", "%d patterns: give at most %d (a pattern can match many names: \"azure.*\")", n, plan.MaxNetworkPatterns)
	}

	for _, name := range slices.Sorted(maps.Keys(wc.Pools)) {
		wp := wc.Pools[name]
		if !dns1123Subdomain.MatchString(name) || len(name) > 253 {
			errs.Errorf(RuleSchema, c.Pos("pools", name), cuePath([]any{"pools", name}), "pool name %q must be a DNS-1123 name (lower-case letters, digits, '-', '.'), as Calico's IPPool names are", name)
		}
		var pc netip.Prefix
		if wp.CIDR != "" { // else an IPPool of the intent gives it (requirePoolCIDRs)
			pc = cidr(wp.CIDR, "pools", name, "cidr")
		}
		p := Pool{Name: name, CIDR: pc, BlockSize: wp.BlockSize,
			Encapsulation: wp.Encapsulation, VXLANMode: wp.VXLANMode, IPIPMode: wp.IPIPMode,
			NATOutgoing: wp.NATOutgoing, NodeSelector: wp.NodeSelector, Disabled: wp.Disabled}
		if p.CIDR.IsValid() && !(partial && p.BlockSize == 0) {
			if bits := p.CIDR.Addr().BitLen(); p.BlockSize > bits {
				errs.Errorf(RuleSchema, c.Pos("pools", name, "blockSize"), cuePath([]any{"pools", name, "blockSize"}), "blockSize %d is not a prefix length of an IPv%d pool: an IPv%[2]d address has %d bits, so blockSize is %d to %[3]d (26 for a /26 block)", p.BlockSize, map[int]int{32: 4, 128: 6}[bits], bits, p.CIDR.Bits())
			} else if p.BlockSize < p.CIDR.Bits() {
				errs.Errorf(RuleSchema, c.Pos("pools", name, "blockSize"), cuePath([]any{"pools", name, "blockSize"}), "blockSize %d makes blocks larger than the pool %s; use a blockSize of at least %d", p.BlockSize, p.CIDR, p.CIDR.Bits())
			}
		}
		c.Pools = append(c.Pools, p)
	}

	for _, name := range slices.Sorted(maps.Keys(wc.Nodes)) {
		wn := wc.Nodes[name]
		if !dns1123Subdomain.MatchString(name) || len(name) > 253 {
			errs.Errorf(RuleSchema, c.Pos("nodes", name), cuePath([]any{"nodes", name}), "node name %q must be a Kubernetes node name (DNS-1123: lower-case letters, digits, '-', '.')", name)
		} else if err := plan.CheckNodeName(name); err != nil && wn.OS == "windows" {
			// A Windows node gets a plan file and ConfigMap named after it:
			// say so here, not halfway through writing the plans.
			errs.Errorf(RuleSchema, c.Pos("nodes", name), cuePath([]any{"nodes", name}), "Windows node: %v", err)
		}
		n := Node{Name: name, OS: wn.OS, Interface: wn.Interface, Labels: wn.Labels, MaxPods: wn.MaxPods,
			RouteReflector: wn.RouteReflector, SourceDestCheckDisabled: wn.SourceDestCheckDisabled,
			RemoteAccessInstalled: wn.RemoteAccessInstalled, MACSpoofing: wn.MACSpoofing}
		if wn.Windows != nil {
			n.WindowsBuild = wn.Windows.Build
		}
		if a, err := netip.ParsePrefix(wn.Address); err == nil {
			n.Addr, n.Subnet = a.Addr(), a.Masked()
		} else if !partial {
			errs.Errorf(RuleSchema, c.Pos("nodes", name, "address"), cuePath([]any{"nodes", name, "address"}), "%q is not an interface address with prefix length, e.g. \"172.20.41.103/19\"", wn.Address)
		}
		if wn.PodCIDR != "" {
			n.PodCIDR = cidr(wn.PodCIDR, "nodes", name, "podCIDR")
		}
		n.Blocks = cidrs(wn.Blocks, "nodes", name, "blocks")
		c.Nodes = append(c.Nodes, n)
	}
	return c
}

// networkDefaults fills in the network's owner and the networks a CNI's
// pods are on where the CUE leaves them to their defaults, which follow
// the networking and the platform (the Installation may give the latter).
func (c *Cluster) networkDefaults() {
	if !c.written("windows", "networkOwner") {
		c.Windows.NetworkOwner = defaultOwner(c.Networking, c.Platform)
	}
	switch {
	case c.Windows.NetworkOwner != OwnerCNI:
		c.Windows.NetworkMatch = nil
	case c.Windows.NetworkMatchSet:
	case c.written("windows", "networkName"):
		c.Windows.NetworkMatch = []string{regexp.QuoteMeta(c.Windows.NetworkName)}
	default:
		c.Windows.NetworkMatch = defaultNetworkMatch(c)
	}
}

// Path formats a path below `cluster` (field names and list indexes) the
// way findings spell it: cluster.pools.default.cidr, cluster.nodes."win-1".
func Path(path ...any) string { return cuePath(path) }

func cuePath(path []any) string {
	var b strings.Builder
	b.WriteString("cluster")
	for _, p := range path {
		switch k := p.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", k)
		case string:
			if cueIdent.MatchString(k) {
				b.WriteString("." + k)
			} else {
				fmt.Fprintf(&b, ".%q", k)
			}
		}
	}
	return b.String()
}
