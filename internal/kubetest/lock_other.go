//go:build !unix

package kubetest

import "testing"

// lockNamespace: the integration tests run on Linux; elsewhere tests that
// share the namespace are not kept apart.
func lockNamespace(t testing.TB, exclusive bool) {
	t.Logf("namespace %s not locked on this OS (exclusive %v)", SystemNamespace, exclusive)
}
