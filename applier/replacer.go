package applier

import (
	"context"
	"errors"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// DrainReplacer is the Replacer of a real node: replace.Run with Base
// (HNS, Drainer, HostRoutes, JournalPath, timeouts, callbacks), the plan's
// want and digest, and the plan's replacement mode.
type DrainReplacer struct {
	Base replace.Config
	// Admit, if set, is the replace's Admit for plan p (the agent's
	// rollout slot); Done, if set, is called once a replace is done
	// (state converged), to give the slot back. A replace that ends
	// blocked or in error keeps its slot: the rollout halts on it.
	Admit func(ctx context.Context, p *plan.NodePlan, a replace.Admission) (kube.NodeState, string, error)
	Done  func(ctx context.Context)
	// Retried, if set, is the replace's RestartDrain: the operator's
	// --retry gives a blocked drain a new timeout.
	Retried func() bool
	// Confirmed says the operator asked for this replace by running it
	// (apply --once): it drains and recreates whatever the plan's
	// replacement mode.
	Confirmed bool
}

// Replace runs or resumes the journalled replace; a new one journals
// reason and names it in its Events. A drain that a PodDisruptionBudget
// holds up is state blocked, not an error: the loop tries again at the
// next pass, and nothing was deleted.
func (d *DrainReplacer) Replace(ctx context.Context, p *plan.NodePlan, want *hns.Want, reason string) (kube.NodeState, error) {
	cfg := d.Base
	cfg.Want, cfg.PlanDigest, cfg.Reason = want, p.Digest, reason
	cfg.Mode = replace.ModeDrain
	if p.Replacement == "manual" && !d.Confirmed {
		cfg.Mode = replace.ModeManual
	}
	if d.Admit != nil {
		cfg.Admit = func(ctx context.Context, a replace.Admission) (kube.NodeState, string, error) {
			return d.Admit(ctx, p, a)
		}
	}
	cfg.RestartDrain = d.Retried
	res, err := replace.Run(ctx, cfg)
	if err == nil && res.State == kube.StateConverged && d.Done != nil {
		d.Done(ctx)
	}
	if errors.Is(err, replace.ErrBlocked) {
		return kube.StateBlocked, nil
	}
	if err != nil {
		return kube.StateReplacing, err
	}
	return res.State, nil
}

// InProgress says whether a replace was journalled and not finished: the
// next pass must resume it even if HNS already shows the new network (a
// crash after the create leaves the node cordoned until it resumes).
func (d *DrainReplacer) InProgress() bool {
	j, err := replace.LoadJournal(d.Base.JournalPath)
	return err != nil || j != nil // an unreadable journal is Run's to report
}
