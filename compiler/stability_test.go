package compiler_test

import (
	"bytes"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/plan"
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
	plans, parts := 0, 0
	for name := range a {
		if strings.HasPrefix(name, "_") {
			parts++
		} else {
			plans++
		}
	}
	if plans != 3 || parts < 2 || len(b) != len(a) || len(c) != len(a) {
		t.Fatalf("%d plans and %d parts (want 3 and a route table), then %d and %d files", plans, parts, len(b), len(c))
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

// TestAddNodeChangesFewFiles: with the blocks locked, a node joining the
// cluster writes its own plan and changes, of the files already there,
// only its route table shard, the table's head and the index: no other
// plan, no other shard, not the program (issue 16: at most 3 existing
// files). A node leaving is the same in reverse.
func TestAddNodeChangesFewFiles(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	var nodes strings.Builder
	nodes.WriteString(clusterHead + "cluster: pools: default: cidr: \"192.168.0.0/16\"\n" + node("linux-1", 10))
	for i := range 40 {
		nodes.WriteString(node(fmt.Sprintf("win-%02d", i), 20+i))
	}
	policies := `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny, namespace: default}
spec: {podSelector: {}, policyTypes: [Ingress]}
`
	write(t, dir, map[string]string{"c.cue": nodes.String(), "policies/deny.yaml": policies})
	compileWrite := func() map[string][]byte {
		t.Helper()
		res, findings := compileDirLock(t, dir, true)
		if findings.HasErrors() {
			t.Fatalf("findings: %v", findings)
		}
		if err := os.WriteFile(filepath.Join(dir, intent.LockFile), res.IPAM.Lock.Encode(), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := compiler.WritePlans(out, "demo", res.Plans, nil); err != nil {
			t.Fatal(err)
		}
		files := map[string][]byte{}
		for _, name := range dirNames(t, out) {
			data, err := os.ReadFile(filepath.Join(out, name))
			if err != nil {
				t.Fatal(err)
			}
			files[name] = data
		}
		return files
	}
	before := compileWrite()
	if !slices.ContainsFunc(slices.Collect(maps.Keys(before)), func(n string) bool { return strings.HasPrefix(n, "_program-") }) {
		t.Fatal("the case compiles no policy program")
	}
	write(t, dir, map[string]string{"c.cue": nodes.String() + node("win-new", 99)})
	after := compileWrite()
	changed := func(from, to map[string][]byte) (changed, added []string) {
		for name, data := range to {
			old, ok := from[name]
			switch {
			case !ok:
				added = append(added, name)
			case !bytes.Equal(old, data):
				changed = append(changed, name)
			}
		}
		slices.Sort(changed)
		slices.Sort(added)
		return changed, added
	}
	ch, added := changed(before, after)
	var head string
	for name := range after {
		if strings.HasPrefix(name, "_routes-") && len(name) == len("_routes-0123456789ab.json") {
			head = strings.TrimSuffix(strings.TrimPrefix(name, "_"), ".json")
		}
	}
	shard := plan.PartFileName(plan.ShardName(head, plan.ShardOf("win-new")))
	want := []string{plan.IndexFile, plan.PartFileName(head), shard}
	wantAdded := []string{"win-new.json"}
	if _, ok := before[shard]; !ok { // the node's shard was empty before
		want, wantAdded = want[:2], append(wantAdded, shard)
	}
	slices.Sort(want)
	slices.Sort(wantAdded)
	if !slices.Equal(ch, want) || !slices.Equal(added, wantAdded) {
		t.Errorf("adding a node changed %v and added %v; want %v changed and %v added", ch, added, want, wantAdded)
	}
	if len(ch) > 3 {
		t.Errorf("adding a node changed %d existing files, more than 3", len(ch))
	}

	// And back: the node leaves; its plan goes, and the same parts change.
	write(t, dir, map[string]string{"c.cue": nodes.String()})
	again := compileWrite()
	ch, added = changed(after, again)
	if len(added) != 0 || len(ch) > 3 {
		t.Errorf("removing a node changed %v and added %v", ch, added)
	}
	for name, data := range before {
		if name == plan.IndexFile {
			continue
		}
		if !bytes.Equal(again[name], data) {
			t.Errorf("%s is not as it was before the node came and went", name)
		}
	}
}
