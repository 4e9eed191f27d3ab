//go:build unix

package kubetest

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// lockNamespace takes an flock on lockPath: shared or exclusive between
// the test processes `go test` runs in parallel (and between parallel
// tests of one process: each holds its own open file).
func lockNamespace(t testing.TB, exclusive bool) {
	t.Helper()
	path := lockPath(t)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("lock %s: %v", path, err)
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	start := time.Now()
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		t.Fatalf("lock %s: %v", path, err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Logf("waited %s for namespace %s (%s)", waited.Round(time.Millisecond), SystemNamespace, path)
	}
	t.Cleanup(func() { f.Close() }) // closing releases the lock
}
