//go:build integration

package main

import (
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/fleet"
)

// TestREADMEExitCodesRollout runs the rollout rows of README.md's
// exit-code table against a real API server: their examples, with the
// fixture's kubeconfig and namespace, exit as the table says. A node
// replacing with the slot and one waiting keep the rollout pending (so
// --wait times out, 5); the slot holder blocked halts it (4).
func TestREADMEExitCodesRollout(t *testing.T) {
	codes := readmeExitCodes(t)
	f := newRolloutFixture(t)
	for _, code := range []int{exitTimeout, exitHalted} {
		example := codes[code]
		if !strings.HasPrefix(example, "rollout ") {
			t.Fatalf("README.md: exit %d's example %q is not a rollout", code, example)
		}
		if code == exitHalted {
			f.annotate(f.b, map[string]any{fleet.AnnotationState: "blocked", fleet.AnnotationLastError: "drain: 1 pod remains after 10m0s"})
		}
		f.run(code, strings.Fields(example)...)
	}
}
