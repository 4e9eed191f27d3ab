package compiler_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// TestWritePlansSignatures: a signed compile writes each plan's signature
// beside it, byte-identical when compiled again; an unsigned compile, and
// the removal of a node's plan, remove the signature too, so no stale
// signature is left to be refused or published.
func TestWritePlansSignatures(t *testing.T) {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	sign := func(data []byte) []byte { return plan.Sign(data, key) }
	ring := plan.Keyring{{Key: key.Public().(ed25519.PublicKey)}}
	nodes := func(names ...string) []*plan.NodePlan {
		var ps []*plan.NodePlan
		for _, n := range names {
			ps = append(ps, &plan.NodePlan{FormatVersion: plan.FormatVersion, Kind: plan.Kind, Node: n, Cluster: "c"})
		}
		return ps
	}
	dir := t.TempDir()
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	absent := func(name string) {
		t.Helper()
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v, want it removed", name, err)
		}
	}

	if _, err := compiler.WritePlans(dir, "c", nodes("win-1", "win-2"), sign); err != nil {
		t.Fatal(err)
	}
	first := map[string][]byte{}
	for _, n := range []string{"win-1.json", "win-2.json"} {
		sig := read(plan.SignatureFile(n))
		if _, err := ring.Verify(read(n), sig); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		first[n] = sig
	}
	if _, err := compiler.WritePlans(dir, "c", nodes("win-1", "win-2"), sign); err != nil {
		t.Fatal(err)
	}
	for n, sig := range first {
		if !bytes.Equal(read(plan.SignatureFile(n)), sig) {
			t.Errorf("%s: a second signed compile wrote another signature", n)
		}
	}

	// win-2 is gone: its plan and its signature go.
	removed, err := compiler.WritePlans(dir, "c", nodes("win-1"), sign)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != "win-2.json" {
		t.Errorf("removed %v, want [win-2.json]", removed)
	}
	absent("win-2.json")
	absent(plan.SignatureFile("win-2.json"))

	// Unsigned: the old signature would no longer match; it goes.
	if _, err := compiler.WritePlans(dir, "c", nodes("win-1"), nil); err != nil {
		t.Fatal(err)
	}
	read("win-1.json")
	absent(plan.SignatureFile("win-1.json"))
}

// TestWritePlansSignsHeads: a plan names its route table by key, not
// digest, so a signed compile signs the table's head, which names its
// shards by digest; shards and program chunks, named by digest from a
// signed head or plan, are not signed. An unsigned compile removes the
// head's signature, and ReadPlanDir returns it with the head.
func TestWritePlansSignsHeads(t *testing.T) {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	sign := func(data []byte) []byte { return plan.Sign(data, key) }
	ring := plan.Keyring{{Key: key.Public().(ed25519.PublicKey)}}
	dir := t.TempDir()
	if _, err := compiler.WritePlans(dir, "c", sharedPlans("win-1", "win-2"), sign); err != nil {
		t.Fatal(err)
	}
	files, _, _, err := compiler.ReadPlanDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	heads := 0
	for _, f := range files {
		_, statErr := os.Stat(filepath.Join(dir, plan.SignatureFile(f.Name)))
		signed := f.IsPlan() || f.Kind == plan.KindRouteTable
		if (statErr == nil) != signed || (f.Signature != nil) != signed {
			t.Errorf("%s (%s): signature file %v, read %v; want signed %v", f.Name, f.Kind, statErr, f.Signature != nil, signed)
			continue
		}
		if signed {
			if _, err := ring.Verify(f.Data, f.Signature); err != nil {
				t.Errorf("%s: %v", f.Name, err)
			}
		}
		if f.Kind == plan.KindRouteTable {
			heads++
		}
	}
	if heads != 1 {
		t.Fatalf("%d route table heads", heads)
	}
	if _, err := compiler.WritePlans(dir, "c", sharedPlans("win-1", "win-2"), nil); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, plan.SignatureFile(f.Name))); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: signature left by the unsigned compile: %v", f.Name, err)
		}
	}
}
