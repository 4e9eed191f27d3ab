package fleet

import (
	"testing"

	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// TestPublishSpeaksTheAgentsNames: publish repeats the ConfigMap names the
// agent reads, as constants of its own (the contract, written where
// publish writes); a change on one side only would publish what no agent
// finds.
func TestPublishSpeaksTheAgentsNames(t *testing.T) {
	for _, c := range []struct{ what, publish, agent string }{
		{"namespace", Namespace, planwatch.ConfigMapNamespace},
		{"plan key", PlanKey, planwatch.ConfigMapKey},
		{"plan signature key", PlanSigKey, planwatch.ConfigMapSignatureKey},
		{"plan ConfigMap name", ConfigMapName("win-1"), planwatch.ConfigMapName("win-1")},
		{"part key", PartKey, planwatch.PartConfigMapKey},
		{"part signature key", PartSigKey, planwatch.PartConfigMapSignatureKey},
		{"part label", LabelPart, planwatch.PartLabel},
	} {
		if c.publish != c.agent {
			t.Errorf("%s: publish writes %q, the agent reads %q", c.what, c.publish, c.agent)
		}
	}
	for _, k := range []string{plan.KindRouteTable, plan.KindRouteShard, plan.KindProgramChunk} {
		if got, want := PartLabel(k), planwatch.PartLabelValue(k); got != want {
			t.Errorf("part label of %s: publish writes %q, the agent reads %q", k, got, want)
		}
	}
}
