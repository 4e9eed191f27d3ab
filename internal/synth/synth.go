// Package synth writes large synthetic intents for benchmarks and tests:
// realistic in shape (a template per node kind, labels, per-pool node
// selectors), plain in content.
package synth

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Size is how large an intent to write.
type Size struct {
	Windows, Linux, Pools int
}

// Benchmark is the size the foundation issue measures: 1,000 Windows and
// 100 Linux nodes, 200 pools.
var Benchmark = Size{Windows: 1000, Linux: 100, Pools: 200}

// Scale is the size issue 16 measures: 4,500 Windows and 500 Linux nodes
// (5,000, Kubernetes' limit per cluster), every Linux node with a block.
var Scale = Size{Windows: 4500, Linux: 500, Pools: 200}

// Growth is the sizes of the growth table, in Benchmark's shape (Linux
// nodes a tenth of the Windows ones, 200 pools) at 1,100, 2,200, 4,400
// and 5,000 nodes: the first three are the Windows counts of the format-1
// figures (1,000, 2,000, 4,000), the last is Scale.
var Growth = []Size{
	Benchmark,
	{Windows: 2000, Linux: 200, Pools: 200},
	{Windows: 4000, Linux: 400, Pools: 200},
	Scale,
}

// Nodes is the number of nodes of s.
func (s Size) Nodes() int { return s.Windows + s.Linux }

// Write writes an intent of size s into dir: cluster.cue, pools.cue and
// nodes.cue, one package.
func Write(dir string, s Size) error {
	if s.Pools < 1 || s.Pools > 4096 {
		return fmt.Errorf("synth: %d pools: want 1 to 4096", s.Pools)
	}
	// A pool is a /20 of 64 /26 blocks, shared by its Windows and Linux
	// nodes; addresses are 250 a /24 in a /16.
	if per := (s.Windows+s.Pools-1)/s.Pools + (s.Linux+s.Pools-1)/s.Pools; per > 64 || s.Windows > 250*256 || s.Linux > 250*256 || s.Windows < 0 || s.Linux < 0 {
		return fmt.Errorf("synth: %d Windows and %d Linux nodes in %d pools: at most 64 nodes a pool", s.Windows, s.Linux, s.Pools)
	}
	files := map[string]string{}
	files["cluster.cue"] = `package bench

cluster: {
	name:       "bench"
	datastore:  "kubernetes"
	networking: "calico-vxlan"
	serviceCIDRs: ["10.96.0.0/12"]
	ipam: strictAffinity: true
	vxlan: {vni: 4096, port: 4789}
	windows: {networkName: "Calico", natExceptions: ["172.16.0.0/12"]}
}

// #win is the template of every Windows node.
#win: {
	os:        "windows"
	interface: "Ethernet"
	windows: build: "10.0.17763.1432"
	maxPods: 60
	...
}
`
	var b strings.Builder
	b.WriteString("package bench\n\ncluster: pools: {\n")
	for i := range s.Pools {
		// 200 /20 pools carved from 10.0.0.0/8 above the service range.
		fmt.Fprintf(&b, "\t\"pool-%04d\": {cidr: \"10.%d.%d.0/20\", blockSize: 26, natOutgoing: true, nodeSelector: \"pool == 'p%04d'\"}\n",
			i, 128+i/16, (i%16)*16, i)
	}
	b.WriteString("}\n")
	files["pools.cue"] = b.String()

	b.Reset()
	b.WriteString("package bench\n\ncluster: nodes: {\n")
	for i := range s.Windows {
		fmt.Fprintf(&b, "\t\"win-%04d\": #win & {address: \"172.20.%d.%d/16\", labels: {pool: \"p%04d\", zone: \"z%d\"}}\n",
			i, i/250, i%250+2, i%s.Pools, i%3)
	}
	// Linux nodes share the pools; each claims a block from the top of its
	// pool down (the last block for the first round of pools, the one
	// below for the next), as a BlockAffinity would show, so that every
	// Windows plan routes to every Linux node too. Windows nodes allocate
	// from the bottom.
	for i := range s.Linux {
		pool, round := i%s.Pools, i/s.Pools
		block := 63 - round // of the pool's 64 /26 blocks
		fmt.Fprintf(&b, "\t\"linux-%04d\": {os: \"linux\", address: \"172.21.%d.%d/16\", labels: {pool: \"p%04d\", zone: \"z%d\"}, blocks: [\"10.%d.%d.%d/26\"]}\n",
			i, i/250, i%250+2, pool, i%3, 128+pool/16, (pool%16)*16+block/4, block%4*64)
	}
	b.WriteString("}\n")
	files["nodes.cue"] = b.String()

	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// WriteACLBudget writes dir/intent and dir/inventory.yaml: a client pod on
// the Windows node win-1 whose egress rule to a named port maps to a
// different number on each of backends pods (on linux-1), one ACL per
// number. Over 1,000 backends its ACL list passes the budget the plan
// compiler warns about (policy-acl-budget).
func WriteACLBudget(dir string, backends int) error {
	var inv strings.Builder
	inv.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	inv.WriteString("- {apiVersion: v1, kind: Pod, metadata: {name: client, namespace: app, labels: {role: client}}, spec: {nodeName: win-1, containers: [{name: c, image: i}]}, status: {podIP: 192.168.0.10}}\n")
	for i := range backends {
		fmt.Fprintf(&inv, "- {apiVersion: v1, kind: Pod, metadata: {name: b%d, namespace: app, labels: {role: backend}}, spec: {nodeName: linux-1, containers: [{name: c, image: i, ports: [{name: api, containerPort: %d}]}]}, status: {podIP: 10.%d.%d.%d}}\n",
			i, 20000+i, 100+i/65536, i/256%256, i%256)
	}
	files := map[string]string{
		"intent/cluster.cue": `package cluster

cluster: {
	name:       "budget"
	datastore:  "kubernetes"
	networking: "calico-vxlan"
	serviceCIDRs: ["10.96.0.0/12"]
	ipam: strictAffinity: true
	pools: default: cidr: "192.168.0.0/16"
	nodes: {
		"linux-1": {os: "linux", address: "10.240.0.10/24"}
		"win-1": {os: "windows", address: "10.240.0.21/24", maxPods: 60, windows: build: "10.0.17763.1432"}
	}
}
`,
		"intent/policy.yaml": `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: to-api, namespace: app}
spec:
  podSelector: {matchLabels: {role: client}}
  policyTypes: [Egress]
  egress:
  - to: [{podSelector: {matchLabels: {role: backend}}}]
    ports: [{port: api}]
`,
		"inventory.yaml": inv.String(),
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}
