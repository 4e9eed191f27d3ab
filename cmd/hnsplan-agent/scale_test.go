package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/internal/synth"
)

// TestApplyOnceFreshNodeCalls: apply --once of a fresh node's plan in a
// 1,100-node cluster (synth.Benchmark: 1,000 Windows and 100 Linux nodes,
// so 1,099 routes) makes at most 20 mutating HNS calls: the network, the
// routes in batches, the host endpoint. Before it ran the agent's pass it
// made one call per route, 1,101 in all. A second run makes none.
func TestApplyOnceFreshNodeCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a 1,100-node intent")
	}
	dir := t.TempDir()
	intentDir, plans := filepath.Join(dir, "intent"), filepath.Join(dir, "plans")
	if err := os.MkdirAll(intentDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := synth.Write(intentDir, synth.Benchmark); err != nil {
		t.Fatal(err)
	}
	// Every node's VXLAN tunnel MAC, as its Node's annotation shows it:
	// without them each route would wait for the live cluster.
	first, _, err := compiler.Build(intentDir, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var inv strings.Builder
	inv.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	for i, n := range first.Intent.Cluster.Nodes {
		fmt.Fprintf(&inv, "- {apiVersion: v1, kind: Node, metadata: {name: %s, annotations: {projectcalico.org/VXLANTunnelMACAddr: \"0e:2a:00:00:%02x:%02x\"}}}\n", n.Name, i>>8, i&0xff)
	}
	invFile := filepath.Join(dir, "inventory.yaml")
	if err := os.WriteFile(invFile, []byte(inv.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	res, findings, err := compiler.Build(intentDir, compiler.Options{Inventory: []string{invFile}})
	if err != nil || findings.HasErrors() || !res.Compiled() {
		t.Fatalf("compile: %v %v", err, findings)
	}
	if _, err := compiler.WritePlans(plans, res.Intent.Cluster.Name, res.Plans, nil); err != nil {
		t.Fatal(err)
	}
	p := res.Plans[0]
	routes := 0
	for _, r := range p.RemoteSubnetRoutes() {
		if r.DistributedRouterMacAddress != "" {
			routes++
		}
	}
	if routes < 1000 {
		t.Fatalf("the plan has %d routes with their tunnel MAC, want a node of a 1,100-node cluster", routes)
	}
	args := []string{"apply", "--once", "--plan", filepath.Join(plans, p.Node+".json"), "--node", p.Node, "--hns", "mem:" + filepath.Join(dir, "hns.json")}
	calls := regexp.MustCompile(`(?m)^HNS calls: (\d+) mutating`)
	for i, limit := range []int{20, 0} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != exitOK {
			t.Fatalf("apply %d: exit %d\n%s", i+1, code, stderr.String())
		}
		m := calls.FindStringSubmatch(stdout.String())
		if m == nil {
			t.Fatalf("apply %d printed no call count:\n%s", i+1, stdout.String())
		}
		n, _ := strconv.Atoi(m[1])
		if n > limit {
			t.Errorf("apply %d of a plan with %d routes made %d mutating HNS calls, want at most %d", i+1, routes, n, limit)
		}
		t.Logf("apply %d: %d routes, %d mutating calls", i+1, routes, n)
	}
}
