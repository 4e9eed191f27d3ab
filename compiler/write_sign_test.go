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
