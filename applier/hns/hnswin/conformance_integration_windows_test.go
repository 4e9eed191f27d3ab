//go:build windows && integration

package hnswin

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/hnsplan/hnsplan/applier/hns/hnstest"
)

// TestIntegrationConformance runs the hns.Client conformance suite
// (applier/hns/hnstest) against this host's HNS: the contract hnsmem is
// held to in `go test`. It logs which of the answers the contract allows
// real HNS gave (a delete with references, a second route to a taken
// prefix, a batch with a refused route): what docs/first-windows-host.md
// asks a first host to confirm.
func TestIntegrationConformance(t *testing.T) {
	c := newClient(t)
	err := hnstest.TestClient(context.Background(), c, hnstest.Options{
		Prefix:        fmt.Sprintf("hnsplan-it-%08x", rand.Uint32()),
		NonPersistent: true, // gone after a reboot, should the clean-up not run
		Logf:          t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationRouteBatches adds and removes 1,000 RemoteSubnetRoute
// policies in batches of 500 (one ModifyNetworkSettings request each)
// and reads them back after every step: the suite's route-batch check at
// the scale of a large cluster.
func TestIntegrationRouteBatches(t *testing.T) {
	c := newClient(t)
	err := hnstest.TestClient(context.Background(), c, hnstest.Options{
		Prefix:        fmt.Sprintf("hnsplan-it-%08x", rand.Uint32()),
		NonPersistent: true,
		BatchRoutes:   1000,
		BatchSize:     500,
		Only:          []string{"route-batch"},
		Logf:          t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
}
