package check

import (
	"strconv"
	"strings"

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
		if b.Less(build1809Min) {
			x.report("windows-build-unsupported", n.Name, at,
				"Windows node %s runs build %s; Calico for Windows needs Windows Server 1809 build 17763.1432 or later", n.Name, b)
		}
		if b.Number != build1809.Number && b.Number != build20H2 {
			x.report("windows-build-untested", n.Name, at,
				"Windows node %s runs build %s, which is neither the 1809 line (17763) nor 20H2 (19042), the builds Calico for Windows is tested on", n.Name, b)
		}
		if snatsClusterIPTraffic(b) {
			if src, ok := x.sourceSelectorPolicy(); ok {
				x.report("svc-snat-source-selector", n.Name, at,
					"Windows node %s runs build %s, where kube-proxy source-NATs pod traffic to ClusterIPs to the host: %s selects sources by label and will not match that traffic; update to 17763.1432 or later",
					n.Name, b, src)
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
	if v := x.c.CalicoVersion; v != "" && versionBelow(v, 3, 12) {
		x.report("calico-version", "", []any{"calicoVersion"}, "Calico %s is older than 3.12, the first release for Windows nodes hnsplan supports", v)
	}
	if v := x.c.KubernetesVersion; x.c.Platform == "aks" && v != "" && versionBelow(v, 1, 20) {
		x.report("aks-kubernetes-version", "", []any{"kubernetesVersion"}, "Calico for Windows on AKS needs Kubernetes 1.20 or later, not %s", v)
	}
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

// sourceSelectorPolicy returns a policy of the intent that selects
// traffic sources by label, described with its position.
func (x *checker) sourceSelectorPolicy() (string, bool) {
	for _, p := range x.in.Manifests.NetworkPolicies {
		for _, r := range p.Spec.Ingress {
			for _, f := range r.From {
				if f.PodSelector != nil || f.NamespaceSelector != nil {
					return "NetworkPolicy " + p.Namespace + "/" + p.Name + " (" + p.Source.Pos.String() + ")", true
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
				return "Calico " + kind + p.Name + " (" + p.Source.Pos.String() + ")", true
			}
		}
	}
	return "", false
}
