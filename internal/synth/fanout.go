package synth

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A FanOut is a hostile intent whose manifests are small to write and
// large to read: YAML aliases of rules, lists and maps (merge keys),
// chains of them, and peers, ports, rules and policies written out past
// what hnsplan reads. Each must be refused before any policy work, with
// the file and line of what passed the limit (TestFanOutRefused), fast
// and in little memory (measured with /usr/bin/time hnsplan vet).
type FanOut struct {
	Name  string
	Files map[string]string // name: content, beside the intent's cluster.cue
	// Want is a regular expression the error must match, from its
	// position on: "policy.yaml:12:5: error[manifest]: ...".
	Want string
}

// fanOutCluster is the CUE of every FanOut intent: two nodes, one pool.
const fanOutCluster = `package cluster

cluster: {
	name:       "fanout"
	datastore:  "kubernetes"
	networking: "calico-vxlan"
	serviceCIDRs: ["10.96.0.0/12"]
	ipam: strictAffinity: true
	pools: default: cidr: "192.168.0.0/16"
	nodes: {
		"linux-1": {os: "linux", address: "10.240.0.10/24"}
		"win-1": {os: "windows", address: "10.240.0.21/24", maxPods: 60, windows: build: "10.0.20348.2227"}
	}
}
`

const k8sPolicy = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: %s, namespace: default}\nspec:\n  podSelector: {}\n"

// cidr is the i-th /32 of 10.0.0.0/8.
func cidr(i int) string { return fmt.Sprintf("10.%d.%d.%d/32", i>>16&255, i>>8&255, i&255) }

// peers writes n ipBlock peers, each on its own line, indented.
func peers(b *strings.Builder, indent string, from, n int) {
	for i := range n {
		fmt.Fprintf(b, "%s- ipBlock: {cidr: %s}\n", indent, cidr(from+i))
	}
}

// FanOuts are the cases, each with the limit it passes. The first is the
// fault probe's: a 57 KB NetworkPolicy of one anchored rule of 1,000
// ipBlock peers and 3,000 aliases of it, which took vet 120 s and 5 GiB.
func FanOuts() []FanOut {
	var out []FanOut
	add := func(name, want string, files map[string]string) {
		out = append(out, FanOut{Name: name, Files: files, Want: want})
	}
	var b strings.Builder

	// 1. Rule aliases, as the probe wrote them.
	b.Reset()
	fmt.Fprintf(&b, k8sPolicy, "rule-aliases")
	b.WriteString("  ingress:\n  - &r0\n    from:\n")
	peers(&b, "    ", 0, 1000)
	b.WriteString(strings.Repeat("  - *r0\n", 3000))
	add("rule-aliases", `policy\.yaml:1:1: error\[manifest\]: the document's YAML aliases expand it past [0-9,]+ values`, map[string]string{"policy.yaml": b.String()})

	// 2. Fewer rule aliases: within the alias bound, past the peers.
	b.Reset()
	fmt.Fprintf(&b, k8sPolicy, "few-rule-aliases")
	b.WriteString("  ingress:\n  - &r0\n    from:\n")
	peers(&b, "    ", 0, 1000)
	b.WriteString(strings.Repeat("  - *r0\n", 15))
	add("few-rule-aliases", `policy\.yaml:1018:5: error\[manifest\]: spec: the NetworkPolicy has more than 10,000 peers`, map[string]string{"policy.yaml": b.String()})

	// 3. List aliases: one anchored list of peers, the from of many rules.
	b.Reset()
	fmt.Fprintf(&b, k8sPolicy, "list-aliases")
	b.WriteString("  ingress:\n  - from: &l\n")
	peers(&b, "    ", 0, 2000)
	b.WriteString(strings.Repeat("  - from: *l\n", 9))
	add("list-aliases", `policy\.yaml:2012:5: error\[manifest\]: spec: the NetworkPolicy has more than 10,000 peers`, map[string]string{"policy.yaml": b.String()})

	// 4. An alias chain: each list ten aliases of the one before.
	b.Reset()
	b.WriteString("a0: &a0 [10.0.0.0/8, 10.0.0.0/8, 10.0.0.0/8, 10.0.0.0/8, 10.0.0.0/8, 10.0.0.0/8, 10.0.0.0/8, 10.0.0.0/8, 10.0.0.0/8, 10.0.0.0/8]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10), ", "))
	}
	chain := "apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\nmetadata:\n  name: chain\n  annotations:\n" + indentLines(b.String(), "    ") +
		"spec:\n  ingress:\n  - action: Allow\n    source: {nets: *a8}\n"
	add("alias-chain", `policy\.yaml:1:1: error\[manifest\]: the document's YAML aliases expand it past`, map[string]string{"policy.yaml": chain})

	// 5. Merge keys: each map merges ten of the one before.
	b.Reset()
	b.WriteString("m0: &m0 {k0: v, k1: v, k2: v, k3: v, k4: v, k5: v, k6: v, k7: v, k8: v, k9: v}\n")
	for i := 1; i < 8; i++ {
		fmt.Fprintf(&b, "m%d: &m%d {<<: [%s]}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*m%d, ", i-1), 10), ", "))
	}
	merge := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: merge\n  annotations:\n" + indentLines(b.String(), "    ") + "  labels:\n    <<: *m7\n"
	add("merge-keys", `namespace\.yaml:1:1: error\[manifest\]: the document's YAML aliases expand it past`, map[string]string{"namespace.yaml": merge})

	// 6. Peers written out, no alias: one rule of 10,001.
	b.Reset()
	fmt.Fprintf(&b, k8sPolicy, "peers")
	b.WriteString("  egress:\n  - to:\n")
	peers(&b, "    ", 0, 10_001)
	b.WriteString("    ports: [{port: 80}]\n")
	add("peers-written", `policy\.yaml:7:5: error\[manifest\]: spec: the NetworkPolicy has more than 10,000 peers`, map[string]string{"policy.yaml": b.String()})

	// 7. Calico nets: a GlobalNetworkPolicy's rules of 2,000 source nets.
	b.Reset()
	b.WriteString("apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\nmetadata: {name: nets}\nspec:\n  ingress:\n")
	for r := range 6 {
		b.WriteString("  - action: Allow\n    source:\n      nets:\n")
		for i := range 2000 {
			fmt.Fprintf(&b, "      - %s\n", cidr(r*2000+i))
		}
	}
	add("calico-nets", `policy\.yaml:10021:5: error\[manifest\]: spec: the GlobalNetworkPolicy has more than 10,000 peers`, map[string]string{"policy.yaml": b.String()})

	// 8. Rules written out: 1,001 of them.
	b.Reset()
	fmt.Fprintf(&b, k8sPolicy, "rules")
	b.WriteString("  ingress:\n")
	for i := range 1001 {
		fmt.Fprintf(&b, "  - from: [{ipBlock: {cidr: %s}}]\n", cidr(i))
	}
	add("rules-written", `policy\.yaml:7:3: error\[manifest\]: spec: the NetworkPolicy has more than 1,000 rules`, map[string]string{"policy.yaml": b.String()})

	// 9. Ports written out: 10,001 in one rule.
	b.Reset()
	fmt.Fprintf(&b, k8sPolicy, "ports")
	b.WriteString("  ingress:\n  - ports:\n")
	for i := range 10_001 {
		fmt.Fprintf(&b, "    - {port: %d}\n", 1+i%65535)
	}
	add("ports-written", `policy\.yaml:7:5: error\[manifest\]: spec: the NetworkPolicy has more than 10,000 ports`, map[string]string{"policy.yaml": b.String()})

	// 10. Many policies, each within its limits, past the intent's
	// peers in all: 11 files of 9,500 peers.
	files := map[string]string{}
	for f := range 11 {
		b.Reset()
		fmt.Fprintf(&b, k8sPolicy, fmt.Sprintf("many-%02d", f))
		b.WriteString("  ingress:\n  - from:\n")
		peers(&b, "    ", f*9500, 9500)
		files[fmt.Sprintf("policy-%02d.yaml", f)] = b.String()
	}
	add("many-policies", `policy-10\.yaml:1:1: error\[manifest\]: spec: with this NetworkPolicy the intent's policies hold more than 100,000 peers in all`, files)

	// 11. One dense file: a flow list of more values than one file may
	// hold, refused before it is parsed (the parser's tree is ~270 bytes
	// a value: 16 MiB of "a," took 2.1 GiB).
	dense := func(name string, n int) string {
		return "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + name + "}\nspec:\n  finalizers: [" + strings.TrimSuffix(strings.Repeat("a,", n), ",") + "]\n"
	}
	add("dense-file", `namespace\.yaml:5: error\[manifest\]: the file holds more than 200,000 YAML values by line 5`, map[string]string{"namespace.yaml": dense("dense", 300_000)})

	// 12. Many files, each within the file's bound, past the intent's.
	files = map[string]string{}
	for f := range 5 {
		files[fmt.Sprintf("ns-%d.yaml", f)] = dense(fmt.Sprintf("ns-%d", f), 190_000)
	}
	add("many-files", `ns-3\.yaml:1:1: error\[manifest\]: with this document the intent's manifests hold more than 700,000 YAML values in all`, files)
	return out
}

func indentLines(s, indent string) string {
	lines := strings.SplitAfter(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = indent + l
	}
	return strings.Join(lines, "") + "\n"
}

// WriteFanOut writes the intent of c into dir: cluster.cue and its files.
func WriteFanOut(dir string, c FanOut) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "cluster.cue"), []byte(fanOutCluster), 0o644); err != nil {
		return err
	}
	for name, data := range c.Files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}
