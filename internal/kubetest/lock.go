package kubetest

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// SystemNamespace is the namespace the agents read (planwatch's
// ConfigMapNamespace, fleet's Namespace); kubetest cannot import those.
const SystemNamespace = "hnsplan-system"

// ShareSystemNamespace is for a test that writes objects of its own,
// uniquely named, into SystemNamespace: it may run beside others that do
// the same, but not while a test owns the namespace (OwnSystemNamespace).
// The lock is held until t's cleanups end; take it before any object is
// made, so that the test's own cleanups run inside it.
func ShareSystemNamespace(t testing.TB) { lockNamespace(t, false) }

// OwnSystemNamespace is for a test that clears SystemNamespace or reads
// all of it (hnsplan publish --prune, diff --live): it waits until no
// other test, in any package's process, has the namespace, and keeps
// them out until t's cleanups end. Without it such a test deletes the
// objects of tests running beside it, and they fail with "not found".
func OwnSystemNamespace(t testing.TB) { lockNamespace(t, true) }

// lockPath is the lock file of the API server of $KUBECONFIG: one per
// server, in its run directory when hack/kube-test-env.sh says where.
func lockPath(t testing.TB) string {
	dir := os.Getenv("KAS_RUN_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	sum := sha256.Sum256([]byte(Kubeconfig(t)))
	return filepath.Join(dir, fmt.Sprintf("kubetest-%s-%x.lock", SystemNamespace, sum[:6]))
}
