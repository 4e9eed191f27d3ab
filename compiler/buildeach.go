package compiler

import (
	"strings"
	"sync"

	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/internal/crash"
)

// Built is one directory's Build.
type Built struct {
	Result   *Result
	Findings diag.List
	Err      error
}

// BuildEach builds each of dirs as Build does, with the same options, and
// returns the builds in the order of dirs: `hnsplan diff` builds its two
// sides with it.
//
// The inventory is read once and shared by every intent (an inventory that
// cannot be read is left to each load, so that the error is the one Build
// gives). The intents are loaded one after another, since a CUE
// evaluation's memory budget counts the whole process's heap, and then
// compiled at once, one goroutine each: memory holds every build at once
// (two, for a diff). The first load error ends the loading: that
// directory's Built has the error, and the ones after it are zero, not
// built.
//
// The whole of it runs under one budget (Options.MaxTime, MaxMemory): past
// it, every Built has the *intent.BudgetError.
func BuildEach(dirs []string, opt Options) []Built {
	var out []Built
	if err := opt.budgeted(first(dirs), strings.Join(dirs, " and "), func() { out = buildEach(dirs, opt) }); err != nil {
		out = make([]Built, len(dirs))
		for i := range out {
			out[i].Err = err
		}
	}
	return out
}

func buildEach(dirs []string, opt Options) []Built {
	out := make([]Built, len(dirs))
	lo := opt.load()
	var shared struct {
		ok       bool
		inv      intent.Inventory
		findings diag.List
	}
	if len(opt.Inventory) > 0 && len(dirs) > 1 {
		if inv, f, err := intent.ReadInventory(lo); err == nil {
			shared.ok, shared.inv, shared.findings = true, inv, f
			lo.Inventory = nil
		}
	}
	type loaded struct {
		in       *intent.Intent
		findings diag.List
	}
	var todo []loaded
	for i, dir := range dirs {
		in, findings, err := intent.Load(dir, lo)
		if err != nil {
			out[i].Err = err
			break
		}
		if shared.ok {
			in.Inventory = shared.inv
			findings = append(findings, shared.findings...)
			findings.Sort()
		}
		todo = append(todo, loaded{in, findings})
	}
	// A panic of a build is the caller's, as Build's would be: it is
	// raised again here, where the binary's crash.Guard reports it.
	panics := make([]error, len(todo))
	var wg sync.WaitGroup
	for i, l := range todo {
		wg.Go(func() {
			defer crash.Capture(&panics[i])
			out[i].Result, out[i].Findings, out[i].Err = build(l.in, l.findings, opt)
		})
	}
	wg.Wait()
	for _, p := range panics {
		if p != nil {
			panic(p)
		}
	}
	return out
}

func first(dirs []string) string {
	if len(dirs) == 0 {
		return ""
	}
	return dirs[0]
}
