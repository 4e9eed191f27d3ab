package applier

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/internal/atomicfile"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/applier/rollout"
	"github.com/hnsplan/hnsplan/applier/statedir"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/winbuild"
	"github.com/hnsplan/hnsplan/internal/crash"
)

// WindowsLabel is the node label that makes a node one of the Windows
// nodes a percentage of rollout.maxUnavailable is of.
const WindowsLabel = "kubernetes.io/os"

// slotGate is the agent's hand on the rollout slots (applier/rollout) and
// on the operator's --retry and --abort: the replace asks it before it
// cordons (Admit), and it releases the slot once the replace is done.
//
// Its memory is the state directory's SlotFile: the slot the node holds,
// for which plan, or that the replace of a plan was halted by the
// operator (its slot freed by `hnsplan rollout resume`, or the replace
// aborted), so that the agent does not take a slot for that plan again by
// itself until `hnsplan-agent replace --retry` or another plan.
//
// Its methods are called from the agent's passes only, one at a time; the
// renewal (rollout.Slots.Keep) runs in a goroutine it starts after a slot
// is taken and stops before every other use of the slots.
type slotGate struct {
	dir   string
	log   *slog.Logger
	event func(eventtype, reason, message string)
	// trigger asks for a pass (the renewal found the slot lost).
	trigger func()
	// base is the context the renewal runs in (the agent's Run's).
	base func() context.Context

	// With a cluster only; nil slots: no rollout slots (plan only).
	slots  *rollout.Slots
	leases typedcoordinationv1.LeasesGetter
	nodes  func() []kube.Node

	// held is the node's Windows build and its known regression, if it
	// has one (rollout.buildRegression hold); nil: none known.
	held func() (winbuild.Build, winbuild.Regression, bool)

	stopKeep context.CancelFunc
	keepDone chan struct{}
	// why is what the last Admit waited for, "" when it let the replace
	// go on; said is the last one announced by an Event.
	why, said string
	// retried says the last Admit took an operator's --retry; the
	// replace asks it once (RestartDrain).
	retried bool
}

// slotRecord is the SlotFile.
type slotRecord struct {
	// Slot is the Lease this node holds for Plan's replace; "" for none.
	Slot string `json:"slot,omitempty"`
	// Plan is the digest of the plan the record is about.
	Plan string `json:"plan,omitempty"`
	// Halted says an operator stopped Plan's replace: "freed" (its slot
	// was freed) or "aborted" (replace --abort).
	Halted string    `json:"halted,omitempty"`
	At     time.Time `json:"at"`
}

const (
	haltFreed   = "freed"
	haltAborted = "aborted"
)

func (g *slotGate) load() slotRecord {
	var r slotRecord
	b, err := os.ReadFile(filepath.Join(g.dir, statedir.SlotFile))
	if errors.Is(err, fs.ErrNotExist) {
		return r
	}
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil {
		// A damaged record forgets a slot (it expires) or a halt (the
		// operator halts again): never more than the record said.
		g.log.Warn("the rollout slot record is unreadable; going on without it", "file", statedir.SlotFile, "err", err)
		return slotRecord{}
	}
	return r
}

func (g *slotGate) save(r slotRecord) error {
	path := filepath.Join(g.dir, statedir.SlotFile)
	if r == (slotRecord{}) {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove the rollout slot record %s: %w", path, err)
		}
		return nil
	}
	r.At = time.Now().UTC()
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, append(b, '\n')); err != nil {
		return fmt.Errorf("write the rollout slot record %s: %w", path, err)
	}
	return nil
}

// takeRequest reports whether the operator's request file name (RetryFile,
// AbortFile) is there for the plan with digest, and removes it. A request
// names the plan it was asked for: one for another plan (a plan published
// after the operator asked) is dropped, logged and reported as a
// ReplaceRequestIgnored Event, so that an abort never hits the next plan.
func (g *slotGate) takeRequest(name, digest string) bool {
	path := filepath.Join(g.dir, name)
	data, err := readRequest(path)
	if err != nil {
		return false
	}
	if err := os.Remove(path); err != nil {
		g.log.Warn("remove the operator's request", "file", path, "err", err)
	}
	if strings.TrimSpace(string(data)) == digest {
		return true
	}
	asked := strconv.Quote(strings.TrimSpace(string(data)))
	what := strings.TrimPrefix(name, "replace-")
	if digest == "" {
		digest = "none"
	}
	g.log.Warn("the operator's request is for another plan: ignored", "request", what, "asked", asked, "plan", digest)
	g.event("Warning", "ReplaceRequestIgnored", fmt.Sprintf("replace --%s was asked for plan %s, but the plan in force is %s (published since): the request is ignored and this plan goes on; ask again for it if meant", what, asked, digest))
	return false
}

// readRequest reads at most a digest's worth of a request file: what
// is longer names no plan.
func readRequest(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 128))
}

// halted says the operator halted the replace of the plan with digest.
func (g *slotGate) halted(digest string) bool {
	r := g.load()
	return r.Halted != "" && r.Plan == digest
}

// Admit is replace.Config.Admit for plan p: "" when the replace may go on
// (this node holds a rollout slot, or there are none), else the state to
// wait in and why.
func (g *slotGate) Admit(ctx context.Context, p *plan.NodePlan, a replace.Admission) (kube.NodeState, string, error) {
	st, why, err := g.admit(ctx, p, a)
	g.why = why
	if why != "" && why != g.said {
		g.log.Info("replace waits", "state", st, "why", why)
		if st == kube.StateRolloutHeld {
			g.event("Warning", "RolloutHeld", why)
		} else {
			g.event("Normal", "RolloutWaiting", why)
		}
	}
	g.said = why
	return st, why, err
}

// Retried is replace.Config.RestartDrain: whether the last Admit took an
// operator's --retry, which gives a blocked drain a new timeout. It says
// so once.
func (g *slotGate) Retried() bool {
	r := g.retried
	g.retried = false
	return r
}

// waiting is why the last Admit held the replace back, "" if it did not.
func (g *slotGate) waiting() string { return g.why }

func (g *slotGate) admit(ctx context.Context, p *plan.NodePlan, a replace.Admission) (kube.NodeState, string, error) {
	rec := g.load()
	retry := g.takeRequest(statedir.RetryFile, p.Digest)
	g.retried = retry
	if rec.Halted != "" && (rec.Plan != p.Digest || retry) {
		if retry {
			g.log.Info("the operator retries the replace", "plan", p.Digest, "halted", rec.Halted)
		}
		rec = slotRecord{}
		if err := g.save(rec); err != nil {
			return "", "", err
		}
	}
	switch rec.Halted {
	case haltFreed:
		return kube.StateRolloutHalted, fmt.Sprintf("its rollout slot was freed by an operator (hnsplan rollout resume) for plan %s: "+
			"the agent does nothing more for it until hnsplan-agent replace --retry (or --abort)", p.Digest), nil
	case haltAborted:
		return kube.StateReplacePending, fmt.Sprintf("the replace for plan %s was aborted (hnsplan-agent replace --abort): "+
			"hnsplan-agent replace --retry, or a new plan, starts it again", p.Digest), nil
	}
	// rollout.buildRegression hold: a replace not yet started (no slot
	// taken, nothing cordoned or deleted) does not start on a build with
	// a known regression. One under way goes on: stopping it half way
	// leaves the node worse off than either end.
	if p.Rollout.HoldsBuild() && !a.Resumed && rec.Slot == "" && g.held != nil {
		if b, r, bad := g.held(); bad {
			return kube.StateRolloutHeld, fmt.Sprintf("rollout held: this node runs Windows build %s, which has a known container-networking regression since %s, "+
				"and the plan's rollout.buildRegression is hold: no replace starts (no slot, no cordon) until the node reports %s or later", b, r.Introduced, r.Fixed), nil
		}
	}
	if g.slots == nil {
		return "", "", nil
	}
	g.stop()
	lost := func() (kube.NodeState, string, error) {
		g.log.Warn("rollout slot lost: freed by an operator (hnsplan rollout resume), or taken over after it expired; waiting for hnsplan-agent replace --retry",
			"slot", rec.Slot, "plan", p.Digest)
		g.event("Warning", "RolloutSlotLost", fmt.Sprintf("rollout slot %s is no longer this node's: the replace for plan %s halts until hnsplan-agent replace --retry", rec.Slot, p.Digest))
		if err := g.save(slotRecord{Plan: p.Digest, Halted: haltFreed}); err != nil {
			return "", "", err
		}
		return g.admit(ctx, p, a)
	}
	if rec.Slot != "" {
		ok, err := g.stillHeld(ctx, rec.Slot)
		if err != nil {
			return "", "", err
		}
		if !ok {
			return lost()
		}
	}
	nodes := g.nodes()
	windows := 0
	winNodes, stranded := map[string]bool{}, []string(nil)
	for _, n := range nodes {
		if _, ok := n.Labels[WindowsLabel]; !ok {
			// Its OS unsaid (kubelet always sets the label): its slot is
			// not taken for a squatter's, as rollout status does not call
			// it foreign (fleet.windowsNode).
			winNodes[n.Name] = true
		}
		if n.Labels[WindowsLabel] == "windows" {
			windows++
			winNodes[n.Name] = true
			if n.Name != g.slots.Holder && kube.Stranded(n.Unschedulable, n.Annotations) {
				stranded = append(stranded, n.Name)
			}
		}
	}
	if len(nodes) > 0 {
		g.slots.Windows = winNodes
	}
	g.slots.Stranded = stranded
	max, err := p.Rollout.Slots(windows)
	if err != nil {
		return "", "", fmt.Errorf("plan %s: %w", p.Digest, err)
	}
	// rollout.vxlanChange all-at-once: a replace whose only cause is the
	// cluster's VXLAN identity may take a slot whatever the others hold,
	// and waits for no earlier order group. Nodes on the old and on the
	// new VNI or port cannot reach each other until all have switched, so
	// one wave is the shortest split; the cost, every Windows node drained
	// at once, is what the setting accepts. A replace with any other
	// cause keeps maxUnavailable, which counts these slots too.
	allAtOnce := p.Rollout.AllAtOnce() && hns.VXLANOnly(&a.Have, &a.Want)
	if allAtOnce && windows > max {
		max = windows
	}
	g.slots.Max = max
	if rec.Slot == "" && p.Rollout != nil && p.Rollout.Order != "" && !allAtOnce {
		if why, err := g.orderWait(ctx, p.Rollout.Order, nodes); err != nil || why != "" {
			if why != "" {
				return kube.StateRolloutWaiting, why, nil
			}
			return "", "", err
		}
	}
	// A node whose record says it holds a slot only holds on to it: one
	// freed since the check above (rollout resume) is lost, not taken
	// again as if new.
	acquire := g.slots.Acquire
	if rec.Slot != "" {
		acquire = g.slots.Hold
	}
	name, ok, err := acquire(ctx)
	if err == nil && !ok && rec.Slot != "" {
		return lost()
	}
	if extra := g.slots.Extra; len(extra) > 0 {
		g.slots.Extra = nil
		g.log.Warn("gave up rollout slots held in this node's name beyond its one (made by another writer with its identity)", "slots", extra, "kept", name)
		g.event("Warning", "RolloutSlotsGivenUp", fmt.Sprintf("gave up rollout slots %s, held in this node's name beyond its one %s: a node holds one slot; another writer with this node's identity made them", strings.Join(extra, ", "), name))
	}
	if err != nil {
		return "", "", err
	}
	if !ok {
		return kube.StateRolloutWaiting, g.busy(ctx, max, stranded), nil
	}
	if rec.Slot != name || rec.Plan != p.Digest {
		if err := g.save(slotRecord{Slot: name, Plan: p.Digest}); err != nil {
			// Unrecorded, a slot is still renewed while held and expires
			// once the agent is gone: go on.
			g.log.Warn("record the rollout slot", "err", err)
		}
	}
	if rec.Slot != name {
		pace := fmt.Sprintf("at most %d nodes replace at once", max)
		if allAtOnce {
			pace = fmt.Sprintf("rollout.vxlanChange all-at-once: a replace for the VXLAN VNI or port alone, up to all %d Windows nodes at once", max)
		}
		g.log.Info("rollout slot taken", "slot", name, "plan", p.Digest, "max", max, "allAtOnce", allAtOnce, "resumed", a.Resumed)
		g.event("Normal", "RolloutSlotTaken", fmt.Sprintf("took rollout slot %s (%s) for plan %s", name, pace, p.Digest))
	}
	g.startKeep()
	return "", "", nil
}

// stillHeld says whether the Lease name is still this node's.
func (g *slotGate) stillHeld(ctx context.Context, name string) (bool, error) {
	l, err := g.leases.Leases(g.slots.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read rollout slot %s/%s: %w", g.slots.Namespace, name, err)
	}
	return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == g.slots.Holder, nil
}

// busy says who holds the slots, and which nodes count against max
// without one, for a node that waits for a slot.
func (g *slotGate) busy(ctx context.Context, max int, stranded []string) string {
	also := ""
	if len(stranded) > 0 {
		also = fmt.Sprintf("; cordoned by hnsplan's agent with no live slot, so counted: %s (hnsplan rollout status says how to let go of them)", strings.Join(stranded, ", "))
	}
	held, err := rollout.Status(ctx, g.leases, g.slots.Namespace)
	if err != nil {
		return fmt.Sprintf("waiting for a rollout slot (at most %d nodes replace at once%s)", max, also)
	}
	var who []string
	for _, s := range held {
		who = append(who, s.Name+" by "+s.Holder)
	}
	return fmt.Sprintf("waiting for a rollout slot (at most %d nodes replace at once; held: %s%s)", max, cmp.Or(strings.Join(who, ", "), "none"), also)
}

// inRollout are the states of a node that is in the rollout: waiting for
// a slot, replacing, or halted on one.
var inRollout = []kube.NodeState{kube.StateRolloutWaiting, kube.StateReplacing, kube.StateBlocked, kube.StateError, kube.StateRolloutHalted}

// orderWait applies rollout.order: a node whose group (its value of the
// label key order; groups sorted, a node without the label last) comes
// later takes no slot while a Windows node of an earlier group is in the
// rollout (its hnsplan.io/state, as this node's cache shows it) or holds
// a slot. It returns why this node waits, or "".
func (g *slotGate) orderWait(ctx context.Context, order string, nodes []kube.Node) (string, error) {
	group := func(n kube.Node) (string, bool) { v, ok := n.Labels[order]; return v, ok }
	var me *kube.Node
	for i := range nodes {
		if nodes[i].Name == g.slots.Holder {
			me = &nodes[i]
		}
	}
	if me == nil {
		return "", nil // not in the cache yet: the slots alone bound it
	}
	mine, labelled := group(*me)
	earlier := func(n kube.Node) bool {
		v, ok := group(n)
		return ok && (!labelled || v < mine)
	}
	held, err := rollout.Status(ctx, g.leases, g.slots.Namespace)
	if err != nil {
		return "", err
	}
	holders := map[string]string{}
	for _, s := range held {
		holders[s.Holder] = s.Name
	}
	slices.SortFunc(nodes, func(a, b kube.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range nodes {
		if n.Name == me.Name || n.Labels[WindowsLabel] != "windows" || !earlier(n) {
			continue
		}
		v, _ := group(n)
		if s, ok := holders[n.Name]; ok {
			return fmt.Sprintf("waiting for the nodes of %s=%s to finish first (rollout.order): node %s holds slot %s", order, v, n.Name, s), nil
		}
		if st := kube.NodeState(n.Annotations[kube.AnnotationState]); slices.Contains(inRollout, st) {
			return fmt.Sprintf("waiting for the nodes of %s=%s to finish first (rollout.order): node %s is %s", order, v, n.Name, st), nil
		}
	}
	return "", nil
}

// Done releases the slot this node holds, if any, once its replace is done
// (or a pass converged without one): the slot goes to the next node.
func (g *slotGate) Done(ctx context.Context) {
	rec := g.load()
	if rec.Halted == "" && rec != (slotRecord{}) {
		// The record goes first: a crash in between leaves a Lease that
		// expires, never a record of a slot freed by someone else.
		if err := g.save(slotRecord{}); err != nil {
			g.log.Warn("remove the rollout slot record", "err", err)
		}
	}
	if g.slots == nil {
		return
	}
	g.stop()
	held := g.slots.Held()
	if held == "" {
		return
	}
	if err := g.slots.Release(ctx); err != nil {
		// Unreleased, the slot expires a lease duration later.
		g.log.Warn("release the rollout slot", "slot", held, "err", err)
		return
	}
	g.log.Info("rollout slot released", "slot", held)
	g.event("Normal", "RolloutSlotReleased", "released rollout slot "+held)
}

// Abort carries out an operator's replace --abort, if one is asked for:
// a replace that has deleted nothing yet is given up (uncordon, journal
// removed), its slot released, and the plan's replace waits for --retry or
// another plan (replace-pending). A replace past that point is refused
// and goes on.
func (g *slotGate) Abort(ctx context.Context, p *plan.NodePlan, journal string, d replace.Drainer) {
	digest := ""
	if p != nil {
		digest = p.Digest
	}
	if !g.takeRequest(statedir.AbortFile, digest) {
		return
	}
	j, err := replace.Abort(ctx, journal, d)
	if err != nil {
		g.log.Warn("replace --abort refused", "err", err)
		g.event("Warning", "ReplaceAbortRefused", err.Error())
		return
	}
	g.Done(ctx)
	if err := g.save(slotRecord{Plan: digest, Halted: haltAborted}); err != nil {
		g.log.Warn("record the abort", "err", err)
	}
	what := "no replace was under way"
	if j != nil {
		what = fmt.Sprintf("the replace of network %s (%s) was given up at step %s", j.Want.Name, j.Reason, j.Step)
	}
	g.log.Info("replace aborted by the operator", "what", what, "plan", digest)
	g.event("Normal", "ReplaceAborted", what+"; the node is uncordoned and waits for hnsplan-agent replace --retry or a new plan")
}

func (g *slotGate) startKeep() {
	if g.slots.Held() == "" || g.stopKeep != nil {
		return
	}
	ctx, cancel := context.WithCancel(g.base())
	done := make(chan struct{})
	g.stopKeep, g.keepDone = cancel, done
	go func() {
		defer close(done)
		defer crash.Goroutine("hnsplan-agent")
		if err := g.slots.Keep(ctx); errors.Is(err, rollout.ErrLost) {
			g.log.Warn("rollout slot lost while held: freed by an operator, or taken over after it expired")
			g.trigger()
		}
	}()
}

// stop stops the renewal and waits for it: the slots are then the
// caller's alone.
func (g *slotGate) stop() {
	if g.stopKeep == nil {
		return
	}
	g.stopKeep()
	<-g.keepDone
	g.stopKeep, g.keepDone = nil, nil
}
