package compiler

import (
	"errors"
	"fmt"
	"time"

	"github.com/hnsplan/hnsplan/compiler/check"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/topology"
	"github.com/hnsplan/hnsplan/internal/budget"
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
	// MaxTime and MaxMemory bound the whole Build (or BuildEach): load,
	// vet and compile, whatever part of the input is hostile (CUE, YAML,
	// inventory); 0 is DefaultMaxTime and DefaultMaxMemory. Over either,
	// the error is a *intent.BudgetError, after which the process must end.
	MaxTime   time.Duration
	MaxMemory int64
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
	var (
		res      *Result
		findings diag.List
		err      error
	)
	if berr := opt.budgeted(dir, dir, func() {
		var in *intent.Intent
		var loaded diag.List
		if in, loaded, err = intent.Load(dir, opt.load()); err == nil {
			res, findings, err = build(in, loaded, opt)
		}
	}); berr != nil {
		return nil, nil, berr
	}
	return res, findings, err
}

// Defaults of the whole run's budget (Options.MaxTime, MaxMemory). The
// 5,000-node scale intent (hack/bench-scale.sh) compiles in 3.4 s and
// 254 MiB; the largest manifests the loader accepts (intent's limits)
// vet in seconds. The budget leaves room for ten times that, and keeps a
// hostile input from taking a 7 GiB CI runner with it.
const (
	DefaultMaxTime   = 5 * time.Minute
	DefaultMaxMemory = 3 << 30
)

// budgeted runs work under the whole run's budget; past it, the error is
// a *intent.BudgetError at dir naming what (the intent directory, or the
// directories) and the limit. Work left running in the background writes
// only its own variables, which the caller then does not read.
func (o Options) budgeted(dir, what string, work func()) error {
	b := budget.Budget{Time: o.MaxTime, Memory: o.MaxMemory}
	if b.Time <= 0 {
		b.Time = DefaultMaxTime
	}
	if b.Memory <= 0 {
		b.Memory = DefaultMaxMemory
	}
	err := b.Run(work)
	var ex *budget.Exceeded
	if !errors.As(err, &ex) {
		return err
	}
	f := diag.Finding{Rule: intent.RuleBudget, Severity: diag.Error, Pos: diag.Pos{File: dir}}
	if ex.Memory {
		f.Message = fmt.Sprintf("reading, vetting and compiling %s took more than %s of memory (--max-memory) and was stopped; a 5,000-node intent needs about 260 MiB: look for an input that grows without bound (a manifest, an --inventory file, the CUE), or raise --max-memory if the input is meant to be this large", what, budget.Size(b.Memory))
	} else {
		f.Message = fmt.Sprintf("reading, vetting and compiling %s did not finish within %s (--max-time) and was stopped; a 5,000-node intent takes about 4 s: look for an input that grows without bound (a manifest, an --inventory file, the CUE), or raise --max-time if the input is meant to be this large", what, b.Time)
	}
	return &intent.BudgetError{Finding: f}
}

// build is Build after the load.
func build(in *intent.Intent, loaded diag.List, opt Options) (*Result, diag.List, error) {
	rules, err := intent.Catalog()
	if err != nil {
		return nil, nil, err
	}
	cat := check.NewCatalog(rules)
	var t *topology.Topology // derived once, for vet and compile
	if in.Cluster != nil {
		t = topology.New(in.Cluster)
	}
	prog, findings := check.VetProgramOf(in, loaded, cat, t)
	if opt.UpdateLock {
		findings = forUpdateLock(findings)
	}
	res := &Result{Intent: in}
	if findings.HasErrors() || in.Cluster == nil {
		return res, findings, nil
	}
	more := compile(res, cat, prog, t)
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
