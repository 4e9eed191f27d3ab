package policy

import (
	"cmp"
	"net/netip"

	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/intent"
)

// protocolNumbers maps Kubernetes container port protocols to IANA numbers.
var protocolNumbers = map[string]int{"TCP": 6, "UDP": 17, "SCTP": 132}

// Pods returns the inventory's pods as the ACL renderer sees them: those
// with an address and not on the host network.
func Pods(inv *intent.Inventory) []*acl.Pod {
	var out []*acl.Pod
	for i := range inv.Pods {
		p := &inv.Pods[i]
		if p.Spec.HostNetwork || p.Status.Phase == "Succeeded" || p.Status.Phase == "Failed" {
			continue // no endpoint; Calico makes no workload endpoint of a finished pod
		}
		ip, err := netip.ParseAddr(PodIP(p))
		if err != nil {
			continue
		}
		pod := &acl.Pod{Namespace: cmp.Or(p.Namespace, "default"), Name: p.Name, IP: ip, Labels: p.Labels, ServiceAccount: cmp.Or(p.Spec.ServiceAccountName, "default")}
		for _, c := range p.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == "" {
					continue
				}
				pod.Ports = append(pod.Ports, acl.NamedPort{Name: cp.Name, Protocol: protocolNumbers[string(cmp.Or(cp.Protocol, "TCP"))], Port: uint16(cp.ContainerPort)})
			}
		}
		out = append(out, pod)
	}
	return out
}

// World is the inventory as the ACL renderer sees it, or nil without pods.
func World(in *intent.Intent, hostAddrs []netip.Addr) *acl.World {
	if len(in.Inventory.Pods) == 0 {
		return nil
	}
	return acl.NewWorld(Pods(&in.Inventory), NamespaceLabels(in), hostAddrs)
}

// NamespaceLabels returns the labels of every namespace the intent and the
// inventory know (the inventory's win: it is live).
func NamespaceLabels(in *intent.Intent) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, ns := range in.Manifests.Namespaces {
		out[ns.Name] = ns.Labels
	}
	for _, ns := range in.Inventory.Namespaces {
		out[ns.Name] = ns.Labels
	}
	for _, p := range in.Inventory.Pods {
		if _, ok := out[cmp.Or(p.Namespace, "default")]; !ok {
			out[cmp.Or(p.Namespace, "default")] = nil
		}
	}
	return out
}

// PodIP is a pod's address as the inventory gives it, "" if it has none.
func PodIP(p *intent.Pod) string {
	if p.Status.PodIP != "" {
		return p.Status.PodIP
	}
	for _, ip := range p.Status.PodIPs {
		return ip.IP
	}
	return ""
}
