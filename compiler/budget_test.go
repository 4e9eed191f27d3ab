package compiler_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/internal/synth"
)

// TestACLBudget: an endpoint whose rendered list passes 1,000 ACLs gets a
// policy-acl-budget warning; one just under does not. The list grows with
// an egress rule to a named port that 1,001 (or 990) backend pods map to
// different numbers: one ACL per number.
func TestACLBudget(t *testing.T) {
	for _, tt := range []struct {
		backends int
		warn     bool
	}{{1001, true}, {990, false}} {
		t.Run(fmt.Sprint(tt.backends), func(t *testing.T) {
			dir := t.TempDir()
			if err := synth.WriteACLBudget(dir, tt.backends); err != nil {
				t.Fatal(err)
			}
			res, findings := compileDir(t, filepath.Join(dir, "intent"), filepath.Join(dir, "inventory.yaml"))
			var warned bool
			for _, f := range findings {
				if f.Rule == "policy-acl-budget" {
					warned = true
					if !strings.Contains(f.Message, "pod app/client gets") {
						t.Errorf("message: %s", f)
					}
				}
			}
			if warned != tt.warn {
				t.Errorf("%d backends: policy-acl-budget warned=%v, want %v; findings: %v", tt.backends, warned, tt.warn, findings)
			}
			if len(res.Plans) != 1 || len(res.Plans[0].Endpoints) != 1 {
				t.Fatalf("want one plan with one endpoint")
			}
		})
	}
}
