package fleet

import (
	"fmt"
	"strings"
	"time"

	"github.com/hnsplan/hnsplan/applier/kube"
)

// A Stall is why a node's rollout cannot go on by itself: the node halts
// the rollout (docs/operations.md, "Rollout status") until an operator
// acts. Every stall `rollout status` knows is one of stallChecks.
type Stall struct {
	Kind string `json:"kind"` // one of the Stall* kinds
	// Reason says what is stuck and since when; Fix what lets it go.
	Reason string `json:"reason"`
	Fix    string `json:"fix"`
}

// Kinds of Stall.
const (
	// StallState: the node holds a slot and its agent reports it blocked
	// (a drain past --drain-timeout) or failed.
	StallState = "state"
	// StallForeignHolder: a slot is held by a name that is no Windows
	// node (no Node, or a Node of another OS): no agent will ever release
	// it.
	StallForeignHolder = "foreign-holder"
	// StallAbandoned: the slot's holder stopped renewing it (its agent
	// died or cannot reach the API server) for more than twice its
	// duration.
	StallAbandoned = "slot-abandoned"
	// StallStranded: a node cordoned by hnsplan's agent holds no slot and
	// no operator let go of it (kube.Stranded): its agent is gone in the
	// middle of a replace. It counts against maxUnavailable.
	StallStranded = "stranded"
	// StallHeld: the agent holds its replace for a Windows build with a
	// known container-networking regression (the plan's
	// rollout.buildRegression is hold): it takes no slot and cordons
	// nothing, and goes on by itself once the node reports a fixed build.
	StallHeld = "rollout-held"
	// StallSeveralSlots: a node holds more than one slot. Its agent never
	// takes a second; another writer with its identity made it, and it
	// keeps another node waiting until the agent gives it up.
	StallSeveralSlots = "several-slots"
)

// AbandonedAfter is how many lease durations a slot must have gone
// unrenewed, by the CLI's clock against the renewTime the holder's clock
// wrote, before status calls it abandoned: twice, so that a skew of up
// to a whole duration between the two clocks cannot make a live holder
// look dead.
const AbandonedAfter = 2

// stallFacts is what the checks read beyond a row: the clock, the slots
// the row's node holds, and its Node.
type stallFacts struct {
	now           time.Time
	slots         []SlotRollout
	windows       bool // labelled kubernetes.io/os=windows, or unlabelled
	unschedulable bool
	annotations   map[string]string
}

// stallChecks are every stall, in the order they are looked for; the
// first that applies is the row's. A new kind of halt is a new check.
var stallChecks = []func(r *NodeRollout, f stallFacts) *Stall{
	foreignHolder,
	severalSlots,
	abandonedSlot,
	haltedState,
	strandedNode,
	rolloutHeld,
}

func (st *Status) stallOf(r *NodeRollout, f stallFacts) *Stall {
	for _, check := range stallChecks {
		if s := check(r, f); s != nil {
			return s
		}
	}
	return nil
}

func foreignHolder(r *NodeRollout, f stallFacts) *Stall {
	if r.Slot == "" || (!r.NoNode && f.windows) {
		return nil
	}
	what := "no Node of that name exists"
	if !r.NoNode {
		what = "Node " + r.Node + " is not a Windows node"
	}
	return &Stall{Kind: StallForeignHolder,
		Reason: fmt.Sprintf("%s is held by %q, and %s: no agent will release it (a Lease made by hand, or of a deleted node)", r.Slot, r.Node, what),
		Fix:    "hnsplan rollout resume " + r.Node + " deletes it"}
}

func severalSlots(r *NodeRollout, f stallFacts) *Stall {
	if len(f.slots) < 2 {
		return nil
	}
	names := make([]string, len(f.slots))
	for i, s := range f.slots {
		names[i] = s.Name
	}
	return &Stall{Kind: StallSeveralSlots,
		Reason: fmt.Sprintf("it holds %d slots (%s), and a node holds one: the agent never takes a second, so another writer with the node's identity made them; each keeps another node waiting", len(names), strings.Join(names, ", ")),
		Fix:    "its agent gives up all but one on its next pass (Event RolloutSlotsGivenUp); if it does not run, hnsplan rollout resume " + r.Node + " frees them all (and halts its replace until hnsplan-agent replace --retry)"}
}

func abandonedSlot(r *NodeRollout, f stallFacts) *Stall {
	for _, s := range f.slots {
		last := s.Renewed
		if last.IsZero() {
			last = s.Acquired
		}
		d := time.Duration(s.Seconds) * time.Second
		if !last.IsZero() && f.now.Sub(last) <= AbandonedAfter*d {
			continue
		}
		ago := "never renewed"
		if !last.IsZero() {
			ago = fmt.Sprintf("last renewed %s ago (at %s), more than twice its %ds", f.now.Sub(last).Round(time.Second), last.UTC().Format(time.RFC3339), s.Seconds)
		}
		return &Stall{Kind: StallAbandoned,
			Reason: fmt.Sprintf("%s is %s: %s's agent stopped renewing it (dead, or cut off from the API server)", s.Name, ago, r.Node),
			Fix:    "start its agent again, or hnsplan rollout resume " + r.Node + " to free the slot and let go of the node"}
	}
	return nil
}

// haltedState is the halt the agent reports itself (docs/operations.md):
// a slot holder blocked or in error, or with a last error while not
// replacing (a replace under way retries its own errors).
func haltedState(r *NodeRollout, _ stallFacts) *Stall {
	if r.Slot == "" || !(r.State == "blocked" || r.State == "error" || (r.LastError != "" && r.State != "replacing")) {
		return nil
	}
	return &Stall{Kind: StallState,
		Reason: fmt.Sprintf("it holds %s in state %s", r.Slot, TableCell(r.State, 32)),
		Fix:    "fix the node and run hnsplan-agent replace --retry on it, or hnsplan rollout resume " + r.Node + " to go on without it"}
}

func strandedNode(r *NodeRollout, f stallFacts) *Stall {
	if r.Slot != "" || r.NoNode || !f.windows || !kube.Stranded(f.unschedulable, f.annotations) {
		return nil
	}
	return &Stall{Kind: StallStranded,
		Reason: fmt.Sprintf("it is cordoned by hnsplan's agent and holds no rollout slot (state %s): its agent is gone in the middle of a replace, and the node counts against maxUnavailable",
			TableCell(r.State, 32)),
		Fix: "start its agent again (it resumes its replace), or hnsplan rollout resume " + r.Node + " to let go of it (it stays cordoned until you uncordon it)"}
}

// windowsNode says whether a Node's labels make it a Windows node, or
// leave its OS unsaid (kubelet always sets the label; a Node without it
// is not called foreign).
func windowsNode(labels map[string]string) bool {
	os, ok := labels["kubernetes.io/os"]
	return !ok || strings.EqualFold(os, "windows")
}

// rolloutHeld is a replace the agent holds for its node's Windows build
// (state rollout-held): no slot, but no progress without an operator or
// an update.
func rolloutHeld(r *NodeRollout, _ stallFacts) *Stall {
	if r.State != StateRolloutHeld {
		return nil
	}
	return &Stall{Kind: StallHeld,
		Reason: TableCell(r.LastError, 400),
		Fix:    "install the update its reason names (the hold ends once the Node reports that build), or set windows.rollout.buildRegression: proceed; resume frees nothing for it"}
}
