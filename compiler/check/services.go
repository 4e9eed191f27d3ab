package check

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/hnsplan/hnsplan/compiler/intent"
)

// maxServiceBackends is how many backends a Windows load balancer takes
// without DSR (reference 003).
const maxServiceBackends = 64

// windowsNodes maps every known Windows node to its build ("" if unknown):
// the intent's nodes, and the inventory's Nodes labelled kubernetes.io/os
// windows (build from their kernel version).
func (x *checker) windowsNodes() map[string]string {
	m := map[string]string{}
	for _, n := range x.in.Inventory.Nodes {
		if n.Labels["kubernetes.io/os"] == "windows" {
			m[n.Name] = n.Status.NodeInfo.KernelVersion
		}
	}
	for _, n := range x.Windows {
		m[n.Name] = n.WindowsBuild
	}
	return m
}

// hostProcess says whether p runs HostProcess containers: its pod
// security context says so, or every container's does. Such a pod is on
// the host's network (hostNetwork must be true), which Windows supports.
func hostProcess(p *intent.Pod) bool {
	if sc := p.Spec.SecurityContext; sc != nil && sc.WindowsOptions != nil && sc.WindowsOptions.HostProcess != nil {
		return *sc.WindowsOptions.HostProcess
	}
	if len(p.Spec.Containers) == 0 {
		return false
	}
	for _, c := range p.Spec.Containers {
		if sc := c.SecurityContext; sc == nil || sc.WindowsOptions == nil || sc.WindowsOptions.HostProcess == nil || !*sc.WindowsOptions.HostProcess {
			return false
		}
	}
	return true
}

func services(x *checker) {
	inv := x.in.Inventory
	if len(inv.Pods) == 0 {
		return // backends and pods are live state: without an inventory there is nothing to check
	}
	winNodes := x.windowsNodes()
	podsByNS := map[string][]*intent.Pod{}
	for i := range inv.Pods {
		p := &inv.Pods[i]
		if _, ok := winNodes[p.Spec.NodeName]; !ok {
			continue
		}
		podsByNS[p.Namespace] = append(podsByNS[p.Namespace], p)
		if p.Spec.HostNetwork && !hostProcess(p) {
			x.reportAt("host-network-pod", p.Spec.NodeName, p.Source.Pos, "spec.hostNetwork",
				"pod %s/%s on Windows node %s has hostNetwork: true, which Windows nodes support only for HostProcess containers (securityContext.windowsOptions.hostProcess: true)", p.Namespace, p.Name, p.Spec.NodeName)
		}
		if p.Spec.DNSPolicy == corev1.DNSClusterFirstWithHostNet {
			x.reportAt("dns-cluster-first-with-host-net", p.Spec.NodeName, p.Source.Pos, "spec.dnsPolicy",
				"pod %s/%s on Windows node %s has dnsPolicy ClusterFirstWithHostNet, which Windows nodes do not support; use ClusterFirst", p.Namespace, p.Name, p.Spec.NodeName)
		}
	}

	// Services: the intent's, then the inventory's that the intent lacks.
	seen := map[string]bool{}
	var svcs []*intent.Service
	for i := range x.in.Manifests.Services {
		s := &x.in.Manifests.Services[i]
		seen[s.Namespace+"/"+s.Name] = true
		svcs = append(svcs, s)
	}
	for i := range inv.Services {
		if s := &inv.Services[i]; !seen[s.Namespace+"/"+s.Name] {
			svcs = append(svcs, s)
		}
	}
	dsr := x.c.Windows.KubeProxy.DSR
	for _, s := range svcs {
		backends := windowsBackends(s, podsByNS[serviceNamespace(s)])
		if len(backends) == 0 {
			continue
		}
		name := serviceNamespace(s) + "/" + s.Name
		if len(backends) > maxServiceBackends && !dsr {
			x.reportAt("service-backends-64", "", s.Source.PosOf("spec", "selector"), "spec.selector",
				"Service %s has %d Windows backend pods; without kube-proxy DSR a Windows load balancer takes at most %d; enable windows.kubeProxy.dsr or split the Service",
				name, len(backends), maxServiceBackends)
		}
		if !dsr {
			for _, f := range []struct {
				field string
				value string
			}{{"externalTrafficPolicy", string(s.Spec.ExternalTrafficPolicy)}, {"internalTrafficPolicy", ptrString(s.Spec.InternalTrafficPolicy)}} {
				if f.value == "Local" {
					x.reportAt("service-local-traffic-policy", "", s.Source.PosOf("spec", f.field), "spec."+f.field,
						"Service %s has %s Local and Windows backends (%s): Windows needs kube-proxy DSR for it; enable windows.kubeProxy.dsr or use Cluster", name, f.field, podNames(backends))
				}
			}
		}
		if c := s.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			x.reportAt("session-affinity-timeout", "", s.Source.PosOf("spec", "sessionAffinityConfig", "clientIP", "timeoutSeconds"), "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
				"Service %s: Windows ignores the session affinity timeout (%ds) for its Windows backends", name, *c.ClientIP.TimeoutSeconds)
		}
		if s.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
			if old := olderBackends(backends, winNodes, buildAffinity); old != "" {
				x.reportAt("session-affinity-build", "", s.Source.PosOf("spec", "sessionAffinity"), "spec.sessionAffinity",
					"Service %s uses sessionAffinity ClientIP, which Windows supports from Windows Server 2022 (build 20348); backends run on older builds: %s", name, old)
			}
		}
		if s.Annotations["preserve-destination"] == "true" {
			pos := s.Source.PosOf("metadata", "annotations", "preserve-destination")
			if !dsr {
				x.reportAt("preserve-destination", "", pos, "metadata.annotations.preserve-destination",
					"Service %s sets preserve-destination, which needs kube-proxy DSR on Windows; enable windows.kubeProxy.dsr", name)
			}
			if old := olderBackends(backends, winNodes, build1903); old != "" {
				x.reportAt("preserve-destination", "", pos, "metadata.annotations.preserve-destination",
					"Service %s sets preserve-destination, which Windows supports from 1903 (18362); backends run on older builds: %s", name, old)
			}
		}
	}
}

func serviceNamespace(s *intent.Service) string {
	if s.Namespace == "" {
		return "default"
	}
	return s.Namespace
}

// windowsBackends returns the Windows pods a Service selects.
func windowsBackends(s *intent.Service, pods []*intent.Pod) []*intent.Pod {
	if len(s.Spec.Selector) == 0 {
		return nil
	}
	var out []*intent.Pod
	for _, p := range pods {
		match := true
		for k, v := range s.Spec.Selector {
			if p.Labels[k] != v {
				match = false
				break
			}
		}
		if match {
			out = append(out, p)
		}
	}
	return out
}

// olderBackends lists the backends whose node runs a build older than min
// (or an unknown build), as "pod on node (build)".
func olderBackends(pods []*intent.Pod, winNodes map[string]string, min Build) string {
	var out []string
	seen := map[string]bool{}
	for _, p := range pods {
		node := p.Spec.NodeName
		if seen[node] {
			continue
		}
		seen[node] = true
		b, err := ParseBuild(winNodes[node])
		if err == nil && !b.Less(min) {
			continue
		}
		build := winNodes[node]
		if build == "" {
			build = "unknown build"
		}
		out = append(out, fmt.Sprintf("node %s (%s)", node, build))
	}
	return strings.Join(out, ", ")
}

func podNames(pods []*intent.Pod) string {
	return shortList(pods, 3, func(p *intent.Pod) string { return p.Name })
}

func ptrString[T ~string](p *T) string {
	if p == nil {
		return ""
	}
	return string(*p)
}
