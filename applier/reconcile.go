package applier

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// Status is the outcome of a pass, for the Node's annotations and
// `hnsplan-agent status`.
type Status struct {
	Digest string // of the plan HNS now matches; "" until one does
	// Routes is the digest of the route table (its head) whose routes HNS
	// holds with that plan: a node joining the cluster changes it and
	// not the plan's digest. "" for a plan without a route table.
	Routes    string
	State     kube.NodeState
	LastError string
	Ops       int      // mutating ops the pass applied
	Pending   []string // what waits for the cluster (unknown tunnel MACs, a pod's endpoint)
	// Notes are what the pass found wrong in what others made, and left
	// as it is: endpoints that share a pod's address (a stale one).
	Notes []string
	// Planned are the ops of a dry run (Reconciler.DryRun), none applied.
	Planned []hns.Op
	// Mismatches are the objects HNS reads back otherwise than the agent
	// wrote them (state hns-readback-mismatch).
	Mismatches []hns.Mismatch
}

// Replacer recreates the network when an immutable property changes
// (applier/replace: cordon, drain, journalled recreate, uncordon). reason
// is why, as the pass's diff says ("vni-changed"), or "" when the pass
// resumes a replace in progress. It returns the state to report:
// converged when done, blocked or replace-pending when it could not
// proceed yet (with a nil error).
type Replacer interface {
	Replace(ctx context.Context, p *plan.NodePlan, want *hns.Want, reason string) (kube.NodeState, error)
	// InProgress says a replace was started and not finished: the pass
	// resumes it before anything else.
	InProgress() bool
}

// Reconciler converges one node's HNS to its plan and the live cluster.
// Set the fields, then call Pass (once), or run passes in a Loop (Agent).
type Reconciler struct {
	HNS hns.Client
	// Replacer handles network replaces; nil refuses them (state
	// replace-pending, nothing changed).
	Replacer Replacer
	// Metrics, if set, counts passes, ops and errors.
	Metrics *Metrics
	Log     *slog.Logger
	// Attempts is how often a transient HNS error is tried (default 3).
	Attempts int
	// RouteBatch is how many routes one HNS call adds or removes (0:
	// hns.DefaultRouteBatch; 1: one call per route, as before batches).
	RouteBatch int
	// ACLWriters is how many endpoints' ACL lists are written at once
	// (0: DefaultACLWriters; 1: one after the other).
	ACLWriters int
	// GC, if set, removes pod endpoints no pod explains (see GC).
	GC *GC
	// Owned, if set, keeps the record of the network the agent owns (its
	// state directory): a pass replaces the recorded network when the
	// plan renames it, and records the plan's once it has converged.
	// Without it a renamed network is recognised by its identity alone
	// (hns.Previous).
	Owned OwnedStore
	// Echo, if set, keeps the baseline of what HNS echoes of the agent's
	// writes (its state directory). Without it the baseline lives as long
	// as the process.
	Echo EchoStore
	// DryRun makes a pass compute its first ops and stop: they are in the
	// status's Planned, and nothing is written (apply --once --dry-run).
	DryRun bool
	// Observe, if set, sees each round of a pass before its ops are
	// applied (round 0, then 1 after a replace), and a dry run's.
	Observe func(Round)
	// CannotDrain says the node cannot be drained by this agent (apply
	// --once has no cluster): a network replace while endpoints that are
	// not the agent's are on the network is refused before any call,
	// rather than journalled to wait for a drain.
	CannotDrain bool
	// KeepSnapshot keeps the last snapshot a pass read for TakeSnapshot
	// (the agent's audit); without it none is kept past the pass.
	KeepSnapshot bool

	mu     sync.Mutex
	plan   *plan.NodePlan
	status Status
	owned  *hns.Owned // the record as last read or written
	loaded bool
	echo   *hns.Echo // the baseline, loaded at the first pass
	fights fights    // another writer of the pod endpoints' ACLs
	// snap is the last snapshot the pass read, for the audit
	// (TakeSnapshot): it reads HNS no more than the pass did.
	snap *hns.State
	// seen is, after a policy-only pass, the pod endpoints it left (their
	// IDs and addresses, endpointsSeen): the endpoint poll compares HNS
	// with it.
	seen string
}

// Round is one round of a pass, as Reconciler.Observe sees it: the ops
// Diff made (before any is applied), and what waits or is wrong.
type Round struct {
	N       int // 0, then 1 after a network replace
	Ops     []hns.Op
	Pending []string
	Notes   []string
}

// EchoStore keeps the baseline of what HNS echoes (statedir.Baseline).
type EchoStore interface {
	// Load returns the baseline, empty if there is none; with an error
	// (a damaged file) it still returns an empty one to go on with.
	Load() (*hns.Echo, error)
	Save(*hns.Echo) error
}

// OwnedStore keeps the record of the network the agent owns
// (statedir.Record).
type OwnedStore interface {
	// Load returns the record, or nil if there is none.
	Load() (*hns.Owned, error)
	// Save records o, the network of the plan with digest planDigest.
	Save(o hns.Owned, planDigest string) error
}

// SetPlan makes p the plan the next passes apply. p must be verified
// (plan.Decode): the reconciler applies it as it is.
func (r *Reconciler) SetPlan(p *plan.NodePlan) {
	r.mu.Lock()
	r.plan = p
	r.mu.Unlock()
}

// Plan returns the current plan, or nil.
func (r *Reconciler) Plan() *plan.NodePlan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.plan
}

// keepSnapshot keeps s, the latest snapshot a pass read.
func (r *Reconciler) keepSnapshot(s *hns.State) {
	if !r.KeepSnapshot {
		return
	}
	r.mu.Lock()
	r.snap = s
	r.mu.Unlock()
}

// TakeSnapshot returns the last snapshot the last pass read of HNS (after
// its writes, if it wrote), or nil if it read none, and forgets it: the
// audit's view, at no HNS call of its own. Diff may have sorted it; its
// objects are as HNS holds them.
func (r *Reconciler) TakeSnapshot() *hns.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.snap
	r.snap = nil
	return s
}

// Status returns the status of the last pass.
func (r *Reconciler) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// Pass is one level-triggered pass: want from the current plan and
// cluster c, have from HNS, then the ops between them. It returns the
// status it reported; the error is what should make the caller retry.
func (r *Reconciler) Pass(ctx context.Context, c *Cluster) (Status, error) {
	start := time.Now()
	st, err := r.pass(ctx, c)
	if err != nil {
		st.State, st.LastError = kube.StateError, err.Error()
	}
	r.mu.Lock()
	if st.Digest == "" && st.State != kube.StateWaiting {
		st.Digest, st.Routes = r.status.Digest, r.status.Routes // still the last plan HNS matched
	}
	r.status = st
	r.mu.Unlock()
	if r.Metrics != nil {
		r.Metrics.pass(st, time.Since(start), err)
	}
	return st, err
}

func (r *Reconciler) pass(ctx context.Context, c *Cluster) (Status, error) {
	p := r.Plan()
	if p == nil {
		return Status{State: kube.StateWaiting, LastError: "no verified plan yet"}, nil
	}
	if who := competing(p, c); len(who) > 0 {
		// Before anything is read or written: two dataplanes on one
		// HNS undo each other (docs/calico.md, Conflict). What the
		// competitor wrote meanwhile is not a fight.
		r.fights = fights{}
		return competitorConflict(who), nil
	}
	want, pending, err := WantOf(p, c)
	if err != nil {
		return Status{}, fmt.Errorf("plan %s: %w", p.Digest, err)
	}
	policyOnly := want.Foreign != nil
	if policyOnly && r.Replacer != nil && r.Replacer.InProgress() {
		// Begun for a plan that owned the network; this one owns nothing
		// and cannot finish it.
		return Status{}, fmt.Errorf("plan %s is policy only, but a network replace begun for an earlier plan is journalled in the state directory and unfinished: apply the earlier plan until the replace is done (its node stays cordoned meanwhile), or check HNS and remove the journal", p.Digest)
	}
	if !policyOnly {
		if want.Owned, err = r.loadOwned(); err != nil {
			return Status{}, err
		}
	}
	want.Echo = r.loadEcho()
	// At most two rounds: a replace, then what it leaves (pod ACLs).
	for round := 0; ; round++ {
		have, err := r.HNS.Snapshot(ctx)
		if err != nil {
			return Status{}, fmt.Errorf("read HNS: %w", err)
		}
		r.keepSnapshot(have)
		ops := hns.Diff(have, want)
		if r.Metrics != nil && round == 0 {
			r.Metrics.drift(len(ops))
		}
		var notes []string
		if policyOnly && round == 0 {
			pending = append(pending, unprotected(have, want)...)
			notes = shared(have, want)
		}
		if r.Observe != nil {
			r.Observe(Round{N: round, Ops: ops, Pending: pending, Notes: notes})
		}
		if r.DryRun {
			return Status{Pending: pending, Notes: notes, Planned: ops}, nil
		}
		if i := slices.IndexFunc(ops, isNetworkReplace); i >= 0 && (round > 0 || want.Echo.Replaced(p.Digest, ops[i].Reason)) {
			// The same replace never runs twice: HNS reads the network
			// back as if it had not happened.
			return r.refuseReplace(have, want, ops[i], pending), nil
		}
		if round == 0 && !policyOnly && r.needsReplace(ops) {
			if r.CannotDrain {
				if err := inTheWay(have, want, ops); err != nil {
					return Status{Pending: pending}, err
				}
			}
			st, err := r.replace(ctx, p, want, ops, pending)
			if st.State == kube.StateConverged && err == nil {
				if i := slices.IndexFunc(ops, isNetworkReplace); i >= 0 {
					want.Echo.NoteReplace(p.Digest, ops[i].Reason)
				}
			}
			r.saveEcho(want.Echo)
			if err != nil || st.State != kube.StateConverged {
				return st, err
			}
			continue
		}
		if msg := r.fights.observe(have, want, ops); msg != "" {
			return Status{State: kube.StateConflict, Pending: pending, Notes: notes, LastError: msg}, nil
		}
		var gc []hns.Op
		if !policyOnly { // the CNI's endpoints are never the agent's to delete
			gc = r.GC.ops(ctx, p.Node, have, want, c)
		}
		ops = append(ops, gc...)
		if n, err := r.applyOps(ctx, ops); err != nil {
			return Status{Ops: n, Pending: pending, Notes: notes}, fmt.Errorf("%w (%d of %d ops applied; the next pass resumes)", err, n, len(ops))
		}
		for _, op := range gc {
			r.GC.forget(op.Name)
			if r.Log != nil {
				r.Log.Warn("removed a leaked pod endpoint", "endpoint", op.Name, "why", op.Reason)
			}
		}
		if len(ops) > 0 && r.Log != nil {
			r.Log.Info("applied", "digest", p.Digest, "ops", len(ops))
		}
		// The read-back: what HNS made of the writes goes into the
		// baseline (one snapshot however many objects were written).
		now := have
		if len(ops) > 0 {
			if now, err = r.HNS.Snapshot(ctx); err != nil {
				return Status{Ops: len(ops), Pending: pending}, fmt.Errorf("read HNS back after %d ops: %w", len(ops), err)
			}
			r.keepSnapshot(now)
		}
		if want.Echo.Record(ops, now) {
			r.saveEcho(want.Echo)
		}
		r.fights.leave(now, want)
		if !policyOnly {
			r.saveOwned(want, p.Digest)
		} else {
			r.mu.Lock()
			r.seen = endpointsSeen(hns.PodEndpoints(now, want))
			r.mu.Unlock()
		}
		if ms := want.Echo.Mismatches(); len(ms) > 0 {
			return Status{State: kube.StateReadbackMismatch, Ops: len(ops), Pending: pending, Notes: notes, Mismatches: ms, LastError: mismatchError(ms)}, nil
		}
		return Status{Digest: p.Digest, Routes: routesOf(p), State: kube.StateConverged, Ops: len(ops), Pending: pending, Notes: notes}, nil
	}
}

// refuseReplace is the status of a replace the loop breaker stops.
func (r *Reconciler) refuseReplace(have *hns.State, want *hns.Want, op hns.Op, pending []string) Status {
	ms := want.Echo.Mismatches()
	if n := have.Network(cmp.Or(op.From, op.Name)); n != nil {
		ms = append(ms, hns.NetworkMismatches(&want.Network, n)...)
	}
	if len(ms) == 0 {
		ms = []hns.Mismatch{{Object: "network " + op.Name, Field: op.Reason, Sent: "the plan's", Read: "unchanged after the replace"}}
	}
	if r.Log != nil {
		r.Log.Warn("not replacing the network again: HNS reads it back as before the replace", "network", op.Name, "reason", op.Reason)
	}
	return Status{State: kube.StateReadbackMismatch, Pending: pending, Mismatches: ms,
		LastError: fmt.Sprintf("network %s was replaced for this plan (%s) and still reads back otherwise: not replacing it again; %s", op.Name, op.Reason, mismatchError(ms))}
}

// mismatchError is the one-line summary of mismatches.
func mismatchError(ms []hns.Mismatch) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.String()
	}
	return "hns-readback-mismatch: " + strings.Join(parts, "; ") + " (not written again until the plan or the object changes; see docs/first-windows-host.md)"
}

// loadEcho reads the baseline once. A damaged one is reported and the
// agent goes on without it (at most one more write per object).
func (r *Reconciler) loadEcho() *hns.Echo {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.echo != nil {
		return r.echo
	}
	r.echo = hns.NewEcho()
	if r.Echo != nil {
		e, err := r.Echo.Load()
		if err != nil && r.Log != nil {
			r.Log.Warn("the baseline of what HNS echoes", "err", err)
		}
		if e != nil {
			r.echo = e
		}
	}
	return r.echo
}

// saveEcho keeps the baseline; a failure is logged and retried at the
// next change (until then a restart costs at most one write per object).
func (r *Reconciler) saveEcho(e *hns.Echo) {
	if r.Echo == nil {
		return
	}
	if err := r.Echo.Save(e); err != nil && r.Log != nil {
		r.Log.Warn("save the baseline of what HNS echoes", "err", err)
	}
}

// loadOwned reads the record once; a record that cannot be read stops
// every pass (guessing could adopt a network that is not the agent's).
func (r *Reconciler) loadOwned() (*hns.Owned, error) {
	if r.Owned == nil {
		return nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.loaded {
		o, err := r.Owned.Load()
		if err != nil {
			return nil, fmt.Errorf("the record of the agent's network: %w", err)
		}
		r.owned, r.loaded = o, true
	}
	return r.owned, nil
}

// saveOwned records the plan's network once HNS holds it, if the record
// says otherwise. A failure is logged and tried again at the next pass:
// until then a rename falls back on the network's identity.
func (r *Reconciler) saveOwned(want *hns.Want, digest string) {
	if r.Owned == nil {
		return
	}
	o := hns.Owned{Network: want.Network.Name, HostEndpoint: want.HostEndpoint.Name}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.owned != nil && *r.owned == o {
		return
	}
	if err := r.Owned.Save(o, digest); err != nil {
		if r.Log != nil {
			r.Log.Warn("record the agent's network", "network", o.Network, "err", err)
		}
		return
	}
	r.owned = &o
}

// needsReplace: ops replace or delete the network, or a replace is half
// done (journalled).
func (r *Reconciler) needsReplace(ops []hns.Op) bool {
	if r.Replacer != nil && r.Replacer.InProgress() {
		return true
	}
	return slices.ContainsFunc(ops, isNetworkReplace)
}

func isNetworkReplace(op hns.Op) bool {
	return op.Kind == hns.KindNetwork && (op.Action == hns.Replace || op.Action == hns.Delete)
}

// replace hands a network replace to the Replacer: nothing else is applied
// before it, since a recreated network loses its routes and endpoints.
func (r *Reconciler) replace(ctx context.Context, p *plan.NodePlan, want *hns.Want, ops []hns.Op, pending []string) (Status, error) {
	op, reason := hns.Op{Name: want.Network.Name, Reason: "resuming"}, ""
	if i := slices.IndexFunc(ops, isNetworkReplace); i >= 0 {
		op, reason = ops[i], ops[i].Reason
	}
	if r.Replacer == nil {
		return Status{State: kube.StateReplacePending, Pending: pending,
			LastError: fmt.Sprintf("network %s must be recreated (%s); this agent has no replacer: drain the node and apply", op.Name, op.Reason)}, nil
	}
	state, err := r.Replacer.Replace(ctx, p, want, reason)
	if err != nil {
		return Status{Pending: pending}, fmt.Errorf("replace network %s (%s): %w", op.Name, op.Reason, err)
	}
	st := Status{State: state, Pending: pending}
	if state == kube.StateConverged {
		st.Digest, st.Routes = p.Digest, routesOf(p)
	}
	return st, nil
}

// apply is Apply with the reconciler's attempts, counting each call.
func (r *Reconciler) apply(ctx context.Context, op hns.Op) error {
	var observe func(error)
	if r.Metrics != nil {
		observe = func(err error) { r.Metrics.op(op, err) }
	}
	return Apply(ctx, r.HNS, op, r.Attempts, observe)
}

// Apply applies op, retrying a transient HNS error with backoff, up to
// attempts calls in all (3 if attempts <= 0). observe, if set, sees the
// result of every call.
func Apply(ctx context.Context, c hns.Client, op hns.Op, attempts int, observe func(error)) error {
	if attempts <= 0 {
		attempts = 3
	}
	var err error
	for a := 1; a <= attempts; a++ {
		err = c.Apply(ctx, op)
		if observe != nil {
			observe(err)
		}
		if err == nil || !hns.IsTransient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Duration(a*a) * 50 * time.Millisecond):
		}
	}
	return fmt.Errorf("after %d attempts: %w", attempts, err)
}

// routesOf is the digest of p's route table head, "" without one.
func routesOf(p *plan.NodePlan) string {
	if p.Routes == nil {
		return ""
	}
	return p.Routes.Digest
}
