package intent

import (
	"errors"
	"fmt"
	"time"

	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/internal/budget"
)

// Defaults of the CUE evaluation budget (Options.CUETimeout, CUEMemory).
// The 1,000-node benchmark intent evaluates in 0.2 s and 90 MiB of peak
// RSS (all of vet). The watchdog samples the heap, so a runaway value
// overshoots the budget by the allocation that crosses it: a string
// doubled in a chain peaks at 2 to 4 times the budget (measured: 256 MiB
// gives 295 MiB of RSS, 1 GiB gives 2 to 4 GiB). 1 GiB keeps that within
// a 7 GiB CI runner.
const (
	DefaultCUETimeout = 60 * time.Second
	DefaultCUEMemory  = 1 << 30
)

// RuleBudget is the rule of the finding a CUE evaluation over its budget
// gets.
const RuleBudget = "load"

// A BudgetError is a CUE evaluation, or a whole build, stopped by its
// budget. Its Finding names the input and the limit. CUE's evaluator
// cannot be interrupted (it takes no context; cue-lang/cue#1104), nor can
// the rest of a build: the work goes on in its goroutine, taking CPU and
// memory, so a caller that gets a BudgetError must end the process
// promptly, after reporting it.
type BudgetError struct{ Finding diag.Finding }

func (e *BudgetError) Error() string { return e.Finding.String() }

// budget is what one CUE evaluation may take.
func (o Options) budget() budget.Budget {
	b := budget.Budget{Time: o.CUETimeout, Memory: o.CUEMemory}
	if b.Time <= 0 {
		b.Time = DefaultCUETimeout
	}
	if b.Memory <= 0 {
		b.Memory = DefaultCUEMemory
	}
	return b
}

// evaluate runs eval under b (budget.Run): it returns when eval does, or
// with a *BudgetError (what names the evaluation) when eval has run longer
// than b.Time or the heap has grown past b.Memory.
func evaluate(b budget.Budget, what func() diag.Finding, eval func()) error {
	var err error
	withCUEGC(func() { err = b.Run(eval) })
	var ex *budget.Exceeded
	if !errors.As(err, &ex) {
		return err
	}
	f := what()
	if ex.Memory {
		f.Message = fmt.Sprintf("CUE evaluation of %s took more than %s of memory (--cue-memory) and was stopped; an intent evaluates in far less: look for a value that grows without bound (a string doubled in a chain, a list built from a large range)", f.Message, budget.Size(b.Memory))
	} else {
		f.Message = fmt.Sprintf("CUE evaluation of %s did not finish within %s (--cue-timeout) and was stopped; an intent evaluates in seconds: look for a comprehension or recursion that grows without bound (list.Range over a large range, a string doubled in a chain)", f.Message, b.Time)
	}
	return &BudgetError{Finding: f}
}
