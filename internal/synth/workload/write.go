package workload

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// WriteIntent writes w as an intent directory dir: cluster.cue with one
// node per PodsPerNode pods (node 0 the Windows node win-0000, the others
// Linux, each with the /24 block its pods' addresses are in),
// policies.yaml, and the inventory at inv (a v1 List of the namespaces and
// pods, in JSON, which YAML reads). The same w gives the same bytes.
func WriteIntent(w *Workload, dir, inv string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := netip.MustParseAddr("10.128.0.0").As4()
	nodeOf := func(a netip.Addr) int {
		v, b := a.As4(), base
		return (int(v[1])-int(b[1]))<<8 | int(v[2])
	}
	nodes := 0
	for _, p := range w.Pods {
		nodes = max(nodes, nodeOf(p.IP)+1)
	}
	var c strings.Builder
	c.WriteString(`package bench

cluster: {
	name:       "policy-bench"
	datastore:  "kubernetes"
	networking: "calico-vxlan"
	serviceCIDRs: ["10.96.0.0/12"]
	ipam: strictAffinity: true
	vxlan: {vni: 4096, port: 4789}
	windows: networkName: "Calico"
	pools: default: {cidr: "10.128.0.0/14", blockSize: 24, natOutgoing: true}
	nodes: {
		"win-0000": {os: "windows", address: "172.20.0.2/16", interface: "Ethernet", maxPods: 250, windows: build: "10.0.17763.1432", blocks: ["10.128.0.0/24"]}
`)
	for n := 1; n < nodes; n++ {
		fmt.Fprintf(&c, "\t\t\"linux-%04d\": {os: \"linux\", address: \"172.21.%d.%d/16\", blocks: [\"10.%d.%d.0/24\"]}\n",
			n, n/250, n%250+2, 128+n>>8, n&255)
	}
	c.WriteString("\t}\n}\n")
	if err := os.WriteFile(filepath.Join(dir, "cluster.cue"), []byte(c.String()), 0o644); err != nil {
		return err
	}

	var docs []string
	var err error
	add := func(v any) {
		j, e := json.Marshal(v)
		if e != nil && err == nil {
			err = e
		}
		docs = append(docs, string(j))
	}
	for _, t := range w.Manifests.Tiers {
		t.APIVersion, t.Kind = "projectcalico.org/v3", "Tier"
		add(t)
	}
	for _, np := range w.Manifests.NetworkPolicies {
		np.NetworkPolicy.APIVersion, np.NetworkPolicy.Kind = "networking.k8s.io/v1", "NetworkPolicy"
		np.NetworkPolicy.Name = np.Name
		add(np.NetworkPolicy)
	}
	for _, cp := range w.Manifests.CalicoPolicies {
		cp.APIVersion = "projectcalico.org/v3"
		if cp.Kind == "" {
			cp.Kind = map[bool]string{true: "GlobalNetworkPolicy", false: "NetworkPolicy"}[cp.Global]
		}
		add(cp)
	}
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "policies.yaml"), []byte(strings.Join(docs, "\n---\n")+"\n"), 0o644); err != nil {
		return err
	}

	type port struct {
		Name          string `json:"name"`
		ContainerPort uint16 `json:"containerPort"`
		Protocol      string `json:"protocol"`
	}
	var items []any
	for _, ns := range slices.Sorted(maps.Keys(w.Namespaces)) {
		items = append(items, map[string]any{"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": ns, "labels": w.Namespaces[ns]}})
	}
	for _, p := range w.Pods {
		var ports []port
		for _, np := range p.Ports {
			ports = append(ports, port{np.Name, np.Port, map[int]string{6: "TCP", 17: "UDP"}[np.Protocol]})
		}
		node := fmt.Sprintf("linux-%04d", nodeOf(p.IP))
		if nodeOf(p.IP) == 0 {
			node = "win-0000"
		}
		items = append(items, map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": p.Name, "namespace": p.Namespace, "labels": p.Labels},
			"spec": map[string]any{"nodeName": node, "serviceAccountName": p.ServiceAccount,
				"containers": []any{map[string]any{"name": "c", "image": "i", "ports": ports}}},
			"status": map[string]any{"podIP": p.IP.String()}})
	}
	list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		return err
	}
	return os.WriteFile(inv, append(list, '\n'), 0o644)
}
