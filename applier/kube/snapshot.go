package kube

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
)

// Annotations Calico reads and writes on Node objects for VXLAN.
const (
	AnnotationTunnelMAC  = "projectcalico.org/VXLANTunnelMACAddr"
	AnnotationTunnelAddr = "projectcalico.org/IPv4VXLANTunnelAddr"
)

// A Pod is the part of a Kubernetes pod the agent reads. Slices and maps
// are fresh copies: the caller may keep and modify them.
type Pod struct {
	Namespace, Name string
	Node            string // spec.nodeName; empty while unscheduled
	ServiceAccount  string
	Labels          map[string]string
	// IPs are status.podIPs; empty until the CNI has assigned them. For a
	// HostNetwork pod they are the node's addresses.
	IPs         []netip.Addr
	Ports       []Port // every container's (and init container's) declared ports
	HostNetwork bool   // no HNS endpoint of its own
	Phase       string // Pending, Running, Succeeded, Failed, Unknown
	Terminating bool   // deletionTimestamp is set
	// Competitor is the competing dataplane the pod runs, if any
	// (competitorOf); one byte, in the struct's padding.
	Competitor Competitor
}

// Key returns "namespace/name".
func (p Pod) Key() string { return p.Namespace + "/" + p.Name }

// A Port is a container port as declared in the pod spec.
type Port struct {
	Name     string // empty if unnamed
	Port     int32
	Protocol string // TCP, UDP or SCTP
}

// A Namespace is a namespace's name and labels.
type Namespace struct {
	Name   string
	Labels map[string]string
}

// A Node is the part of a Kubernetes Node the agent reads.
type Node struct {
	Name   string
	Labels map[string]string
	// Annotations: every annotation for this agent's node; for other nodes
	// only the projectcalico.org/ and hnsplan.io/ ones.
	Annotations   map[string]string
	PodCIDRs      []netip.Prefix
	Unschedulable bool
	Addresses     []NodeAddress
	// TunnelMAC is the VXLAN tunnel MAC in HNS form ("00-15-5D-7A-00-22"),
	// empty if the annotation is absent or malformed.
	TunnelMAC string
	// TunnelAddr is the IPv4 VXLAN tunnel (VTEP) address; invalid if absent.
	TunnelAddr netip.Addr
	// KernelVersion is status.nodeInfo.kernelVersion (on Windows the OS
	// build, 10.0.20348.2582): kept for the agent's own node only.
	KernelVersion string
}

// A NodeAddress is one of status.addresses.
type NodeAddress struct {
	Type string // InternalIP, ExternalIP, Hostname, ...; only IP types are kept
	Addr netip.Addr
}

// A BlockAffinity is a Calico IPAM block affinity
// (crd.projectcalico.org/v1 BlockAffinity).
type BlockAffinity struct {
	Name    string
	Node    string
	CIDR    netip.Prefix
	State   string // confirmed, pending, pendingDeletion
	Deleted bool
}

// NormalizeMAC returns mac in HNS form, upper-case and dash-separated
// ("00-15-5D-7A-00-22"). It accepts any form net.ParseMAC accepts, and
// only 48-bit addresses.
func NormalizeMAC(mac string) (string, error) {
	hw, err := net.ParseMAC(strings.TrimSpace(mac))
	if err != nil {
		return "", fmt.Errorf("kube: MAC address %q: %w", mac, err)
	}
	if len(hw) != 6 {
		return "", fmt.Errorf("kube: MAC address %q: not a 48-bit address", mac)
	}
	return strings.ToUpper(strings.ReplaceAll(hw.String(), ":", "-")), nil
}

// podFromAPI reads p; with a non-nil interner, its strings and labels are
// shared with other pods' and must not be modified.
func podFromAPI(p *corev1.Pod, in *interner) Pod {
	out := Pod{
		Namespace:      in.str(p.Namespace),
		Name:           p.Name,
		Node:           in.str(p.Spec.NodeName),
		ServiceAccount: in.str(p.Spec.ServiceAccountName),
		Labels:         in.labelSet(p.Labels),
		HostNetwork:    p.Spec.HostNetwork,
		Phase:          in.str(string(p.Status.Phase)),
		Terminating:    p.DeletionTimestamp != nil,
		Competitor:     competitorOf(p),
	}
	if in == nil {
		out.Labels = cloneMap(p.Labels)
	}
	ips := p.Status.PodIPs
	if len(ips) == 0 && p.Status.PodIP != "" {
		ips = []corev1.PodIP{{IP: p.Status.PodIP}}
	}
	for _, ip := range ips {
		// An unparsable IP cannot be matched by any rule; leaving it out
		// is the only thing to do with it.
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			out.IPs = append(out.IPs, a.Unmap())
		}
	}
	for _, cs := range [][]corev1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for _, c := range cs {
			for _, cp := range c.Ports {
				proto := string(cp.Protocol)
				if proto == "" {
					proto = string(corev1.ProtocolTCP) // the API default
				}
				out.Ports = append(out.Ports, Port{Name: in.str(cp.Name), Port: cp.ContainerPort, Protocol: in.str(proto)})
			}
		}
	}
	out.Ports = in.portList(out.Ports)
	return out
}

func nodeFromAPI(n *corev1.Node) Node {
	out := nodeFrom(n, nil)
	out.Labels, out.Annotations = cloneMap(n.Labels), cloneMap(n.Annotations)
	out.KernelVersion = n.Status.NodeInfo.KernelVersion
	return out
}

// nodeFrom reads n but for its labels and annotations (left nil: the
// caller keeps them as it stores nodes); with a non-nil interner, its
// strings are shared with other nodes'.
func nodeFrom(n *corev1.Node, in *interner) Node {
	ann := n.Annotations
	out := Node{
		Name:          in.str(n.Name),
		Unschedulable: n.Spec.Unschedulable,
	}
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil {
			out.PodCIDRs = append(out.PodCIDRs, p.Masked())
		}
	}
	for _, a := range n.Status.Addresses {
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			out.Addresses = append(out.Addresses, NodeAddress{Type: in.str(string(a.Type)), Addr: ip.Unmap()})
		}
	}
	if m, ok := ann[AnnotationTunnelMAC]; ok {
		var err error
		if out.TunnelMAC, err = NormalizeMAC(m); err != nil {
			klog.V(2).InfoS("Ignoring malformed VXLAN tunnel MAC", "node", n.Name, "err", err)
		}
	}
	if a, err := netip.ParseAddr(ann[AnnotationTunnelAddr]); err == nil && a.Is4() {
		out.TunnelAddr = a
	}
	return out
}

// blockAffinityFromAPI reads a BlockAffinity. Calico stores spec.deleted as
// a string ("true"/"false"); a boolean is accepted too.
func blockAffinityFromAPI(u *unstructured.Unstructured) (BlockAffinity, error) {
	out := BlockAffinity{Name: u.GetName()}
	out.Node, _, _ = unstructured.NestedString(u.Object, "spec", "node")
	out.State, _, _ = unstructured.NestedString(u.Object, "spec", "state")
	cidr, _, _ := unstructured.NestedString(u.Object, "spec", "cidr")
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return out, fmt.Errorf("kube: BlockAffinity %q: spec.cidr: %w", out.Name, err)
	}
	out.CIDR = p.Masked()
	d, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "deleted")
	switch d := d.(type) {
	case bool:
		out.Deleted = d
	case string:
		out.Deleted = strings.EqualFold(d, "true")
	}
	return out, nil
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
