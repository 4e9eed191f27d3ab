package intent

import (
	"fmt"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/internal/crash"
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

// A BudgetError is a CUE evaluation stopped by its budget. Its Finding
// names the CUE files and the limit. CUE's evaluator cannot be interrupted
// (it takes no context; cue-lang/cue#1104): the evaluation goes on in its
// goroutine, taking CPU and memory, so a caller that gets a BudgetError
// must end the process promptly, after reporting it.
type BudgetError struct{ Finding diag.Finding }

func (e *BudgetError) Error() string { return e.Finding.String() }

// budget is what one CUE evaluation may take.
type budget struct {
	timeout time.Duration
	memory  int64 // bytes of Go heap
}

func (o Options) budget() budget {
	b := budget{timeout: o.CUETimeout, memory: o.CUEMemory}
	if b.timeout <= 0 {
		b.timeout = DefaultCUETimeout
	}
	if b.memory <= 0 {
		b.memory = DefaultCUEMemory
	}
	return b
}

// heapMetric is the Go heap in use, live and not yet swept: it is what a
// runaway evaluation grows, and reading it stops nothing (unlike
// runtime.ReadMemStats).
const heapMetric = "/memory/classes/heap/objects:bytes"

// watchInterval is how often the watchdog samples the heap.
const watchInterval = 10 * time.Millisecond

// evaluate runs eval in a goroutine under b: it returns when eval does, or
// with a *BudgetError (what names the evaluation) when eval has run longer
// than b.timeout or the heap has grown past b.memory. While eval runs, the
// Go runtime's soft memory limit is b.memory (or lower if GOMEMLIMIT says
// so), so that garbage is collected before it counts against the budget.
// A panic in eval is panicked again on the caller's goroutine, with the
// original stack, where the binary's crash.Guard reports it.
func (b budget) evaluate(what func() diag.Finding, eval func()) error {
	prev := debug.SetMemoryLimit(-1)
	if b.memory < prev {
		debug.SetMemoryLimit(b.memory)
	}
	defer debug.SetMemoryLimit(prev)

	done := make(chan error, 1)
	go func() {
		var err error
		defer func() { done <- err }()
		defer crash.Capture(&err)
		eval()
	}()
	// The heap grows with everything the process holds besides the
	// evaluation: the budget counts from where it starts.
	sample := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(sample)
	base := heapBytes(sample[0])
	timeout := time.NewTimer(b.timeout)
	defer timeout.Stop()
	tick := time.NewTicker(watchInterval)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				panic(err)
			}
			return nil
		case <-timeout.C:
			f := what()
			f.Message = fmt.Sprintf("CUE evaluation of %s did not finish within %s (--cue-timeout) and was stopped; an intent evaluates in seconds: look for a comprehension or recursion that grows without bound (list.Range over a large range, a string doubled in a chain)", f.Message, b.timeout)
			return &BudgetError{Finding: f}
		case <-tick.C:
			metrics.Read(sample)
			if used := heapBytes(sample[0]) - base; used > b.memory {
				f := what()
				f.Message = fmt.Sprintf("CUE evaluation of %s took more than %s of memory (--cue-memory) and was stopped; an intent evaluates in far less: look for a value that grows without bound (a string doubled in a chain, a list built from a large range)", f.Message, sizeString(b.memory))
				return &BudgetError{Finding: f}
			}
		}
	}
}

func heapBytes(s metrics.Sample) int64 {
	if s.Value.Kind() != metrics.KindUint64 {
		return 0
	}
	v := s.Value.Uint64()
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// sizeString writes n bytes as "2 GiB", "256 MiB" or "1000 bytes".
func sizeString(n int64) string {
	for _, u := range []struct {
		unit string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.unit)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
