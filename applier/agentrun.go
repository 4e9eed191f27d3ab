package applier

import (
	"cmp"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"

	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/applier/statedir"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/internal/crash"
)

// Run runs the agent until ctx is done, or with UntilConverged until HNS
// matches the plan in force. Its errors are failures (exit 1): the plan
// source failed, the HTTP address cannot be listened on, or, with
// UntilConverged, HNS reads back otherwise than written, which no further
// pass mends (the error is the pass's, hns-readback-mismatch: ...).
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.ctx = ctx
	var wg sync.WaitGroup
	goFn := func(fn func()) {
		wg.Add(1)
		go func() { defer wg.Done(); defer crash.Goroutine("hnsplan-agent"); fn() }()
	}
	defer wg.Wait()
	defer cancel() // before the wait: every goroutine ends with ctx
	for _, task := range a.cfg.Tasks {
		goFn(func() { task(ctx) })
	}
	if c := a.cfg.Control; c != nil {
		goFn(func() { c.Run(ctx, a.takeControl) })
	}

	updates := make(chan planwatch.Update)
	goFn(func() {
		if err := a.cfg.Plans.Run(ctx, updates); err != nil && ctx.Err() == nil {
			a.finish(err)
		}
	})
	goFn(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case u := <-updates:
				a.takePlan(u)
			}
		}
	})
	if k := a.cfg.Kube; k != nil {
		k.Start(ctx)
		goFn(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-k.Changes():
					a.loop.Trigger()
				}
			}
		})
	}
	srv, err := a.serve()
	if err != nil {
		return err
	}
	defer srv.Close()
	a.cfg.Log.Info("hnsplan-agent running", "node", a.cfg.Node, "plan", a.cfg.PlansFrom, "hns", a.cfg.HNSName, "listen", srv.Addr, "cluster", a.cfg.Kube != nil)

	if a.api != nil {
		goFn(func() { a.api.run(ctx, cmp.Or(a.cfg.APIProbe, DefaultAPIProbe)) })
	}
	goFn(func() { a.loop.Run(ctx) })
	goFn(func() { a.pollEndpoints(ctx) })
	select {
	case <-ctx.Done():
		return nil
	case err := <-a.done:
		return err
	}
}

// finish ends Run with err (nil: converged), once.
func (a *Agent) finish(err error) {
	select {
	case a.done <- err:
	default:
	}
}

// takePlan takes a plan source's update: a verified plan becomes the one
// in force, a rejection leaves the last good one.
func (a *Agent) takePlan(u planwatch.Update) {
	a.mu.Lock()
	a.st.Planned = u.Source
	if u.Err != nil {
		a.st.Reject = u.Err.Error()
		a.mu.Unlock()
		a.cfg.Log.Warn("plan not applied; the last good plan stays", "source", u.Source, "err", u.Err)
		var se *plan.SignatureError
		switch k := a.cfg.Kube; {
		case k == nil || errors.Is(u.Err, planwatch.ErrAbsent):
		case errors.Is(u.Err, plan.ErrPartMissing):
			// Plans and parts are published one after the other: a wait
			// is normal for a moment, and says what it waits for.
			k.Event("Normal", "PlanWaitingForParts", u.Err.Error())
		case errors.As(u.Err, &se):
			// Its own reason: someone may be trying to apply a plan
			// nobody trusted signed.
			k.Event("Warning", "PlanSignatureRejected", u.Err.Error())
		default:
			k.Event("Warning", "PlanRejected", u.Err.Error())
		}
		return
	}
	a.st.Reject, a.st.Plan, a.st.Signer = "", u.Plan.Digest, u.Signer
	a.mu.Unlock()
	// The digest and signer of every plan taken: a replayed older plan,
	// validly signed, shows here as an old digest.
	a.cfg.Log.Info("plan", "digest", u.Plan.Digest, "source", u.Source, "signedBy", u.Signer)
	a.r.SetPlan(u.Plan)
	a.loop.Trigger()
}

// Pass is one pass of the agent, as Run's Loop runs it: the reconciler's
// pass over the cluster's caches, reported (/status, the Node's
// annotations, Events, the tunnel), then what to do next: NextAfter its
// outcome; requeue when the simulated CNI networked pods; back off while
// the caches sync. With UntilConverged it ends Run once HNS matches the
// plan in force. retries is how many passes in a row backed off.
func (a *Agent) Pass(ctx context.Context, retries int) Next {
	// Suspended by an operator: nothing touches HNS, not even a step of
	// a replace under way (its journal resumes it once unsuspended).
	if next, ok := a.suspended(ctx); ok {
		return next
	}
	var c *Cluster
	if a.cfg.Kube != nil {
		var ok bool
		if c, ok = a.clusters.Of(a.cfg.Kube); !ok {
			return Backoff // caches syncing: look again soon
		}
	}
	// An operator's replace --abort comes before the replace it gives up.
	a.slots.Abort(ctx, a.r.Plan(), filepath.Join(a.cfg.StateDir, statedir.JournalFile), a.drainer())
	a.slots.why = ""
	osb := a.build.observe()
	a.mu.Lock()
	a.st.OSBuild = osb
	a.mu.Unlock()
	st, err := a.r.Pass(ctx, c)
	if err != nil && ctx.Err() != nil {
		return Wait // stopping
	}
	if why := a.slots.waiting(); why != "" && st.LastError == "" {
		st.LastError = why // rollout-waiting, rollout-halted, aborted
	}
	if err == nil && st.State == kube.StateConverged {
		// Also a slot held for a replace the plan no longer needs.
		a.slots.Done(ctx)
	}
	if err != nil {
		a.cfg.Log.Warn("pass failed; retrying", "err", err, "retries", retries)
	}
	if summary := a.auditPass(ctx, c, st); summary != "" {
		a.mu.Lock()
		a.auditSummary = summary
		a.mu.Unlock()
	}
	a.report(ctx, st)
	next := NextAfter(st, err)
	if p := a.r.Plan(); next == Wait && st.State == kube.StateReplacePending && p != nil && a.slots.halted(p.Digest) {
		next = Poll // aborted: look for the operator's --retry
	}
	if next == Wait && st.State == kube.StateConverged && a.cfg.CNI != nil {
		// The network is up: the CNI networks the plan's pods, whose
		// ACLs the next pass programs.
		if n, err := a.cfg.CNI(ctx, a.r.Plan()); err != nil {
			a.cfg.Log.Warn("simulate the CNI", "err", err)
		} else if n > 0 {
			a.cfg.Log.Info("the CNI networked pods (simulated)", "pods", n)
			next = Requeue
		}
	}
	if next != Wait || !a.cfg.UntilConverged {
		return next
	}
	switch p := a.r.Plan(); {
	case st.State == kube.StateConverged && p != nil && st.Digest == p.Digest:
		a.finish(nil)
	case st.State == kube.StateReadbackMismatch:
		// It will not converge by itself: say so and stop.
		a.finish(errors.New(st.LastError))
	}
	return next
}

// report publishes a pass's status: /status, the log, the Node's
// annotations, an Event for new read-back mismatches, and the tunnel.
func (a *Agent) report(ctx context.Context, s Status) {
	mismatches := make([]string, len(s.Mismatches))
	for i, m := range s.Mismatches {
		mismatches[i] = m.String()
	}
	mismatch := strings.Join(mismatches, "; ")
	a.mu.Lock()
	summary := a.auditSummary
	a.st.Applied, a.st.AppliedRoutes, a.st.State, a.st.Error, a.st.Ops, a.st.Pending, a.st.Mismatches = s.Digest, s.Routes, s.State, s.LastError, s.Ops, s.Pending, mismatches
	a.st.Notes = s.Notes
	notes := strings.Join(s.Notes, "; ")
	notesSaid := a.notesSaid
	if s.State != kube.StateError && s.State != kube.StateWaiting {
		a.notesSaid = notes
	}
	if p := a.r.Plan(); p != nil {
		a.st.Plan = p.Digest
	}
	said := a.mismatchSaid
	if s.State != kube.StateError && s.State != kube.StateWaiting {
		a.mismatchSaid = mismatch
	}
	conflictSaid := a.conflictSaid
	if s.State == kube.StateConflict {
		a.conflictSaid = s.LastError
	} else if s.State != kube.StateError && s.State != kube.StateWaiting {
		a.conflictSaid = ""
	}
	a.mu.Unlock()
	a.reportConflict(s, conflictSaid)
	if notes != notesSaid && notes != "" && s.State != kube.StateError && s.State != kube.StateWaiting {
		// Once per new set: they stay until their owner mends them.
		a.cfg.Log.Warn("pod endpoints share an address; each got the pod's ACLs", "notes", notes)
		if a.cfg.Kube != nil {
			a.cfg.Kube.Event("Warning", "EndpointAddressShared", notes)
		}
	}
	// A node that waits for a slot or an operator says why once, when it
	// changes (slotGate.Admit), not at every poll.
	waits := s.State == kube.StateWaiting || s.State == kube.StateRolloutWaiting || s.State == kube.StateRolloutHalted || s.State == kube.StateRolloutHeld
	if s.Ops > 0 || s.LastError != "" && !waits {
		a.cfg.Log.Info("pass", "state", s.State, "ops", s.Ops, "applied", s.Digest, "err", s.LastError)
	}
	if s.State != kube.StateError && s.State != kube.StateWaiting && mismatch != said && mismatch != "" {
		// Once per new set of mismatches: they stay until the plan or
		// the object changes.
		a.cfg.Log.Warn("HNS reads objects back otherwise than the agent wrote them; not writing them again", "mismatch", mismatch)
		if a.cfg.Kube != nil {
			a.cfg.Kube.Event("Warning", "HNSReadbackMismatch", "hns-readback-mismatch: "+mismatch)
		}
	}
	k := a.cfg.Kube
	if k == nil {
		return
	}
	if err := k.SetStatus(ctx, kube.Status{Digest: s.Digest, Routes: s.Routes, State: s.State, Error: s.LastError, Mismatch: mismatch, Audit: summary}); err != nil {
		a.cfg.Log.Warn("node status", "err", err)
	}
	if s.State == kube.StateConflict {
		return // the competitor publishes its own tunnel on the Node
	}
	// The tunnel changes only with the network: look (a snapshot) after a
	// pass that changed HNS or applied a new plan (a replace gives a new
	// DrMacAddress), or while none is published.
	if n, ok := k.Node(); s.Ops > 0 || s.Digest != a.tunnelFor || !ok || n.TunnelMAC == "" {
		if err := PublishTunnel(ctx, k, a.cfg.HNS, a.r.Plan()); err != nil {
			a.cfg.Log.Warn("publish the VXLAN tunnel", "err", err)
		}
		a.tunnelFor = s.Digest
	}
}

// reportConflict says, once per new conflict, that the agent stopped
// writing because of a competing dataplane, and once that it resumed.
// said is the conflict the last Event named.
func (a *Agent) reportConflict(s Status, said string) {
	event := func(eventtype, reason, message string) {
		if a.cfg.Kube != nil {
			a.cfg.Kube.Event(eventtype, reason, message)
		}
	}
	switch {
	case s.State == kube.StateConflict && s.LastError != said:
		a.cfg.Log.Warn("another dataplane programs this node's HNS; writing nothing", "conflict", s.LastError)
		event("Warning", "DataplaneConflict", s.LastError)
	case s.State != kube.StateConflict && s.State != kube.StateError && s.State != kube.StateWaiting && said != "":
		a.cfg.Log.Info("the competing dataplane is gone; programming HNS again", "state", s.State)
		event("Normal", "DataplaneConflictResolved", "the competing dataplane is gone: hnsplan-agent programs HNS again (state "+string(s.State)+")")
	}
}
