package kube

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// A Competitor is another dataplane that programs HNS on a Windows node:
// run beside the agent, the two would rewrite each other's network, routes
// and ACLs (docs/calico.md, docs/flannel.md). The pod transform derives it
// (competitorOf), so the pod cache keeps one byte per pod instead of the
// owner references it is read from.
type Competitor uint8

const (
	NoCompetitor Competitor = iota
	// CalicoNodeWindows is Calico's Windows node agent (Felix, confd,
	// the CNI's network setup), the DaemonSet calico-node-windows.
	CalicoNodeWindows
	// Flanneld is flannel's Windows node agent (flanneld and its HNS
	// network), the DaemonSet kube-flannel-ds-windows-amd64.
	Flanneld
	// AzureNPM is Azure Network Policy Manager's Windows agent, the
	// DaemonSet azure-npm-win: it writes ACLs to the pod endpoints of
	// Azure CNI's network, as a policy-only agent does.
	AzureNPM
)

// String is the competitor's name as the agent reports it.
func (c Competitor) String() string {
	switch c {
	case CalicoNodeWindows:
		return "calico-node-windows"
	case Flanneld:
		return "flanneld"
	case AzureNPM:
		return "azure-npm-win"
	}
	return ""
}

// competitorOf says which competing dataplane p runs, from what its
// installers put on it, never from the pod's name alone (any pod may be
// named anything):
//
//   - calico-node-windows: p is controlled by a DaemonSet named
//     calico-node-windows (the tigera-operator's, in calico-system; the
//     manifests', sig-windows-tools' and Calico's, in kube-system; the
//     sig-windows-tools one carries no k8s-app label, hence the owner), or
//     p is labelled k8s-app=calico-node-windows (the operator's label), in
//     any namespace;
//
//   - flanneld: p is controlled by a DaemonSet whose name starts with
//     kube-flannel-ds-windows (sig-windows-tools' HostProcess
//     kube-flannel-ds-windows-amd64), or p is labelled app=flannel in
//     namespace kube-flannel or kube-system (flannel's own label; the
//     namespace keeps an application that happens to call itself
//     "flannel" out). Linux's kube-flannel-ds carries the label too, but
//     never runs on a Windows node, and only pods on the agent's node are
//     looked at.
//
//   - Azure NPM's Windows agent: p is controlled by a DaemonSet named
//     azure-npm-win (its manifest in Azure/azure-container-networking,
//     npm/examples/windows/azure-npm.yaml), or p is labelled
//     k8s-app=azure-npm in namespace kube-system: the Linux agent carries
//     that label too, but never runs on a Windows node.
//
// Whether p is on the agent's node, running or terminating is for the
// caller (Pod.Node, Phase, Terminating).
func competitorOf(p *corev1.Pod) Competitor {
	for _, o := range p.OwnerReferences {
		if o.Kind != "DaemonSet" || o.Controller == nil || !*o.Controller {
			continue
		}
		switch {
		case o.Name == "calico-node-windows":
			return CalicoNodeWindows
		case strings.HasPrefix(o.Name, "kube-flannel-ds-windows"):
			return Flanneld
		case o.Name == "azure-npm-win":
			return AzureNPM
		}
	}
	switch {
	case p.Labels["k8s-app"] == "calico-node-windows":
		return CalicoNodeWindows
	case p.Labels["app"] == "flannel" && (p.Namespace == "kube-flannel" || p.Namespace == "kube-system"):
		return Flanneld
	case p.Labels["k8s-app"] == "azure-npm" && p.Namespace == "kube-system":
		return AzureNPM
	}
	return NoCompetitor
}

// Competes says whether p is a competing dataplane that programs, or is
// about to program, HNS on node: bound there, not terminating, not
// completed (Pending counts: it starts at any moment).
func (p Pod) Competes(node string) bool {
	return p.Competitor != NoCompetitor && p.Node == node && node != "" && !p.Terminating &&
		p.Phase != string(corev1.PodSucceeded) && p.Phase != string(corev1.PodFailed)
}
