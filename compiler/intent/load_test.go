package intent

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const minimal = `package c

cluster: {
	name:       "demo"
	datastore:  "kubernetes"
	networking: "calico-vxlan"
	serviceCIDRs: ["10.96.0.0/12"]
	ipam: strictAffinity: true
	vxlan: {}
	pools: default: cidr: "192.168.0.0/16"
	nodes: {
		"win-1": {os: "windows", address: "172.20.41.103/19", windows: build: "10.0.17763.1432"}
		"linux-1": {os: "linux", address: "192.168.171.136/24"}
	}
}
`

func TestLoadDefaults(t *testing.T) {
	dir := writeDir(t, map[string]string{"c.cue": minimal})
	in, findings, err := Load(dir, Options{})
	if err != nil || len(findings) != 0 {
		t.Fatalf("Load: %v %v", err, findings)
	}
	c := in.Cluster
	want := &Cluster{
		Name: "demo", Datastore: "kubernetes", Networking: CalicoVXLAN,
		ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
		DNSDomain:    "cluster.local",
		IPAM:         IPAM{Type: "calico", StrictAffinity: true},
		VXLAN:        &VXLAN{VNI: 4096, Port: 4789},
		Windows: Windows{NetworkName: "Calico", NetworkOwner: OwnerHnsplan, VXLANMACPrefix: "0E-2A", UseSingleNetwork: true, Replacement: "drain",
			NATExceptions: []netip.Prefix{}, KubeProxy: KubeProxy{HostnameOverride: true}},
		Pools: []Pool{{Name: "default", CIDR: netip.MustParsePrefix("192.168.0.0/16"), BlockSize: 26,
			Encapsulation: "VXLAN", NATOutgoing: true, NodeSelector: "all()"}},
		Nodes: []Node{
			{Name: "linux-1", OS: "linux", Addr: netip.MustParseAddr("192.168.171.136"),
				Subnet: netip.MustParsePrefix("192.168.171.0/24"), Blocks: []netip.Prefix{}},
			{Name: "win-1", OS: "windows", Addr: netip.MustParseAddr("172.20.41.103"),
				Subnet: netip.MustParsePrefix("172.20.32.0/19"), WindowsBuild: "10.0.17763.1432", Blocks: []netip.Prefix{}},
		},
	}
	if diff := cmp.Diff(want, c, cmpopts.IgnoreUnexported(Cluster{}), cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})); diff != "" {
		t.Errorf("cluster (-want +got):\n%s", diff)
	}
	// A field's position is its label's; a default takes the position of the
	// nearest field the user wrote.
	base := filepath.Base(dir)
	for _, tt := range []struct {
		path []any
		want string
	}{
		{[]any{"pools", "default", "cidr"}, "c.cue:10:18"},
		{[]any{"pools", "default", "blockSize"}, "c.cue:10:9"},
		{[]any{"vxlan", "vni"}, "c.cue:9:2"},
		{[]any{"nodes", "win-1", "address"}, "c.cue:12:28"},
	} {
		got := c.Pos(tt.path...)
		if !strings.HasSuffix(got.String(), base+"/"+tt.want) {
			t.Errorf("Pos(%v) = %s, want …%s", tt.path, got, tt.want)
		}
	}
}

// TestLoadAllErrors checks that errors in many nodes are all reported in
// one run, although CUE's Validate stops inside a struct at its first.
func TestLoadAllErrors(t *testing.T) {
	var b strings.Builder
	b.WriteString(strings.Replace(minimal, "nodes: {", "nodes: {\n", 1))
	b.WriteString("cluster: nodes: {\n")
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		b.WriteString(`	"bad-` + n + `": {os: "Windows", addres: "10.0.0.1/24", maxPods: "many"}` + "\n")
	}
	b.WriteString("}\n")
	dir := writeDir(t, map[string]string{"c.cue": b.String()})
	_, findings, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	perNode := map[string]int{}
	for _, f := range findings {
		for _, n := range []string{"a", "b", "c", "d", "e"} {
			if strings.Contains(f.Path, `"bad-`+n+`"`) {
				perNode[n]++
			}
		}
		if !f.Pos.IsValid() || f.Pos.Line == 0 {
			t.Errorf("finding without a position: %s", f)
		}
	}
	// Each node: os, the unknown field, the missing address, maxPods.
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		if perNode[n] != 4 {
			t.Errorf("node bad-%s: %d findings, want 4:\n%s", n, perNode[n], listString(findings))
		}
	}
}

func listString(l diag.List) string {
	var b strings.Builder
	_ = l.WriteText(&b, false)
	return b.String()
}

// TestLoadDeterministic loads the same intent twice: the same findings in
// the same order, and the same cluster.
func TestLoadDeterministic(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"c.cue": strings.Replace(minimal, `cidr: "192.168.0.0/16"`, `cidr: "192.168.0.1/16", encapsulation: "vxlan"`, 1) +
			"cluster: pools: {z: cidr: \"10.1.0.0/16\", a: cidr: \"10.2.0.0/16\", m: {cidr: \"10.3.0.0/16\", bogus: 1}}\n",
		"p.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: a, bogus: 1}\n---\napiVersion: x/v1\nkind: Y\n",
	})
	in1, f1, _ := Load(dir, Options{})
	in2, f2, _ := Load(dir, Options{})
	if len(f1) < 4 {
		t.Fatalf("want at least 4 findings, got:\n%s", listString(f1))
	}
	// The Go-side checks run on what the user wrote even when the schema
	// fails, so host bits are reported in the same run as the schema errors.
	rules := map[string]bool{}
	for _, f := range f1 {
		rules[f.Rule] = true
	}
	for _, r := range []string{RuleSchema, RuleHostBits, RuleManifest} {
		if !rules[r] {
			t.Errorf("no %s finding in:\n%s", r, listString(f1))
		}
	}
	if diff := cmp.Diff(f1, f2); diff != "" {
		t.Errorf("findings differ between runs:\n%s", diff)
	}
	if diff := cmp.Diff(in1.Manifests, in2.Manifests, cmpopts.IgnoreUnexported(Manifests{}, Source{})); diff != "" {
		t.Errorf("manifests differ between runs:\n%s", diff)
	}
}

func TestLoadInventoryObjects(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"inv.yaml": `apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: n}, spec: {nodeName: win-1}, status: {podIP: 192.168.1.4}}
- {apiVersion: v1, kind: Namespace, metadata: {name: n, labels: {team: a}}}
- {apiVersion: v1, kind: Service, metadata: {name: s, namespace: n}, spec: {clusterIP: 10.96.0.10}}
- {apiVersion: v1, kind: Node, metadata: {name: win-1}, spec: {podCIDR: 10.244.1.0/24}}
- {apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, metadata: {name: s-1, namespace: n}, addressType: IPv4, endpoints: [{addresses: [192.168.1.4]}]}
- {apiVersion: projectcalico.org/v3, kind: BlockAffinity, metadata: {name: b}, spec: {node: win-1, cidr: 192.168.1.0/26, state: confirmed, deleted: true}}
`,
	})
	var errs diag.List
	inv, err := LoadInventory([]string{filepath.Join(dir, "inv.yaml")}, &errs)
	if err != nil || len(errs) != 0 {
		t.Fatalf("LoadInventory: %v %v", err, errs)
	}
	got := []int{len(inv.Pods), len(inv.Namespaces), len(inv.Services), len(inv.Nodes), len(inv.EndpointSlices), len(inv.BlockAffinities)}
	if diff := cmp.Diff([]int{1, 1, 1, 1, 1, 1}, got); diff != "" {
		t.Errorf("object counts (-want +got):\n%s", diff)
	}
	if ba := inv.BlockAffinities[0]; ba.CIDR != netip.MustParsePrefix("192.168.1.0/26") || !ba.Deleted || ba.Node != "win-1" {
		t.Errorf("block affinity = %+v", ba)
	}
	if inv.Pods[0].Status.PodIP != "192.168.1.4" {
		t.Errorf("pod IP = %q", inv.Pods[0].Status.PodIP)
	}
}
