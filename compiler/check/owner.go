package check

import (
	"fmt"

	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
)

// networkOwner checks who owns the Windows nodes' network against the
// networking: hnsplan cannot own the network a managed platform's CNI
// creates, nor flanneld's VXLAN network, whose routes flanneld programs;
// and a CNI-owned network needs the names to find its endpoints on.
func networkOwner(x *checker) {
	if !x.hasWindows() {
		return
	}
	w := &x.c.Windows
	at := []any{"windows", "networkOwner"}
	related := []diag.Related{x.rel([]any{"networking"}, "networking %s", x.c.Networking)}
	switch {
	case w.NetworkOwner == intent.OwnerHnsplan && x.c.Networking == intent.CloudProvider && (x.c.Platform == "aks" || x.c.Platform == "eks"):
		x.reportRel("network-owner", "", at, append(related, x.rel([]any{"platform"}, "platform %s", x.c.Platform)),
			"networkOwner hnsplan on platform %s: %s creates the Windows pods' HNS network and endpoints there, and a network the agent created beside it would hold no pod; remove networkOwner (or set it to \"cni\"): hnsplan then enforces network policy on %s's endpoints",
			x.c.Platform, cniName(x.c), cniName(x.c))
	case w.NetworkOwner == intent.OwnerHnsplan && x.c.Networking == intent.FlannelVXLAN:
		x.reportRel("network-owner", "", at, related,
			"networkOwner hnsplan with flannel-vxlan: flanneld creates its VXLAN network and adds and removes a RemoteSubnetRoute on it for every other node's lease, so an agent owning that network would fight flanneld over its routes; remove networkOwner (or set it to \"cni\"): hnsplan then enforces network policy beside flanneld")
	case w.NetworkOwner == intent.OwnerCNI && (x.c.Networking == intent.CalicoVXLAN || x.c.Networking == intent.CalicoBGP || x.c.Networking == intent.StaticRoutes):
		x.reportRel("network-owner", "", at, related,
			"networkOwner cni with networking %s: with that networking hnsplan creates the Windows nodes' network (Calico's own CNI would need calico-node-windows, which the agent does not run beside); set networking to the one of the CNI that owns the network (cloud-provider, flannel-host-gw, flannel-vxlan), or networkOwner to \"hnsplan\"",
			x.c.Networking)
	case w.NetworkOwner == intent.OwnerCNI && len(w.NetworkMatch) == 0:
		x.reportRel("network-match-missing", "", []any{"windows"}, append(related, x.rel(at, "networkOwner cni"))[:1],
			"hnsplan enforces network policy only (networkOwner cni), and cannot tell which HNS networks hold the pod endpoints of %s: set windows.networkMatch to the network's name, or a pattern (\"l2bridge\", \"azure.*\"); `Get-HnsNetwork | Select Name, Type` on a node lists them", cniName(x.c))
	}
	if w.NetworkOwner == intent.OwnerHnsplan && w.NetworkMatchSet {
		x.report("network-match-ignored", "", []any{"windows", "networkMatch"},
			"windows.networkMatch names the networks of a CNI that owns them, but hnsplan owns the Windows network here (networkOwner hnsplan, networking %s), by the name %q: remove networkMatch, or set networkOwner to \"cni\"",
			x.c.Networking, w.NetworkName)
	}
}

// cniName is the CNI of a policy-only cluster, for messages.
func cniName(c *intent.Cluster) string {
	switch c.CNI() {
	case "azure-cni":
		return "Azure CNI"
	case "vpc-cni":
		return "the Amazon VPC CNI"
	case "flanneld":
		return "flanneld"
	}
	return fmt.Sprintf("the CNI of networking %s", c.Networking)
}
