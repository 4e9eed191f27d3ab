package applier_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// recordingReplacer is a Replacer that replaces nothing: it records the
// reasons it is given and answers with state.
type recordingReplacer struct {
	state      kube.NodeState
	inProgress bool
	reasons    []string
}

func (r *recordingReplacer) Replace(_ context.Context, _ *plan.NodePlan, _ *hns.Want, reason string) (kube.NodeState, error) {
	r.reasons = append(r.reasons, reason)
	return r.state, nil
}

func (r *recordingReplacer) InProgress() bool { return r.inProgress }

// TestReplacerGetsTheReason: the pass hands the replacer the reason of
// its network op, and "" when it only resumes a replace in progress; the
// replacer's typed state is the pass's.
func TestReplacerGetsTheReason(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	h := hnsmem.New()
	rr := &recordingReplacer{state: kube.StateReplacePending}
	r := &applier.Reconciler{HNS: h, Replacer: rr}
	r.SetPlan(p)
	if st, err := r.Pass(ctx, ex.cluster); err != nil || st.State != kube.StateConverged {
		t.Fatalf("first pass: %+v, %v", st, err)
	}
	r.SetPlan(withVNI(p, 5000))
	st, err := r.Pass(ctx, ex.cluster)
	if err != nil || st.State != kube.StateReplacePending {
		t.Fatalf("VNI change: %+v, %v; want the replacer's replace-pending", st, err)
	}
	r.SetPlan(p) // back: nothing to replace, but a replace is in progress
	rr.inProgress, rr.state = true, kube.StateBlocked
	if st, err := r.Pass(ctx, ex.cluster); err != nil || st.State != kube.StateBlocked {
		t.Fatalf("resume: %+v, %v; want the replacer's blocked", st, err)
	}
	if want := []string{"vni-changed", ""}; !slices.Equal(rr.reasons, want) {
		t.Errorf("reasons %q, want %q", rr.reasons, want)
	}
}

// TestDrainReplacerJournalsTheReason: the reason the pass gives is the
// one the replace journals and announces.
func TestDrainReplacerJournalsTheReason(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	h := hnsmem.New()
	journal := filepath.Join(t.TempDir(), "journal.json")
	var events []string
	stop := func(step replace.Step, after bool) error {
		if step == replace.StepEvict && !after {
			return context.Canceled // a crash: the journal stays
		}
		return nil
	}
	dr := &applier.DrainReplacer{Base: replace.Config{
		HNS: h, Drainer: &drainer{h: h}, HostRoutes: replace.NewMemRoutes(), JournalPath: journal, Hook: stop,
		Sleep:   func(context.Context, time.Duration) error { return nil },
		OnEvent: func(e replace.Event) { events = append(events, e.Message) },
	}}
	r := &applier.Reconciler{HNS: h}
	r.SetPlan(p)
	if _, err := r.Pass(ctx, ex.cluster); err != nil {
		t.Fatal(err)
	}
	moved := withVNI(p, 5000)
	want, _, err := applier.WantOf(moved, ex.cluster)
	if err != nil {
		t.Fatal(err)
	}
	state, err := dr.Replace(ctx, moved, want, "vni-changed by the pass")
	if err == nil || state != kube.StateReplacing {
		t.Fatalf("Replace = %s, %v; want replacing and the hook's error", state, err)
	}
	j, err := replace.LoadJournal(journal)
	if err != nil || j == nil || j.Reason != "vni-changed by the pass" {
		t.Fatalf("journal %+v, %v; want the pass's reason", j, err)
	}
	if len(events) == 0 || !strings.Contains(events[0], "(vni-changed by the pass)") {
		t.Errorf("events %q; want the first to name the pass's reason", events)
	}
}
