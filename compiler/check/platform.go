package check

import (
	"strconv"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
)

// version parses "major.minor[.patch]" into comparable numbers.
func version(s string) (major, minor int, ok bool) {
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return 0, 0, false
	}
	a, err1 := strconv.Atoi(parts[0])
	b, err2 := strconv.Atoi(parts[1])
	return a, b, err1 == nil && err2 == nil
}

func versionBelow(s string, major, minor int) bool {
	a, b, ok := version(s)
	return ok && (a < major || a == major && b < minor)
}

func platform(x *checker) {
	if !x.hasWindows() {
		return
	}
	for _, n := range x.Windows {
		if n.WindowsBuild == "" {
			x.report("windows-build-unsupported", n.Name, []any{"nodes", n.Name},
				"Windows node %s has no windows.build: hnsplan cannot check it; set nodes.%s.windows.build (e.g. \"10.0.17763.1432\", from `cmd /c ver`)", n.Name, n.Name)
			continue
		}
		b, err := ParseBuild(n.WindowsBuild)
		at := []any{"nodes", n.Name, "windows", "build"}
		if err != nil {
			x.report("windows-build-unsupported", n.Name, at, "%v", err)
			continue
		}
		switch {
		case b.Less(build1809Min):
			x.report("windows-build-unsupported", n.Name, at,
				"Windows node %s runs build %s; Calico for Windows needs Windows Server 1809 build 17763.1432 or later", n.Name, b)
		case b.Number == build2022.Number && b.Less(build2022Min):
			x.report("windows-build-unsupported", n.Name, at,
				"Windows node %s runs Windows Server 2022 build %s; Calico for Windows needs 20348.169 or later on Windows Server 2022", n.Name, b)
		}
		switch {
		case b.Number == build2025:
			x.report("windows-build-untested", n.Name, at,
				"Windows node %s runs Windows Server 2025 (build %s): Kubernetes supports it, but the Calico for Windows requirements (3.28 to 3.30) list only Windows Server 1809/2019 (17763) and 2022 (20348)", n.Name, b)
		case !calicoTested(b):
			x.report("windows-build-untested", n.Name, at,
				"Windows node %s runs build %s, which is neither Windows Server 1809/2019 (17763) nor 2022 (20348), the versions the Calico for Windows requirements list", n.Name, b)
		}
		if snatsClusterIPTraffic(b) {
			if pol, pos, ok := x.sourceSelectorPolicy(); ok {
				x.reportRel("svc-snat-source-selector", n.Name, at, []diag.Related{diag.At(pos, "%s", pol)},
					"Windows node %s runs build %s, where kube-proxy source-NATs pod traffic to ClusterIPs to the host: %s (%s) selects sources by label and will not match that traffic; update to 17763.1432 or later",
					n.Name, b, pol, pos)
			}
		}
		if n.MACSpoofing != nil && !*n.MACSpoofing {
			x.report("mac-spoofing", n.Name, []any{"nodes", n.Name, "macSpoofing"},
				"Windows node %s: its VM NIC must allow MAC address spoofing for pod traffic; enable it on the hypervisor and set macSpoofing: true", n.Name)
		}
	}
	if len(x.Linux) == 0 {
		x.report("linux-node-required", "", []any{"nodes"},
			"the cluster has Windows nodes but no Linux node: the control plane and Calico's cluster components run only on Linux; add one")
	}
	if x.c.OperatorManaged && len(x.Linux) < 3 {
		x.report("typha-ha", "", []any{"operatorManaged"},
			"the tigera-operator runs Typha on Linux nodes; with %s Typha has no high availability (it wants three)", count(len(x.Linux), "Linux node"))
	}
	switch v := x.c.CalicoVersion; {
	case v == "":
	case x.c.OperatorManaged && versionBelow(v, 3, 27):
		x.reportRel("calico-version", "", []any{"calicoVersion"}, x.operatorManaged(), "Calico %s is older than 3.27, the first release the operator installs on Windows nodes (operatorManaged is true)", v)
	case versionBelow(v, 3, 12):
		x.report("calico-version", "", []any{"calicoVersion"}, "Calico %s is older than 3.12, the first release for Windows nodes hnsplan supports", v)
	}
	if v := x.c.KubernetesVersion; x.c.Platform == "aks" && v != "" && versionBelow(v, 1, 20) {
		x.reportRel("aks-kubernetes-version", "", []any{"kubernetesVersion"}, []diag.Related{x.rel([]any{"platform"}, "platform %s", x.c.Platform)}, "Calico for Windows on AKS needs Kubernetes 1.20 or later, not %s", v)
	}
	if v := x.c.KubernetesVersion; x.c.OperatorManaged && v != "" && versionBelow(v, 1, 22) {
		x.reportRel("operator-kubernetes-version", "", []any{"kubernetesVersion"}, x.operatorManaged(),
			"the operator installs Calico for Windows as HostProcess containers, which need Kubernetes 1.22 or later, not %s", v)
	}
	managedPlatform(x)
	if !x.c.Windows.KubeProxy.HostnameOverride {
		x.report("kube-proxy-hostname-override", "", []any{"windows", "kubeProxy", "hostnameOverride"},
			"kube-proxy on Windows without --hostname-override set to the node name deletes HNS endpoints it does not recognise; set hostnameOverride: true")
	}
	if x.c.Networking == intent.FlannelVXLAN {
		x.report("flannel-vxlan-untested", "", []any{"networking"}, "flannel-vxlan with Windows nodes is not tested with Calico for Windows")
		x.report("flannel-vxlan-node-pod", "", []any{"networking"},
			"with flannel-vxlan, a Windows node reaches only its own pods: node-to-pod traffic to remote pods is not supported")
	}
}

// operatorManaged is the related position of operatorManaged true.
func (x *checker) operatorManaged() []diag.Related {
	return []diag.Related{x.rel([]any{"operatorManaged"}, "operatorManaged true")}
}

// sourceSelectorPolicy returns a policy of the intent that selects
// traffic sources by label: its kind and name, and its position.
func (x *checker) sourceSelectorPolicy() (string, diag.Pos, bool) {
	for _, p := range x.in.Manifests.NetworkPolicies {
		for _, r := range p.Spec.Ingress {
			for _, f := range r.From {
				if f.PodSelector != nil || f.NamespaceSelector != nil {
					return "NetworkPolicy " + p.Namespace + "/" + p.Name, p.Source.Pos, true
				}
			}
		}
	}
	for _, p := range x.in.Manifests.CalicoPolicies {
		for _, r := range p.Spec.Ingress {
			if r.Source.Selector != "" || r.Source.NamespaceSelector != "" || r.Source.NotSelector != "" {
				kind := "NetworkPolicy " + p.Namespace + "/"
				if p.Global {
					kind = "GlobalNetworkPolicy "
				}
				return "Calico " + kind + p.Name, p.Source.Pos, true
			}
		}
	}
	return "", diag.Pos{}, false
}

// managedPlatform says what Calico does on AKS and EKS: there the Windows
// pods are networked by the platform's CNI (Azure CNI, the VPC CNI), and
// Calico for Windows enforces network policy only.
func managedPlatform(x *checker) {
	cni := map[string]string{"aks": "Azure CNI", "eks": "the Amazon VPC CNI"}[x.c.Platform]
	if cni == "" {
		return
	}
	switch x.c.Networking {
	case intent.CalicoVXLAN, intent.CalicoBGP:
		x.reportRel("managed-platform-cni", "", []any{"networking"}, []diag.Related{x.rel([]any{"platform"}, "platform %s", x.c.Platform)},
			"platform %s with networking %s: Calico for Windows supports only %s for Windows pods there, so Calico would not network them; set networking to cloud-provider (Calico then enforces policy only)",
			x.c.Platform, x.c.Networking, cni)
	default:
		x.report("managed-platform-policy-only", "", []any{"platform"},
			"platform %s: %s networks the Windows pods and assigns their addresses; hnsplan enforces network policy only (on the pod endpoints of the HNS networks %s), so the intent's pools, IPAM and VXLAN settings do not apply to Windows pods", x.c.Platform, cni, quoteAll(x.c.Windows.NetworkMatch))
	}
}

// quoteAll lists strings quoted: "azure.*", "vxlan0".
func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}
