package compiler

import (
	"time"

	"github.com/hnsplan/hnsplan/compiler/check"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
)

// Options are what a command changes in Build.
type Options struct {
	// Inventory lists live-state files (--inventory), read with the
	// intent.
	Inventory []string
	// MaxFileSize, CUETimeout and CUEMemory bound what reading the intent
	// and its inventory may take (intent.Options); 0 is the default.
	MaxFileSize int64
	CUETimeout  time.Duration
	CUEMemory   int64
	// UpdateLock is `compile --update-lock`: the lock findings that the
	// update resolves (forUpdateLock) are dropped.
	UpdateLock bool
}

// load is intent.Load's options for these.
func (o Options) load() intent.Options {
	return intent.Options{Inventory: o.Inventory, MaxFileSize: o.MaxFileSize, CUETimeout: o.CUETimeout, CUEMemory: o.CUEMemory}
}

// Build is the one path from an intent directory to its findings and
// plans, which every command, test and benchmark takes: intent.Load, then
// the constraint rules and the policy compiler (check.VetProgram), then —
// when none of their findings is an error — the plan compiler (blocks, pod
// addresses, ACL budgets), under the same cluster.constraints. `hnsplan
// vet` runs it too, so that it reports what compile would; the policy
// program is compiled once, and the plans carry that one.
//
// The error is intent.Load's (a *intent.PathError when dir or an
// inventory file cannot be read, a *intent.BudgetError after which the
// process must end) or the rule catalog's; the result is then nil.
// Otherwise the result holds the intent as loaded, and the findings are
// sorted; the plans are there only when the compile ran (Compiled). With
// an error among the findings, the plans must not be written.
func Build(dir string, opt Options) (*Result, diag.List, error) {
	in, loaded, err := intent.Load(dir, opt.load())
	if err != nil {
		return nil, nil, err
	}
	return build(in, loaded, opt)
}

// build is Build after the load.
func build(in *intent.Intent, loaded diag.List, opt Options) (*Result, diag.List, error) {
	rules, err := intent.Catalog()
	if err != nil {
		return nil, nil, err
	}
	cat := check.NewCatalog(rules)
	prog, findings := check.VetProgram(in, loaded, cat)
	if opt.UpdateLock {
		findings = forUpdateLock(findings)
	}
	res := &Result{Intent: in}
	if findings.HasErrors() || in.Cluster == nil {
		return res, findings, nil
	}
	more := compile(res, cat, prog)
	// Override adds a finding for each bad id in cluster.constraints; it
	// does not add them twice here, because a bad id is an error and an
	// error stops before the compile.
	findings = append(findings, check.Override(more, in.Cluster, cat)...)
	findings.Sort()
	return res, findings, nil
}

// Compiled reports whether the plan compiler ran: the intent had a cluster
// and no finding before the compile was an error. Plans and IPAM are set
// only then.
func (r *Result) Compiled() bool { return r != nil && r.IPAM != nil }
