package compiler_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/intent"
)

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func encodeAll(t *testing.T, res *compiler.Result) map[string][]byte {
	t.Helper()
	files, err := compiler.EncodePlans(res.Plans)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		out[f.Name] = f.Data
	}
	return out
}

const clusterHead = `package c

cluster: {
	name:       "demo"
	datastore:  "kubernetes"
	networking: "calico-vxlan"
	serviceCIDRs: ["10.96.0.0/12", "10.112.0.0/12"]
	ipam: strictAffinity: true
	windows: natExceptions: ["172.16.0.0/12", "10.250.0.0/16"]
}
`

func node(name string, i int) string {
	os := "windows"
	extra := `, maxPods: 60, windows: build: "10.0.17763.1432"`
	if strings.HasPrefix(name, "linux") {
		os, extra = "linux", ""
	}
	return fmt.Sprintf("cluster: nodes: %q: {os: %q, address: \"10.240.0.%d/24\"%s}\n", name, os, i, extra)
}

// TestDeterministic: compiling twice, and compiling the same intent split
// over files differently and written in another order, gives the same bytes.
func TestDeterministic(t *testing.T) {
	nodes := []string{"linux-1", "win-c", "win-a", "win-b"}
	pools := "cluster: pools: {b: {cidr: \"192.168.128.0/17\", nodeSelector: \"zone == 'b'\"}, a: cidr: \"192.168.0.0/17\"}\n"

	one := t.TempDir()
	var all strings.Builder
	all.WriteString(clusterHead + pools)
	for i, n := range nodes {
		all.WriteString(node(n, 10+i))
	}
	write(t, one, map[string]string{"all.cue": all.String()})

	split := t.TempDir()
	files := map[string]string{"z-cluster.cue": clusterHead, "m-pools.cue": "package c\n" + pools}
	for i := len(nodes) - 1; i >= 0; i-- { // reverse order, one file each
		files[fmt.Sprintf("%d-node.cue", i)] = "package c\n" + node(nodes[i], 10+i)
	}
	write(t, split, files)

	r1, _ := compileDir(t, one)
	r2, _ := compileDir(t, one)
	r3, _ := compileDir(t, split)
	a, b, c := encodeAll(t, r1), encodeAll(t, r2), encodeAll(t, r3)
	if len(a) != 3 {
		t.Fatalf("%d plans, want 3", len(a))
	}
	for name, data := range a {
		if !bytes.Equal(data, b[name]) {
			t.Errorf("%s differs between two compilations", name)
		}
		if !bytes.Equal(data, c[name]) {
			t.Errorf("%s differs when the intent is split and reordered", name)
		}
	}
}

// TestLockStability: once locked, adding a node (even one that sorts
// first) or removing one never moves another node's block, and a removed
// node's block is not handed to a new node.
func TestLockStability(t *testing.T) {
	dir := t.TempDir()
	base := clusterHead + "cluster: pools: default: cidr: \"192.168.0.0/16\"\n" + node("linux-1", 10)
	write(t, dir, map[string]string{"c.cue": base + node("win-b", 21) + node("win-c", 22) + node("win-d", 23)})
	res, _ := compileDir(t, dir)
	blocks := func(res *compiler.Result) map[string]netip.Prefix {
		m := map[string]netip.Prefix{}
		for n, b := range res.IPAM.Blocks {
			m[n] = b.Prefix
		}
		return m
	}
	locked := blocks(res)
	if err := os.WriteFile(filepath.Join(dir, intent.LockFile), res.IPAM.Lock.Encode(), 0o644); err != nil {
		t.Fatal(err)
	}

	// Add win-a, which sorts first and, unlocked, would take win-b's block.
	write(t, dir, map[string]string{"c.cue": base + node("win-a", 20) + node("win-b", 21) + node("win-c", 22) + node("win-d", 23)})
	res, findings := compileDirLock(t, dir, true)
	if findings.HasErrors() {
		t.Fatalf("findings: %v", findings)
	}
	got := blocks(res)
	for _, n := range []string{"win-b", "win-c", "win-d"} {
		if got[n] != locked[n] {
			t.Errorf("adding win-a moved %s from %s to %s", n, locked[n], got[n])
		}
	}
	if got["win-a"] == locked["win-b"] || !got["win-a"].IsValid() {
		t.Errorf("win-a got %s", got["win-a"])
	}
	// Update the lock (keeping entries), then remove win-c and add win-e.
	if err := os.WriteFile(filepath.Join(dir, intent.LockFile), res.IPAM.Lock.Encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, dir, map[string]string{"c.cue": base + node("win-a", 20) + node("win-b", 21) + node("win-d", 23) + node("win-e", 24)})
	res, _ = compileDirLock(t, dir, true)
	after := blocks(res)
	for _, n := range []string{"win-a", "win-b", "win-d"} {
		if after[n] != got[n] {
			t.Errorf("removing win-c moved %s from %s to %s", n, got[n], after[n])
		}
	}
	if after["win-e"] == locked["win-c"] {
		t.Errorf("win-e was given removed win-c's block %s", after["win-e"])
	}
	if _, ok := res.IPAM.Lock.Blocks["win-c"]; !ok {
		t.Errorf("the updated lock dropped win-c's entry")
	}

	// Without the lock the allocation is still deterministic, but a node
	// that sorts first moves the others: that is why vet says ipam-unlocked.
	os.Remove(filepath.Join(dir, intent.LockFile))
	unlocked, _ := compileDir(t, dir)
	if blocks(unlocked)["win-a"] != netip.MustParsePrefix("192.168.0.0/26") {
		t.Errorf("unlocked: win-a got %s, want the first block", blocks(unlocked)["win-a"])
	}
}
