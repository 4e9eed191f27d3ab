package replace_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/replace"
)

// TestAdmit: a replace asks Admit before it cordons, and again when it
// resumes, with the network's identity before and after (from the
// journal once it resumes: a VNI change, VXLAN-only); while Admit says
// wait, Run does nothing and reports its state.
func TestAdmit(t *testing.T) {
	e := newEnv(t)
	var asked []bool
	wait := kube.StateRolloutWaiting
	cfg := e.cfg()
	cfg.Admit = func(_ context.Context, a replace.Admission) (kube.NodeState, string, error) {
		asked = append(asked, a.Resumed)
		if !hns.VXLANOnly(&a.Have, &a.Want) || a.Have.Subnets[0].VNI != 4096 || a.Want.Subnets[0].VNI != 5000 {
			t.Errorf("Admit asked about %+v -> %+v; want the VNI change 4096 -> 5000 alone", a.Have, a.Want)
		}
		if wait != "" {
			return wait, "no slot free", nil
		}
		return "", "", nil
	}
	res, err := e.run(cfg)
	if err != nil || res.State != kube.StateRolloutWaiting || res.Waiting != "no slot free" {
		t.Fatalf("waiting: %+v, %v", res, err)
	}
	if j, _ := replace.LoadJournal(e.journal()); j != nil || e.drainer.cordoned() || e.hns.MutatingCalls() != 0 {
		t.Fatalf("waiting: journal %+v, cordoned %v, %d mutating calls; want nothing done", j, e.drainer.cordoned(), e.hns.MutatingCalls())
	}
	wait = ""
	cfg.Hook = func(s replace.Step, after bool) error {
		if s == replace.StepDeleteNetwork {
			return errCrash
		}
		return nil
	}
	if _, err := e.run(cfg); !errors.Is(err, errCrash) {
		t.Fatalf("admitted: %v, want the crash", err)
	}
	// Resumed: asked again (a restarted agent re-finds its slot).
	wait, cfg.Hook = kube.StateRolloutHalted, nil
	if res, err := e.run(cfg); err != nil || res.State != kube.StateRolloutHalted {
		t.Fatalf("resume, halted: %+v, %v", res, err)
	}
	if j, _ := replace.LoadJournal(e.journal()); j == nil || j.Step != replace.StepDeleteNetwork {
		t.Fatalf("halted: journal %+v; want it kept at delete-network", j)
	}
	wait = ""
	res, err = e.run(cfg)
	e.assertConverged(res, err)
	if want := []bool{false, false, true, true}; len(asked) != len(want) || asked[0] || asked[1] || !asked[2] || !asked[3] {
		t.Errorf("Admit asked with resumed %v, want %v", asked, want)
	}
}

// TestAbort: a replace that has deleted nothing is given up (uncordoned,
// no journal); one past snapshot-routes is refused (ErrTooLate) and kept.
func TestAbort(t *testing.T) {
	for _, step := range replace.Steps {
		t.Run(string(step), func(t *testing.T) {
			e := newEnv(t)
			cfg := e.cfg()
			cfg.Hook = func(s replace.Step, after bool) error {
				if s == step && !after {
					return errCrash
				}
				return nil
			}
			if _, err := e.run(cfg); !errors.Is(err, errCrash) {
				t.Fatalf("Run: %v, want the crash", err)
			}
			if step != replace.StepCordon && !e.drainer.cordoned() {
				t.Fatal("not cordoned after the crash")
			}
			j, err := replace.Abort(context.Background(), e.journal(), e.drainer)
			left, _ := replace.LoadJournal(e.journal())
			if replace.Abortable(step) {
				if err != nil || j == nil || left != nil || e.drainer.cordoned() {
					t.Fatalf("Abort at %s: %+v, %v; journal left %+v, cordoned %v; want it given up", step, j, err, left, e.drainer.cordoned())
				}
				if e.hns.MutatingCalls() != 0 {
					t.Errorf("Abort at %s after %d mutating HNS calls", step, e.hns.MutatingCalls())
				}
				return
			}
			if !errors.Is(err, replace.ErrTooLate) || left == nil || !e.drainer.cordoned() {
				t.Fatalf("Abort at %s: %v; journal %+v, cordoned %v; want ErrTooLate, both kept", step, err, left, e.drainer.cordoned())
			}
		})
	}
	if j, err := replace.Abort(context.Background(), t.TempDir()+"/none.json", &fakeDrainer{}); j != nil || err != nil {
		t.Errorf("Abort without a journal: %+v, %v; want nothing", j, err)
	}
}
