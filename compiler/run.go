package compiler

import (
	"github.com/hnsplan/hnsplan/compiler/check"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
)

// Options are what a command changes in Run.
type Options struct {
	// UpdateLock is `compile --update-lock`: the lock findings that the
	// update resolves (ForUpdateLock) are dropped.
	UpdateLock bool
}

// Run is the one path from a loaded intent to its findings: the loader's,
// the constraint rules' and the policy compiler's (check.VetProgram), then
// — when none of them is an error — the plan compiler's own (blocks, pod
// addresses, ACL budgets), under the same cluster.constraints. `hnsplan vet`
// and every command that compiles call it, so that they report the same
// findings for the same input; vet's policy program is the one the plans
// carry, compiled once.
//
// The findings are sorted. The result is nil when the compile did not run
// (an error before it, or no cluster); with an error among the compiler's
// own findings it is returned but must not be written.
func Run(in *intent.Intent, loaded diag.List, cat check.Catalog, opt Options) (*Result, diag.List) {
	prog, findings := check.VetProgram(in, loaded, cat)
	if opt.UpdateLock {
		findings = ForUpdateLock(findings)
	}
	if findings.HasErrors() || in == nil || in.Cluster == nil {
		return nil, findings
	}
	res, more := compile(in, cat, prog)
	// Override adds a finding for each bad id in cluster.constraints; it
	// does not add them twice here, because a bad id is an error and an
	// error stops before the compile.
	findings = append(findings, check.Override(more, in.Cluster, cat)...)
	findings.Sort()
	return res, findings
}
