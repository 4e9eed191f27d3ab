package applier

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/applier/statedir"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// OnceOptions are what `hnsplan-agent apply --once` asks of Once beside
// the agent's Config.
type OnceOptions struct {
	// DryRun computes the ops and applies none (Status.Planned).
	DryRun bool
	// Round sees each round of the pass before its ops are applied
	// (round 0; round 1 after a network replace), or a dry run's.
	Round func(Round)
	// Resuming sees the unfinished replace the journal at path holds,
	// before the pass resumes it (or, DryRun, would).
	Resuming func(j *replace.Journal, path string)
	// Event sees each step of a network replace.
	Event func(replace.Event)
}

// Once is one pass of the agent over its HNS for plan p, which must be
// verified and assembled (plan.Decode, Parts.Assemble, plan.Validate):
// the pass Run's loop runs — Diff, routes in batches, retries, the
// read-back into the echo baseline, the record of the network the agent
// owns, the journalled replace and its loop breaker — for `hnsplan-agent
// apply --once`. The agent has no cluster then (Config.Kube is ignored):
// the plan's rendered endpoints give the pods' ACL lists.
//
// Running it is the operator's confirmation of a network replace, whatever
// the plan's replacement mode; and it cannot drain the node: a replace of
// a network that still holds endpoints not the agent's is refused before
// any call, saying to drain. A replace the journal holds unfinished is
// resumed. It returns the pass's status; its error is the pass's.
func (a *Agent) Once(ctx context.Context, p *plan.NodePlan, o OnceOptions) (Status, error) {
	journalPath := filepath.Join(a.cfg.StateDir, statedir.JournalFile)
	journal, err := replace.LoadJournal(journalPath)
	if err != nil {
		return Status{}, fmt.Errorf("%w: a replace was left half done by another agent version, or the file was damaged; finish it with the agent that started it, or check HNS by hand before removing the file; nothing was changed", err)
	}
	rep := a.replacer()
	rep.Admit, rep.Done, rep.Confirmed = nil, nil, true
	rep.Base.Drainer = NoDrainer{}
	// Nothing to wait for: Reconciler.CannotDrain refused while pods were
	// on the network.
	rep.Base.DrainTimeout = time.Nanosecond
	rep.Base.OnState = nil
	rep.Base.OnEvent = o.Event
	r := a.r
	if journal != nil && o.Resuming != nil {
		o.Resuming(journal, journalPath)
	}
	r.Replacer, r.GC, r.DryRun, r.Observe, r.CannotDrain = rep, nil, o.DryRun, o.Round, true
	r.SetPlan(p)
	return r.Pass(ctx, nil)
}
