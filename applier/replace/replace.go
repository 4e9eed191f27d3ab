// Package replace recreates an HNS network whose immutable identity (type,
// subnets, VNI, VXLAN port, or its name: HNS cannot rename a network)
// changed, without pulling it from under pods (DESIGN.md §5, "Recreate
// safely"). After a rename the network deleted is the one the agent owned
// under its old name (hns.Previous), and the journal records both names.
//
// HNS cannot change a network's identity in place; the network must be
// deleted and created again, which cuts every endpoint on it. Run does it
// in journalled steps:
//
//	cordon → evict → wait-drained → snapshot-routes → delete-endpoints →
//	delete-network → create-network → wait-provider-address →
//	restore-routes → add-routes → verify → uncordon
//
// The journal (a JSON file, written atomically before each step) is the
// runner's only memory: after a crash, Run with the same Config resumes at
// the journalled step, and since every step is idempotent (it reads HNS
// and the host afresh and does only what is missing) the replace
// converges, and the network is recreated once.
//
// # Endpoints
//
// On the network being replaced there are three kinds of endpoint:
//   - the agent's host endpoint (Want.HostEndpoint, by name): deleted by
//     the runner before the network, created again after;
//   - pod endpoints, the CNI's: every endpoint that is neither the host
//     endpoint nor a remote endpoint. The runner never deletes one: it
//     evicts the pods and waits until the CNI has deleted their endpoints;
//   - remote endpoints (Flags RemoteEndpoint), kube-proxy's stand-ins for
//     pods on other nodes. HNS refuses to delete a network that still has
//     endpoints (ENTITY_HAS_REFERENCES), and kube-proxy keeps them for as
//     long as the services exist, so waiting for them would never end: the
//     runner deletes them right before the network. They carry no local
//     workload, and kube-proxy (winkernel) creates them again when it sees
//     the network's new ID. This is the one exception to "own only what it
//     made", and it is confined to a network that is being deleted anyway.
//
// # Invariant
//
// The network is never deleted while a pod endpoint is on it: right before
// the delete, the runner takes a fresh Snapshot, also when it resumes, and
// goes back to waiting for the drain if a pod endpoint is there (a pod the
// CNI re-added, a drain that lied). The window between that Snapshot and
// the delete is left to the cordon and to HNS itself, which refuses the
// delete of a network with endpoints.
package replace

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/kube"
)

// Step is one journalled step of a replace.
type Step string

const (
	StepCordon          Step = "cordon"
	StepEvict           Step = "evict"
	StepWaitDrained     Step = "wait-drained"
	StepSnapshotRoutes  Step = "snapshot-routes"
	StepDeleteEndpoints Step = "delete-endpoints"
	StepDeleteNetwork   Step = "delete-network"
	StepCreateNetwork   Step = "create-network"
	StepWaitProvider    Step = "wait-provider-address"
	StepRestoreRoutes   Step = "restore-routes"
	StepAddRoutes       Step = "add-routes"
	StepVerify          Step = "verify"
	StepUncordon        Step = "uncordon"
)

// Steps are the steps of a replace, in order. The vSwitch bind that a
// network create starts finishes asynchronously; HNS reports the
// network's ProviderAddress once it is up, so host routes are restored
// after wait-provider-address, not before, when they could be restored
// onto an interface about to vanish.
var Steps = []Step{
	StepCordon, StepEvict, StepWaitDrained, StepSnapshotRoutes, StepDeleteEndpoints,
	StepDeleteNetwork, StepCreateNetwork, StepWaitProvider, StepRestoreRoutes,
	StepAddRoutes, StepVerify, StepUncordon,
}

func stepIndex(s Step) int { return slices.Index(Steps, s) }

// Mode is how the agent may recreate a network (the intent's
// windows.replacement).
type Mode string

const (
	ModeDrain  Mode = "drain"  // drain and recreate on its own
	ModeManual Mode = "manual" // wait for hnsplan-agent replace --confirm
)

// ErrBlocked says the drain did not end in time: pod endpoints remain
// (an eviction refused by a PodDisruptionBudget, a pod that will not
// terminate). Nothing was deleted; the journal stays at wait-drained with
// the drain's start (Journal.DrainSince), and the next Run evicts once
// more and, if pods remain, is blocked again at once: the timeout is not
// waited again until an operator retries (Config.RestartDrain).
var ErrBlocked = errors.New("drain blocked")

// Config is what a replace needs. HNS, Drainer, HostRoutes, Want and
// JournalPath are required.
type Config struct {
	HNS        hns.Client
	Drainer    Drainer
	HostRoutes HostRoutes
	// Want is what the plan wants of HNS; PlanDigest the plan's digest,
	// recorded in the journal.
	Want       *hns.Want
	PlanDigest string
	// Reason is why the caller replaces the network, as its own diff says
	// ("vni-changed"): a new replace journals it and names it in its
	// Events and errors. Empty (a caller resuming a journalled replace):
	// Run's own diff of HNS says why. A journalled replace keeps the
	// journal's reason.
	Reason string
	// JournalPath is the journal file. Its directory must exist.
	JournalPath string

	// Mode ModeManual makes Run do nothing but report state
	// replace-pending until the replace is confirmed: Confirmed is set, or
	// ConfirmPath holds a confirmation of PlanDigest (see Confirm). A
	// replace once started is not asked about again.
	Mode        Mode
	Confirmed   bool
	ConfirmPath string

	// DrainTimeout bounds wait-drained (default 10 minutes);
	// ProviderAddressTimeout bounds wait-provider-address (default 1
	// minute); PollInterval is the pause between looks at HNS and between
	// retries (default 2 seconds).
	DrainTimeout           time.Duration
	ProviderAddressTimeout time.Duration
	PollInterval           time.Duration
	// Retries is how many times a call that fails with a transient error
	// is tried again (default 3). Permanent errors are not retried.
	Retries int

	// Now and Sleep are the clock (default: the real one). Tests give a
	// fake clock whose Sleep advances Now.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error

	// Admit, if set, is asked before anything is done: before a new
	// replace (once confirmed) cordons the node, and before a journalled
	// one resumes (Admission says which, and what the network goes from
	// and to). It answers "" to go on, or the state to report instead (a
	// rollout slot is not free: rollout-waiting) with why; Run then
	// returns that state, a nil error and no journal written. It is the
	// agent's rollout slot (applier/rollout).
	Admit func(ctx context.Context, a Admission) (wait kube.NodeState, why string, err error)
	// RestartDrain, if set, is asked once a journalled replace is
	// admitted: true (the operator's hnsplan-agent replace --retry) gives
	// a drain blocked past DrainTimeout a new timeout from now.
	RestartDrain func() bool

	// OnState is called with each new state, OnEvent with each thing
	// worth an Event on the Node. Both may be nil.
	OnState func(kube.NodeState)
	OnEvent func(Event)

	// Hook, if set, is called after a step is journalled (after=false)
	// and after it ran (after=true); an error stops Run there, as a crash
	// would. It is for tests.
	Hook func(step Step, after bool) error
}

// Admission is what Config.Admit is asked about: a replace about to start,
// or a journalled one about to resume, and the network's identity (routes
// left out) before and after, as HNS held it when the replace began and as
// the plan wants it. hns.VXLANOnly(&Have, &Want) says the cluster's VXLAN
// change is its only cause.
type Admission struct {
	Resumed    bool
	Have, Want hns.Network
}

// Event is one thing a replace did or ran into.
type Event struct {
	Step    Step
	Warning bool
	Message string
}

// Result is where a Run ended.
type Result struct {
	State  kube.NodeState
	Reason string // why the network is replaced ("vni-changed"); "" if it is not
	// Step is the last step journalled.
	Step Step
	// Resumed says Run continued a replace from the journal.
	Resumed bool
	// Replaced says the network was recreated (in this Run or, for a
	// resumed replace, an earlier one).
	Replaced bool
	// Pending are the pods and pod endpoints still on the node when the
	// drain was blocked.
	Pending []string
	// Restored are the host routes that this Run restored.
	Restored []Route
	// Waiting is why Admit held the replace back (State is then the one it
	// gave).
	Waiting string
}

// StepError is a failed step: the network, why it is replaced, the step
// and what went wrong. The journal stays at Step (or at the step the
// runner went back to), so the next Run resumes.
type StepError struct {
	Network string
	Reason  string
	Step    Step
	Err     error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("replace network %s (%s): step %s: %v", e.Network, e.Reason, e.Step, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// Transient reports whether the failure may go away by itself (an HNS
// timeout, a busy service, a blocked drain), so the caller should simply
// run again later.
func (e *StepError) Transient() bool {
	return errors.Is(e.Err, ErrBlocked) || hns.IsTransient(e.Err)
}

// Run replaces cfg.Want's network if its identity differs from HNS's, or
// resumes the replace recorded in the journal. It returns:
//   - kube.StateConverged and a nil error when the replace is done (the
//     journal is removed), or when there is nothing to replace (Reason "");
//   - kube.StateReplacePending and a nil error in ModeManual until
//     confirmed;
//   - kube.StateBlocked and a *StepError wrapping ErrBlocked when the
//     drain timed out; nothing was deleted;
//   - kube.StateReplacing and a *StepError otherwise: the journal names
//     the step to resume at, and Run may simply be called again.
//
// A network that does not exist at all is not a replace (the applier
// creates it in place) and is reported as kube.StateConverged.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.check(); err != nil {
		return Result{}, err
	}
	cfg.defaults()
	r := &runner{cfg: &cfg, name: cfg.Want.Network.Name, old: cfg.Want.Network.Name, oldHost: cfg.Want.HostEndpoint.Name}
	return r.run(ctx)
}

func (c *Config) check() error {
	switch {
	case c.HNS == nil:
		return errors.New("replace: Config.HNS is nil")
	case c.Drainer == nil:
		return errors.New("replace: Config.Drainer is nil")
	case c.HostRoutes == nil:
		return errors.New("replace: Config.HostRoutes is nil")
	case c.Want == nil || c.Want.Network.Name == "":
		return errors.New("replace: Config.Want names no network")
	case c.JournalPath == "":
		return errors.New("replace: Config.JournalPath is empty")
	}
	return nil
}

func (c *Config) defaults() {
	if c.Mode == "" {
		c.Mode = ModeDrain
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 10 * time.Minute
	}
	if c.ProviderAddressTimeout <= 0 {
		c.ProviderAddressTimeout = time.Minute
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 2 * time.Second
	}
	if c.Retries <= 0 {
		c.Retries = 3
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Sleep == nil {
		c.Sleep = sleep
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

type runner struct {
	cfg  *Config
	name string // the network's name
	// old and oldHost are the network being replaced and its host
	// endpoint: name and the plan's, unless the plan renamed them.
	old, oldHost string
	j            *Journal
	state        kube.NodeState
	res          Result
	// replaced: the create-network step ran (now or before a crash).
	replaced bool
}

func (r *runner) setState(s kube.NodeState) {
	r.res.State = s
	if s != r.state {
		r.state = s
		if r.cfg.OnState != nil {
			r.cfg.OnState(s)
		}
	}
}

func (r *runner) event(step Step, warning bool, format string, args ...any) {
	if r.cfg.OnEvent != nil {
		r.cfg.OnEvent(Event{Step: step, Warning: warning, Message: fmt.Sprintf(format, args...)})
	}
}

func (r *runner) fail(step Step, err error) (Result, error) {
	reason := ""
	if r.j != nil {
		reason = r.j.Reason
	}
	r.event(step, true, "%v", err)
	return r.res, &StepError{Network: r.name, Reason: reason, Step: step, Err: err}
}

func (r *runner) run(ctx context.Context) (Result, error) {
	cfg := r.cfg
	j, err := LoadJournal(cfg.JournalPath)
	if err != nil {
		return r.res, fmt.Errorf("replace network %s: %w", r.name, err)
	}
	have, err := r.snapshot(ctx)
	if err != nil {
		return r.res, fmt.Errorf("replace network %s: %w", r.name, err)
	}
	op := networkOp(have, cfg.Want)
	step := Steps[0]
	if j == nil {
		if op == nil || op.Action != hns.Replace {
			r.setState(kube.StateConverged)
			return r.res, nil
		}
		r.res.Reason = cmp.Or(cfg.Reason, op.Reason)
		if op.From != "" {
			_, r.oldHost = hns.Previous(have, cfg.Want)
			r.old = op.From
		}
		if cfg.Mode == ModeManual && !cfg.Confirmed {
			ok, err := confirmed(cfg.ConfirmPath, cfg.PlanDigest)
			if err != nil {
				return r.res, fmt.Errorf("replace network %s (%s): read the confirmation: %w", r.name, r.res.Reason, err)
			}
			if !ok {
				r.setState(kube.StateReplacePending)
				r.event("", false, "network %s must be recreated (%s), which drains the node: waiting for hnsplan-agent replace --confirm", r.name, r.res.Reason)
				return r.res, nil
			}
		}
		from, to := identityOf(have.Network(r.old)), identityOf(&cfg.Want.Network)
		if wait, err := r.admit(ctx, Admission{Have: from, Want: to}); wait != "" || err != nil {
			return r.res, err
		}
		now := cfg.Now()
		r.j = &Journal{Version: JournalVersion, PlanDigest: cfg.PlanDigest, Reason: r.res.Reason,
			Have: from, Want: to, StartedAt: now}
		if r.oldHost != cfg.Want.HostEndpoint.Name {
			r.j.HaveHostEndpoint = r.oldHost
		}
		r.event(step, false, "recreating network %s (%s): draining the node", r.name, r.res.Reason)
	} else {
		r.j, step = j, j.Step
		r.res.Resumed, r.res.Reason = true, j.Reason
		r.replaced = stepIndex(step) > stepIndex(StepCreateNetwork)
		if j.Have.Name != "" {
			r.old = j.Have.Name
		}
		if j.HaveHostEndpoint != "" {
			r.oldHost = j.HaveHostEndpoint
		}
		if j.Want.Name != r.name {
			return r.fail(step, fmt.Errorf("the journal %s is of network %s, the plan's is %s: an operator must finish or remove it", cfg.JournalPath, j.Want.Name, r.name))
		}
		if j.PlanDigest != cfg.PlanDigest {
			r.event(step, true, "the plan changed during the replace (%s → %s): continuing with the new one", j.PlanDigest, cfg.PlanDigest)
			j.PlanDigest, j.Want = cfg.PlanDigest, identityOf(&cfg.Want.Network)
		}
		if stepIndex(step) <= stepIndex(StepSnapshotRoutes) && op == nil {
			// Nothing was deleted yet and the network has the wanted
			// identity (the plan went back): give the node back. A network
			// that vanished meanwhile (a reboot, with a NonPersistent one)
			// is recreated by the remaining steps, which skip deleting it.
			// Giving the node back needs no rollout slot.
			r.event(step, false, "network %s no longer needs recreating: uncordoning", r.name)
			step = StepUncordon
		} else {
			if wait, err := r.admit(ctx, Admission{Resumed: true, Have: j.Have, Want: j.Want}); wait != "" || err != nil {
				return r.res, err
			}
			retried := r.cfg.RestartDrain != nil && r.cfg.RestartDrain()
			if retried && !j.DrainSince.IsZero() {
				r.event(step, false, "the operator retries: the drain gets a new timeout of %s", cfg.DrainTimeout)
				j.DrainSince = time.Time{}
			}
			if retried && stepIndex(step) > stepIndex(StepCordon) && stepIndex(step) < stepIndex(StepUncordon) {
				// The operator may have let go of the node (rollout resume
				// marks it) before retrying: cordoning again takes it up,
				// removing the mark, so that the node counts against
				// maxUnavailable again if this agent dies. Cordon is
				// idempotent otherwise.
				if err := r.retry(ctx, step, "cordon the node again", r.cfg.Drainer.Cordon); err != nil {
					return r.res, err
				}
			}
			if !r.drainOverdue() {
				r.event(step, false, "resuming the replace of network %s (%s) at step %s", r.name, j.Reason, step)
			}
		}
	}
	// A drain already past its timeout stays blocked while it is looked
	// at again: never replacing for a moment, which would hide the halt.
	r.setState(map[bool]kube.NodeState{true: kube.StateBlocked, false: kube.StateReplacing}[r.drainOverdue()])

	for step != "" {
		if step != r.j.Step {
			r.j.Attempts = 0
		}
		r.j.Step = step
		r.j.Attempts++
		r.j.StepStartedAt = cfg.Now()
		r.res.Step = step
		if err := r.j.save(cfg.JournalPath); err != nil {
			return r.fail(step, fmt.Errorf("write the journal: %w", err))
		}
		if err := r.hook(step, false); err != nil {
			return r.fail(step, err)
		}
		if step == StepCreateNetwork {
			r.replaced = true
		}
		next, err := r.do(ctx, step)
		if err != nil {
			if errors.Is(err, ErrBlocked) {
				r.setState(kube.StateBlocked)
			}
			return r.fail(step, err)
		}
		if err := r.hook(step, true); err != nil {
			return r.fail(step, err)
		}
		step = next
	}

	if err := removeJournal(cfg.JournalPath); err != nil {
		return r.fail(StepUncordon, fmt.Errorf("remove the journal: %w", err))
	}
	if cfg.ConfirmPath != "" {
		// A confirmation is spent once its replace is done.
		if err := os.Remove(cfg.ConfirmPath); err != nil && !os.IsNotExist(err) {
			r.event("", true, "remove the confirmation %s: %v", cfg.ConfirmPath, err)
		}
	}
	r.res.Replaced = r.replaced
	r.setState(kube.StateConverged)
	r.event("", false, "network %s recreated (%s)", r.name, r.j.Reason)
	return r.res, nil
}

// drainOverdue says the journalled replace waits for a drain that passed
// its timeout already (an earlier pass, or an agent before a restart).
func (r *runner) drainOverdue() bool {
	return r.j != nil && r.j.Step == StepWaitDrained && !r.j.DrainSince.IsZero() &&
		!r.cfg.Now().Before(r.j.DrainSince.Add(r.cfg.DrainTimeout))
}

// admit asks Config.Admit; a state to wait in is set and announced.
func (r *runner) admit(ctx context.Context, a Admission) (kube.NodeState, error) {
	if r.cfg.Admit == nil {
		return "", nil
	}
	wait, why, err := r.cfg.Admit(ctx, a)
	if err != nil {
		return "", fmt.Errorf("replace network %s (%s): %w; nothing was done", r.name, r.res.Reason, err)
	}
	if wait != "" {
		// Admit's to announce: it is asked at every pass while it waits.
		r.setState(wait)
		r.res.Waiting = why
	}
	return wait, nil
}

func (r *runner) hook(step Step, after bool) error {
	if r.cfg.Hook == nil {
		return nil
	}
	return r.cfg.Hook(step, after)
}

// do runs one step and returns the next ("" when done).
func (r *runner) do(ctx context.Context, step Step) (Step, error) {
	switch step {
	case StepCordon:
		return StepEvict, r.retry(ctx, step, "cordon the node", r.cfg.Drainer.Cordon)
	case StepEvict:
		pending, err := r.cfg.Drainer.Evict(ctx)
		if err != nil {
			return "", fmt.Errorf("evict pods: %w", err)
		}
		r.event(step, false, "evictions requested; %d pods still on the node", len(pending))
		return StepWaitDrained, nil
	case StepWaitDrained:
		return StepSnapshotRoutes, r.waitDrained(ctx)
	case StepSnapshotRoutes:
		return StepDeleteEndpoints, r.snapshotRoutes(ctx)
	case StepDeleteEndpoints:
		return StepDeleteNetwork, r.deleteEndpoints(ctx, step)
	case StepDeleteNetwork:
		return r.deleteNetwork(ctx)
	case StepCreateNetwork:
		return StepWaitProvider, r.createNetwork(ctx)
	case StepWaitProvider:
		return StepRestoreRoutes, r.waitProvider(ctx)
	case StepRestoreRoutes:
		return StepAddRoutes, r.restoreRoutes(ctx)
	case StepAddRoutes:
		return StepVerify, r.addRoutes(ctx)
	case StepVerify:
		return StepUncordon, r.verify(ctx)
	case StepUncordon:
		return "", r.retry(ctx, step, "uncordon the node", r.cfg.Drainer.Uncordon)
	}
	return "", fmt.Errorf("unknown step %q", step)
}

// podEndpoints lists the CNI's endpoints on the network being replaced:
// neither the host endpoint nor kube-proxy's remote endpoints (see the
// package doc).
func (r *runner) podEndpoints(have *hns.State) (pods, others []*hns.Endpoint) {
	for _, e := range have.EndpointsOn(r.old) {
		if e.Name == r.cfg.Want.HostEndpoint.Name || e.Name == r.oldHost || e.Remote {
			others = append(others, e)
		} else {
			pods = append(pods, e)
		}
	}
	return pods, others
}

func names(eps []*hns.Endpoint) []string {
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = fmt.Sprintf("%s (%s)", e.Name, e.IP.Addr())
	}
	return out
}

// waitDrained evicts again and again (an eviction refused by a
// PodDisruptionBudget may be accepted later, as kubectl drain retries)
// until no pod endpoint is on the network, or DrainTimeout passes.
func (r *runner) waitDrained(ctx context.Context) error {
	if r.j.DrainSince.IsZero() {
		r.j.DrainSince = r.cfg.Now()
		if err := r.j.save(r.cfg.JournalPath); err != nil {
			return fmt.Errorf("write the journal: %w", err)
		}
	}
	deadline := r.j.DrainSince.Add(r.cfg.DrainTimeout)
	var pending []string
	if r.drainOverdue() {
		// Blocked at an earlier pass: evict once more (a budget may allow
		// it now), look once, and do not wait a new timeout.
		var err error
		if pending, err = r.cfg.Drainer.Evict(ctx); err != nil {
			return fmt.Errorf("evict pods: %w", err)
		}
	}
	for {
		have, err := r.snapshot(ctx)
		if err != nil {
			return err
		}
		pods, _ := r.podEndpoints(have)
		if len(pods) == 0 {
			r.event(StepWaitDrained, false, "no pod endpoint left on network %s", r.old)
			return nil
		}
		if !r.cfg.Now().Before(deadline) {
			r.res.Pending = append(slices.Clone(pending), names(pods)...)
			return fmt.Errorf("%w since %s (--drain-timeout %s): pod endpoints %s remain on network %s (pods not evicted: %s); nothing was deleted",
				ErrBlocked, r.j.DrainSince.UTC().Format(time.RFC3339), r.cfg.DrainTimeout, strings.Join(names(pods), ", "), r.old, orNone(pending))
		}
		if pending, err = r.cfg.Drainer.Evict(ctx); err != nil {
			return fmt.Errorf("evict pods: %w", err)
		}
		if err := r.cfg.Sleep(ctx, r.cfg.PollInterval); err != nil {
			return err
		}
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// snapshotRoutes records the host's routes in the journal, durably,
// before anything is deleted. Taken again on resume: until the network is
// deleted, the table is still the one to restore.
func (r *runner) snapshotRoutes(ctx context.Context) error {
	routes, err := r.cfg.HostRoutes.List(ctx)
	if err != nil {
		return fmt.Errorf("list host routes: %w", err)
	}
	r.j.HostRoutes, r.j.HostRoutesTaken = routes, true
	if err := r.j.save(r.cfg.JournalPath); err != nil {
		return fmt.Errorf("write the journal: %w", err)
	}
	r.event(StepSnapshotRoutes, false, "recorded %d host routes", len(routes))
	return nil
}

// deleteEndpoints deletes the host endpoint and kube-proxy's remote
// endpoints from the network that is being replaced.
func (r *runner) deleteEndpoints(ctx context.Context, step Step) error {
	have, err := r.snapshot(ctx)
	if err != nil {
		return err
	}
	if !r.oldThere(have) {
		return nil // the old network is gone already
	}
	_, others := r.podEndpoints(have)
	for _, e := range others {
		op := hns.Op{Action: hns.Delete, Kind: hns.KindEndpoint, Name: e.Name, Network: e.Network, Reason: "its network is replaced"}
		if err := r.apply(ctx, step, op); err != nil {
			return err
		}
	}
	return nil
}

// deleteNetwork deletes the old network, checking the invariant first
// from a fresh snapshot: with a pod endpoint on it, it goes back to
// wait-drained instead.
func (r *runner) deleteNetwork(ctx context.Context) (Step, error) {
	have, err := r.snapshot(ctx)
	if err != nil {
		return "", err
	}
	if !r.oldThere(have) {
		if networkOp(have, r.cfg.Want) == nil {
			r.event(StepDeleteNetwork, false, "network %s already has the wanted identity", r.name)
			return StepWaitProvider, nil
		}
		return StepCreateNetwork, nil // deleted before a crash
	}
	if pods, _ := r.podEndpoints(have); len(pods) > 0 {
		r.event(StepDeleteNetwork, true, "pod endpoints %s are on network %s again: not deleting it; back to waiting for the drain",
			strings.Join(names(pods), ", "), r.old)
		r.j.DrainSince = time.Time{} // a new drain, with its own timeout
		return StepWaitDrained, nil
	}
	// kube-proxy may have added remote endpoints since delete-endpoints.
	if err := r.deleteEndpoints(ctx, StepDeleteNetwork); err != nil {
		return "", err
	}
	del := hns.Op{Action: hns.Delete, Kind: hns.KindNetwork, Name: r.old, Reason: r.j.Reason}
	if err := r.apply(ctx, StepDeleteNetwork, del); err != nil {
		return "", err
	}
	r.event(StepDeleteNetwork, false, "deleted network %s", r.old)
	return StepCreateNetwork, nil
}

func (r *runner) createNetwork(ctx context.Context) error {
	have, err := r.snapshot(ctx)
	if err != nil {
		return err
	}
	op := networkOp(have, r.cfg.Want)
	switch {
	case op == nil:
		return nil // created before a crash
	case op.Action != hns.Create:
		return fmt.Errorf("network %s is there again with another identity (%s): something else recreated it", r.name, op.Reason)
	}
	if err := r.apply(ctx, StepCreateNetwork, *op); err != nil {
		return err
	}
	r.event(StepCreateNetwork, false, "created network %s", r.name)
	// The read-back of the new network goes into the baseline at once:
	// the steps after this one compare HNS with it, and a network HNS
	// echoes otherwise than it was sent must not look replaced again.
	// The caller saves the baseline when Run returns.
	if e := r.cfg.Want.Echo; e != nil {
		now, err := r.snapshot(ctx)
		if err != nil {
			return err
		}
		e.Record([]hns.Op{*op}, now)
	}
	return nil
}

// waitProvider waits until HNS shows the ProviderAddress and DR MAC it
// adds to a new Overlay network by itself (flannel and Calico poll for
// them too); routes and the host endpoint need the network up.
func (r *runner) waitProvider(ctx context.Context) error {
	if r.cfg.Want.Network.Type != "Overlay" {
		return nil
	}
	deadline := r.cfg.Now().Add(r.cfg.ProviderAddressTimeout)
	for {
		have, err := r.snapshot(ctx)
		if err != nil {
			return err
		}
		n := have.Network(r.name)
		if n == nil {
			return fmt.Errorf("network %s is gone", r.name)
		}
		if n.ProviderAddress.IsValid() && n.DRMAC != "" {
			return nil
		}
		if !r.cfg.Now().Before(deadline) {
			return &hns.Error{Call: "wait for ProviderAddress", Msg: fmt.Sprintf("network %s has no ProviderAddress or DrMacAddress after %s", r.name, r.cfg.ProviderAddressTimeout), Transient: true}
		}
		if err := r.cfg.Sleep(ctx, r.cfg.PollInterval); err != nil {
			return err
		}
	}
}

func (r *runner) hnsSubnets() []netip.Prefix {
	var out []netip.Prefix
	for _, n := range []hns.Network{r.j.Have, r.j.Want, r.cfg.Want.Network} {
		for _, s := range n.Subnets {
			out = append(out, s.Prefix)
		}
	}
	return out
}

func (r *runner) lost(ctx context.Context) ([]Route, error) {
	if !r.j.HostRoutesTaken {
		return nil, errors.New("the journal holds no host route snapshot")
	}
	now, err := r.cfg.HostRoutes.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list host routes: %w", err)
	}
	return lostRoutes(r.j.HostRoutes, now, r.hnsSubnets())
}

func (r *runner) restoreRoutes(ctx context.Context) error {
	lost, err := r.lost(ctx)
	if err != nil {
		return err
	}
	for _, rt := range lost {
		err := r.retry(ctx, StepRestoreRoutes, "restore host route "+rt.String(), func(ctx context.Context) error {
			return r.cfg.HostRoutes.Add(ctx, rt)
		})
		if err != nil {
			return err
		}
		r.res.Restored = append(r.res.Restored, rt)
		r.event(StepRestoreRoutes, false, "restored host route %s", rt)
	}
	return nil
}

// addRoutes applies what Diff still wants once the network is there: its
// remote routes and policies, and the host endpoint. Pod ACL updates are
// left to the applier: the pods come back later, one by one.
func (r *runner) addRoutes(ctx context.Context) error {
	have, err := r.snapshot(ctx)
	if err != nil {
		return err
	}
	// Routes in batches: a retried batch sends only what has not landed.
	for _, op := range hns.BatchRoutes(hns.Diff(have, r.cfg.Want), hns.DefaultRouteBatch) {
		switch op.Kind {
		case hns.KindACL:
			continue
		case hns.KindNetwork:
			return fmt.Errorf("network %s does not have the wanted identity: %s %s (%s)", r.name, op.Action.Symbol(), op.Kind, op.Reason)
		}
		if err := r.apply(ctx, StepAddRoutes, op); err != nil {
			return err
		}
	}
	return nil
}

// verify checks that HNS holds what the plan wants (but pod ACLs, the
// applier's) and that no host route is missing. A missing host route
// sends the journal back to restore-routes, so the next Run restores it.
func (r *runner) verify(ctx context.Context) error {
	have, err := r.snapshot(ctx)
	if err != nil {
		return err
	}
	var left []string
	for _, op := range hns.Diff(have, r.cfg.Want) {
		if op.Kind != hns.KindACL {
			left = append(left, opLabel(op))
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("HNS still differs from the plan: %s", strings.Join(left, "; "))
	}
	lost, err := r.lost(ctx)
	if err != nil {
		return err
	}
	if len(lost) > 0 {
		r.j.Step, r.j.Attempts = StepRestoreRoutes, 0
		if err := r.j.save(r.cfg.JournalPath); err != nil {
			return fmt.Errorf("write the journal: %w", err)
		}
		var s []string
		for _, rt := range lost {
			s = append(s, rt.String())
		}
		return fmt.Errorf("host routes lost after the restore (the next run restores them): %s", strings.Join(s, "; "))
	}
	return nil
}

// oldThere reports whether the network being replaced is still in HNS
// as it was: under its old name after a rename, or under the plan's name
// without the wanted identity.
func (r *runner) oldThere(have *hns.State) bool {
	if have.Network(r.old) == nil {
		return false
	}
	return r.old != r.name || networkOp(have, r.cfg.Want) != nil
}

// networkOp returns Diff's op on the network itself (a create or a
// replace), or nil when the network has the wanted identity.
func networkOp(have *hns.State, want *hns.Want) *hns.Op {
	for _, op := range hns.Diff(have, want) {
		if op.Kind == hns.KindNetwork && op.Name == want.Network.Name {
			return &op
		}
	}
	return nil
}

// identityOf is a network without what changes in place or what HNS
// generates: what the journal records.
func identityOf(n *hns.Network) hns.Network {
	if n == nil {
		return hns.Network{}
	}
	return hns.Network{Name: n.Name, Type: n.Type, Subnets: slices.Clone(n.Subnets), VXLANPort: n.VXLANPort}
}

func opLabel(op hns.Op) string {
	s := fmt.Sprintf("%s %s %s", op.Action.Symbol(), op.Kind, op.Name)
	if op.Network != "" && op.Kind != hns.KindNetwork {
		s += " on " + op.Network
	}
	return s
}

// apply applies op, retrying transient errors.
func (r *runner) apply(ctx context.Context, step Step, op hns.Op) error {
	return r.retry(ctx, step, opLabel(op), func(ctx context.Context) error { return r.cfg.HNS.Apply(ctx, op) })
}

func (r *runner) snapshot(ctx context.Context) (*hns.State, error) {
	var st *hns.State
	err := r.retry(ctx, "", "read HNS", func(ctx context.Context) (err error) {
		st, err = r.cfg.HNS.Snapshot(ctx)
		return err
	})
	return st, err
}

// retry calls f until it succeeds, fails with a permanent error, or has
// failed with a transient one Retries+1 times.
func (r *runner) retry(ctx context.Context, step Step, what string, f func(context.Context) error) error {
	var err error
	for i := 0; ; i++ {
		if err = f(ctx); err == nil {
			return nil
		}
		if ctx.Err() != nil || !hns.IsTransient(err) {
			return fmt.Errorf("%s: %w", what, err)
		}
		if i >= r.cfg.Retries {
			return fmt.Errorf("%s: %w (tried %d times)", what, err, i+1)
		}
		r.event(step, true, "%s: %v; retrying", what, err)
		if serr := r.cfg.Sleep(ctx, r.cfg.PollInterval); serr != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
}
