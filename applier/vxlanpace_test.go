package applier_test

import (
	"testing"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/compiler/vxlan"
)

// TestVXLANPaceIsTheAgents: the window `hnsplan diff` estimates for a
// VXLAN change rests on the agent's defaults (compiler/vxlan cannot import
// the agent): the slot poll and the drain timeout.
func TestVXLANPaceIsTheAgents(t *testing.T) {
	d := applier.Config{}.Defaults()
	if d.SlotPoll != vxlan.SlotPoll || d.DrainTimeout != vxlan.DrainTimeout {
		t.Errorf("the agent polls for a slot every %s and drains for at most %s; vxlan.SlotPoll is %s, vxlan.DrainTimeout %s: make them agree",
			d.SlotPoll, d.DrainTimeout, vxlan.SlotPoll, vxlan.DrainTimeout)
	}
}
