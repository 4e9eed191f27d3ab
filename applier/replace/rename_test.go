package replace_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/replace"
)

// wantRenamed is want(4096) with the network renamed Calico2 and its host
// endpoint Calico2_ep; owned is what the state directory records.
func wantRenamed(owned *hns.Owned) *hns.Want {
	w := want(4096)
	w.Network.Name, w.HostEndpoint.Name, w.HostEndpoint.Network = "Calico2", "Calico2_ep", "Calico2"
	w.Owned = owned
	return w
}

// assertRenamed: one network, under the new name, with its routes and
// host endpoint; the old one and its host endpoint gone; the node given
// back; no journal.
func (e *env) assertRenamed(res replace.Result, err error) {
	t := e.t
	t.Helper()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.State != kube.StateConverged || !res.Replaced || res.Reason != hns.ReasonRenamed {
		t.Fatalf("Run = %+v, want converged, replaced, %s", res, hns.ReasonRenamed)
	}
	have, err := e.hns.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if have.Network(netName) != nil || have.Endpoint(hostEP) != nil {
		t.Errorf("the old network or host endpoint is still there:\n%s", e.hns)
	}
	if n := have.Network("Calico2"); n == nil || len(n.RemoteRoutes) != 2 {
		t.Fatalf("network after the rename: %+v", n)
	}
	if ep := have.Endpoint("Calico2_ep"); ep == nil || ep.Network != "Calico2" {
		t.Fatalf("host endpoint after the rename: %+v", ep)
	}
	for _, op := range hns.Diff(have, wantRenamed(nil)) {
		if op.Kind != hns.KindACL {
			t.Errorf("left to do: %s", op)
		}
	}
	e.assertMetadataRoute()
	if e.drainer.cordoned() {
		t.Error("node left cordoned")
	}
	if _, err := os.Stat(e.journal()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("journal left behind: %v", err)
	}
	if d, _ := e.guard.counts(); d != 1 {
		t.Errorf("the old network was deleted %d times, want once", d)
	}
	e.guard.check() // never deleted with a pod on it
}

// TestRename: a plan that renames the network drains the node and
// replaces the network under its new name (issue 13: it created a second
// network beside the old one), from the state directory's record or, with
// the record lost, from the network's identity; a crash at any step
// resumes from the journal alone, and the network is never deleted with a
// pod endpoint on it.
func TestRename(t *testing.T) {
	records := map[string]*hns.Owned{"recorded": {Network: netName, HostEndpoint: hostEP}, "record-lost": nil}
	for name, owned := range records {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, hnsmem.AllowDeleteWithEndpoints())
			cfg := e.cfg()
			cfg.Want = wantRenamed(owned)
			res, err := e.run(cfg)
			e.assertRenamed(res, err)
			if e.drainer.evicts == 0 {
				t.Error("the node was not drained")
			}
		})
		for _, step := range replace.Steps {
			for _, after := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/crash/%s/after=%t", name, step, after), func(t *testing.T) {
					e := newEnv(t, hnsmem.AllowDeleteWithEndpoints())
					cfg := e.cfg()
					cfg.Want = wantRenamed(owned)
					cfg.Hook = func(s replace.Step, a bool) error {
						if s == step && a == after {
							return errCrash
						}
						return nil
					}
					if _, err := e.run(cfg); !errors.Is(err, errCrash) {
						t.Fatalf("first Run: %v, want the crash", err)
					}
					j, err := replace.LoadJournal(e.journal())
					if err != nil || j == nil || j.Have.Name != netName || j.Want.Name != "Calico2" || j.HaveHostEndpoint != hostEP {
						t.Fatalf("journal after the crash: %+v, %v", j, err)
					}
					cfg = e.cfg()
					cfg.Want = wantRenamed(owned)
					res, err := e.run(cfg)
					e.assertRenamed(res, err)
				})
			}
		}
	}
}
