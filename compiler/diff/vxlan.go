package diff

import (
	"slices"

	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/vxlan"
)

// vxlanChange is the change of the cluster's VXLAN identity between the
// sides, from their intents when the options give them, else from the
// plans; all-at-once applies only if no network is replaced for another
// cause.
func vxlanChange(base, head []*plan.NodePlan, changes []Change, opt Options) *vxlan.Change {
	if len(base) == 0 && opt.Base == nil || len(head) == 0 && opt.Head == nil {
		return nil // an intent added or removed: every node is created or removed
	}
	bs, hs := vxlan.FromPlans(base), vxlan.FromPlans(head)
	if opt.Base != nil {
		bs = *opt.Base
	}
	if opt.Head != nil {
		hs = *opt.Head
	}
	mixed := slices.ContainsFunc(changes, func(c Change) bool {
		return c.Kind == "network" && c.Action == Replace && slices.ContainsFunc(c.Reasons, func(r string) bool {
			return r != ReasonVNI && r != ReasonVXLANPort
		})
	})
	return vxlan.Compare(bs, hs, vxlan.Options{Drain: opt.Drain, Mixed: mixed})
}
