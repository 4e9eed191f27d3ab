package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// TestRunSignedPlans: run with --trusted-keys applies a signed plan, and
// then refuses an unsigned one and one signed by another key, keeping
// the last good plan applied and saying why in /status.
func TestRunSignedPlans(t *testing.T) {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, ed25519.SeedSize))
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, ed25519.SeedSize))
	pub, _ := ssh.NewPublicKey(key.Public())
	dir := t.TempDir()
	trusted := filepath.Join(dir, "trusted.pub")
	if err := os.WriteFile(trusted, append([]byte("# CI\n"), ssh.MarshalAuthorizedKey(pub)...), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "win-1.json")
	p := samplePlan()
	b := encodeSignedInto(t, dir, p, key)
	writeAtomic(t, plan.SignatureFile(path), plan.Sign(b, key))
	writeAtomic(t, path, b)

	addr := freeAddr(t)
	var out, errOut lockedBuffer
	f := &runFlags{node: "win-1", planFile: path, planSource: "file", hns: "mem", listen: addr,
		stateDir: filepath.Join(dir, "state"), resync: time.Minute, trustedKeys: trusted}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runAgent(ctx, f, &out, &errOut) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	fp := plan.Fingerprint(key.Public().(ed25519.PublicKey))
	first := waitStatus(t, addr, "the signed plan", func(s agentStatus) bool { return s.State == "converged" && s.Applied == p.Digest })
	if !strings.Contains(first.Signer, fp) {
		t.Errorf("status signedBy = %q, want %s", first.Signer, fp)
	}

	// A new plan without a signature.
	moveRoute(p)
	b = encodeSignedInto(t, filepath.Dir(path), p, key)
	if err := os.Remove(plan.SignatureFile(path)); err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, path, b)
	st := waitStatus(t, addr, "the unsigned plan's rejection", func(s agentStatus) bool { return s.Reject != "" })
	if st.Applied != first.Applied || !strings.Contains(st.Reject, "the plan is not signed") || !strings.Contains(st.Reject, fp) {
		t.Errorf("after an unsigned plan: %+v; want %s still applied, the rejection naming %s", st, first.Applied, fp)
	}
	// Signed by a key not trusted.
	writeAtomic(t, plan.SignatureFile(path), plan.Sign(b, other))
	st = waitStatus(t, addr, "the other key's rejection", func(s agentStatus) bool { return strings.Contains(s.Reject, "does not trust") })
	if st.Applied != first.Applied {
		t.Errorf("a plan signed by another key was applied: %+v", st)
	}
	// Signed by the trusted key: applied.
	writeAtomic(t, plan.SignatureFile(path), plan.Sign(b, key))
	waitStatus(t, addr, "the second signed plan", func(s agentStatus) bool { return s.Applied == p.Digest && s.Reject == "" })
	if log := errOut.String(); !strings.Contains(log, "plans must be signed") || strings.Contains(log, "not authenticated") {
		t.Errorf("log does not say plans must be signed:\n%s", log)
	}
}

// TestRunUnauthenticated: without trusted keys a plan is applied as
// before, and the agent says once, at start, that plans are not
// authenticated.
func TestRunUnauthenticated(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	var errOut lockedBuffer
	f := &runFlags{node: "win-1", planFile: writePlan(t, dir), planSource: "file", hns: "mem", listen: freeAddr(t),
		stateDir: filepath.Join(dir, "state"), resync: time.Minute, untilConverged: true}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := runAgent(ctx, f, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	if n := strings.Count(errOut.String(), "plans are not authenticated"); n != 1 {
		t.Errorf("said %d times that plans are not authenticated, want once:\n%s", n, errOut.String())
	}
}

// TestRunTrustFlags: the trusted-keys flags that cannot work are usage
// errors.
func TestRunTrustFlags(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pub")
	os.WriteFile(empty, []byte("# none\n"), 0o644)
	for _, tt := range []struct {
		name string
		set  func(*runFlags)
		want string
	}{
		{"both", func(f *runFlags) { f.trustedKeys, f.trustedKeysCM = empty, true }, "give one"},
		{"configmap without a cluster", func(f *runFlags) { f.trustedKeysCM = true }, "--trusted-keys-configmap needs a cluster"},
		{"a file that trusts nothing", func(f *runFlags) { f.trustedKeys = empty }, "no keys"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &runFlags{node: "win-1", planFile: writePlan(t, t.TempDir()), planSource: "file", hns: "mem", listen: freeAddr(t),
				stateDir: filepath.Join(t.TempDir(), "state"), resync: time.Minute}
			tt.set(f)
			var out, errOut lockedBuffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := runAgent(ctx, f, &out, &errOut)
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != exitUsage || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run = %v, want a usage error saying %q", err, tt.want)
			}
		})
	}
}
