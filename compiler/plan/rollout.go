package plan

import (
	"fmt"
	"strconv"
	"strings"
)

// Rollout is how a node takes turns with the others for a disruptive
// change, a network replace (windows.rollout). A nil Rollout is the
// defaults: one node at a time, in no particular order.
type Rollout struct {
	// MaxUnavailable is how many Windows nodes may replace their network
	// at once: a count ("2") or a percentage of the cluster's Windows nodes
	// ("40%"); "1" when empty. The agent counts the nodes, so that adding a
	// node does not rewrite every plan.
	MaxUnavailable string `json:"maxUnavailable,omitempty"`
	// Order is a node label key (topology.kubernetes.io/zone, say): the
	// nodes replace in groups by its value, in sorted order, one group
	// after another; a node without the label goes last.
	Order string `json:"order,omitempty"`
	// VXLANChange is the pace of a replace whose only cause is the
	// cluster's VXLAN identity (the VNI, the UDP port): VXLANAllAtOnce
	// lets every Windows node take a slot at once, whatever MaxUnavailable
	// and Order say, so that nodes on the old and on the new values cannot
	// reach each other for one wave instead of one per slot; empty (or
	// VXLANRolling) keeps MaxUnavailable's pace. Any other change of the
	// network keeps MaxUnavailable's pace whatever this says. Readers
	// before it ignore it, and roll: the slower pace, never a faster one.
	VXLANChange string `json:"vxlanChange,omitempty"`
	// BuildRegression is what a node on a Windows build with a known
	// container-networking regression (compiler/winbuild's catalog) does
	// about a replace: BuildHold starts none (state rollout-held: no
	// slot, no cordon) until the node reports a fixed build; empty (or
	// BuildProceed) does not look. A build the agent cannot read
	// proceeds. Readers before it ignore it, and proceed.
	BuildRegression string `json:"buildRegression,omitempty"`
}

// HoldsBuild reports whether a node on a build with a known regression
// may start no replace (BuildRegression hold).
func (r *Rollout) HoldsBuild() bool { return r != nil && r.BuildRegression == BuildHold }

// Rollout.BuildRegression values.
const (
	BuildProceed = "proceed"
	BuildHold    = "hold"
)

// Rollout.VXLANChange values.
const (
	VXLANRolling   = "rolling"
	VXLANAllAtOnce = "all-at-once"
)

// DefaultMaxUnavailable is Rollout.MaxUnavailable's default: one node at a
// time.
const DefaultMaxUnavailable = "1"

// Slots is how many of nodes may hold a rollout slot at once under r: the
// count, or the percentage of nodes rounded down, as a DaemonSet's
// maxUnavailable is, but never below one: a rollout that can never start
// is a stuck cluster, not a safe one.
func (r *Rollout) Slots(nodes int) (int, error) {
	spec := DefaultMaxUnavailable
	if r != nil && r.MaxUnavailable != "" {
		spec = r.MaxUnavailable
	}
	return maxUnavailable(spec, nodes)
}

// AllAtOnce reports whether a replace caused by the VXLAN identity alone
// may take a slot whatever the others hold (VXLANChange all-at-once).
func (r *Rollout) AllAtOnce() bool { return r != nil && r.VXLANChange == VXLANAllAtOnce }

// Waves is how many turns nodes take to replace their networks one slot
// each under r, as the agents pace them: ⌈nodes/Slots(nodes)⌉, every node
// in one wave when vxlanOnly (the replace's only cause is the VXLAN
// identity) and r is AllAtOnce; 0 for no node. It does not count
// rollout.order's groups, which can only add waves (a group that fills
// no wave leaves its slots free until it is done).
func (r *Rollout) Waves(nodes int, vxlanOnly bool) (int, error) {
	if nodes <= 0 {
		return 0, nil
	}
	if vxlanOnly && r.AllAtOnce() {
		return 1, nil
	}
	k, err := r.Slots(nodes)
	if err != nil {
		return 0, err
	}
	return (nodes + k - 1) / k, nil
}

func maxUnavailable(spec string, nodes int) (int, error) {
	if pct, ok := strings.CutSuffix(spec, "%"); ok {
		p, err := strconv.Atoi(pct)
		if err != nil || p < 1 || p > 100 || strings.HasPrefix(pct, "+") {
			return 0, fmt.Errorf("rollout.maxUnavailable %q: a percentage is a whole number from 1%% to 100%%", spec)
		}
		return max(1, nodes*p/100), nil
	}
	n, err := strconv.Atoi(spec)
	if err != nil || n < 1 || strings.HasPrefix(spec, "+") {
		return 0, fmt.Errorf("rollout.maxUnavailable %q: give a count of nodes (1 or more) or a percentage such as 25%%", spec)
	}
	return n, nil
}
