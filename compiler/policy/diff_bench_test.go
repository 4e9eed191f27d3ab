package policy_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/access"
	"github.com/hnsplan/hnsplan/compiler/diff"
)

// BenchmarkDiffAccess is `hnsplan diff BASE HEAD --inventory` on the
// policy benchmark's cluster (bigWorkload: 2,000 policies, 30,000 pods in
// 300 namespaces, 110 a node; node 0's pods on the Windows node win-0000,
// every other node Linux) written as intents, HEAD with one policy's port
// changed. An op builds both sides as the CLI does, diffs the
// plans and renders the markdown comment; "access" adds the access delta
// (both access models and access.Diff). The figure: access ≤ 2×
// plain, and ≤ 3 s.
func BenchmarkDiffAccess(b *testing.B) {
	dir := b.TempDir()
	w := generateWorkload(bigWorkload)
	inv := filepath.Join(dir, "inventory.yaml")
	writeWorkloadIntent(b, w, filepath.Join(dir, "base"), inv)
	changed := changeOnePort(b, w)
	writeWorkloadIntent(b, w, filepath.Join(dir, "head"), inv)
	b.Logf("HEAD changes the port of %s", changed)
	for _, withAccess := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "access"}[withAccess]
		b.Run(name, func(b *testing.B) {
			var res *diff.Result
			var compile, delta time.Duration
			for b.Loop() {
				var c, d time.Duration
				res, c, d = diffIntents(b, filepath.Join(dir, "base"), filepath.Join(dir, "head"), inv, withAccess)
				compile, delta = compile+c, delta+d
			}
			b.ReportMetric(float64(compile.Milliseconds())/float64(b.N), "load+compile-ms")
			if withAccess {
				if res.Access == nil {
					b.Fatal("no access delta")
				}
				b.ReportMetric(float64(delta.Milliseconds())/float64(b.N), "access-ms")
				b.ReportMetric(float64(len(res.Access.Changes)), "access-changes")
				b.ReportMetric(float64(res.Access.Endpoints), "endpoints-evaluated")
			}
		})
	}
}

// diffIntents is what `hnsplan diff` does with two intent directories:
// compiler.BuildEach builds both sides (the inventory read once, the two
// compiles at once), diff.PlansWith compares the plans, and the access
// delta compares the two access models. It returns the time spent
// building both sides, and in the access delta (both models and
// access.Diff).
func diffIntents(tb testing.TB, base, head, inv string, withAccess bool) (*diff.Result, time.Duration, time.Duration) {
	t0 := time.Now()
	built := compiler.BuildEach([]string{base, head}, compiler.Options{Inventory: []string{inv}})
	t1 := time.Now()
	for i, b := range built {
		if b.Err != nil {
			tb.Fatal(b.Err)
		}
		if b.Findings.HasErrors() || !b.Result.Compiled() {
			msg := b.Findings.Summary()
			for i, f := range b.Findings {
				if i == 5 {
					break
				}
				msg += "\n" + f.String()
			}
			tb.Fatalf("%s: %s", []string{base, head}[i], msg)
		}
	}
	bs, hs := built[0].Result, built[1].Result
	res := diff.PlansWith(bs.Plans, hs.Plans, diff.Options{BaseDir: base, HeadDir: head})
	t2 := time.Now()
	var delta time.Duration
	if withAccess {
		bm, err := access.NewModel(bs.Intent, bs.Plans, bs.Program, base)
		if err != nil {
			tb.Fatal(err)
		}
		hm, err := access.NewModel(hs.Intent, hs.Plans, hs.Program, head)
		if err != nil {
			tb.Fatal(err)
		}
		if res.Access, err = access.Diff(bm, hm); err != nil {
			tb.Fatal(err)
		}
		delta = time.Since(t2)
	}
	_ = res.Markdown()
	return res, t1.Sub(t0), delta
}

// changeOnePort moves the first numeric port of the first Kubernetes
// policy that has one to the next port, and names the policy.
func changeOnePort(tb testing.TB, w *workload) string {
	for i := range w.manifests.NetworkPolicies {
		np := &w.manifests.NetworkPolicies[i]
		if !strings.HasPrefix(np.Name, "allow-app-") {
			continue
		}
		for j := range np.Spec.Ingress {
			for k := range np.Spec.Ingress[j].Ports {
				p := np.Spec.Ingress[j].Ports[k].Port
				if p != nil && p.Type == intstr.Int {
					np.Spec.Ingress[j].Ports[k].Port = ptr(intstr.FromInt32(p.IntVal + 1))
					return fmt.Sprintf("%s/%s (ingress[%d].ports[%d]: %d -> %d)", np.Namespace, np.Name, j, k, p.IntVal, p.IntVal+1)
				}
			}
		}
	}
	tb.Fatal("no policy with a numeric ingress port")
	return ""
}

// writeWorkloadIntent writes w as an intent directory: cluster.cue with
// one node per podsPerNode pods (node 0 the Windows node win-0000, the
// others Linux, each with the /24 block its pods' addresses are in),
// policies.yaml, and the inventory at inv (JSON documents, which YAML
// reads).
func writeWorkloadIntent(tb testing.TB, w *workload, dir, inv string) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	base := netip.MustParseAddr("10.128.0.0").As4()
	nodeOf := func(a netip.Addr) int {
		v, b := a.As4(), base
		return (int(v[1])-int(b[1]))<<8 | int(v[2])
	}
	nodes := 0
	for _, p := range w.pods {
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
	write(tb, filepath.Join(dir, "cluster.cue"), c.String())

	var docs []string
	add := func(v any) {
		j, err := json.Marshal(v)
		if err != nil {
			tb.Fatal(err)
		}
		docs = append(docs, string(j))
	}
	for _, t := range w.manifests.Tiers {
		t.APIVersion, t.Kind = "projectcalico.org/v3", "Tier"
		add(t)
	}
	for _, np := range w.manifests.NetworkPolicies {
		np.NetworkPolicy.APIVersion, np.NetworkPolicy.Kind = "networking.k8s.io/v1", "NetworkPolicy"
		np.NetworkPolicy.Name = np.Name
		add(np.NetworkPolicy)
	}
	for _, cp := range w.manifests.CalicoPolicies {
		cp.APIVersion = "projectcalico.org/v3"
		if cp.Kind == "" {
			cp.Kind = map[bool]string{true: "GlobalNetworkPolicy", false: "NetworkPolicy"}[cp.Global]
		}
		add(cp)
	}
	write(tb, filepath.Join(dir, "policies.yaml"), strings.Join(docs, "\n---\n")+"\n")

	type port struct {
		Name          string `json:"name"`
		ContainerPort uint16 `json:"containerPort"`
		Protocol      string `json:"protocol"`
	}
	var items []any
	for ns, labels := range w.namespaces {
		items = append(items, map[string]any{"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": ns, "labels": labels}})
	}
	for _, p := range w.pods {
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
		tb.Fatal(err)
	}
	write(tb, inv, string(list)+"\n")
}

func write(tb testing.TB, path, text string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		tb.Fatal(err)
	}
}
