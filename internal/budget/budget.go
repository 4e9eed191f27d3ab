// Package budget runs work under a budget of wall time and Go heap, the
// way a CI runner must run a compiler on untrusted input (a pull request's
// intent): past either, the caller gets an error at once instead of an
// out-of-memory kill or a job that never ends.
package budget

import (
	"fmt"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/hnsplan/hnsplan/internal/crash"
)

// A Budget is what one piece of work may take. Zero fields are no limit.
type Budget struct {
	Time   time.Duration
	Memory int64 // bytes of Go heap, counted from where Run starts
}

// An Exceeded is work stopped by its budget: Memory is set when the heap
// outgrew it, else the time ran out. The work goes on in its goroutine
// (Go cannot stop one from outside), taking CPU and memory, so a caller
// that gets an Exceeded must end the process promptly, after reporting it.
type Exceeded struct {
	Memory bool
	Limit  Budget
}

func (e *Exceeded) Error() string {
	if e.Memory {
		return fmt.Sprintf("took more than %s of memory", Size(e.Limit.Memory))
	}
	return fmt.Sprintf("did not finish within %s", e.Limit.Time)
}

// heapMetric is the Go heap in use, live and not yet swept: it is what a
// runaway computation grows, and reading it stops nothing (unlike
// runtime.ReadMemStats).
const heapMetric = "/memory/classes/heap/objects:bytes"

// interval is how often the watchdog samples the heap.
const interval = 10 * time.Millisecond

// Run runs work in a goroutine under b: it returns when work does, or
// with an *Exceeded when work has run longer than b.Time or the heap has
// grown past b.Memory. While work runs, the Go runtime's soft memory
// limit is b.Memory (or lower if GOMEMLIMIT or an enclosing Run says so),
// so that garbage is collected before it counts against the budget. The
// watchdog samples the heap, so a runaway allocation overshoots the
// budget by the allocation that crosses it. Runs nest: an inner Run (the
// CUE evaluation, inside the whole build) has its own, smaller, budget. A
// panic in work is panicked again on the caller's goroutine, with the
// original stack, where the binary's crash.Guard reports it.
func (b Budget) Run(work func()) error {
	if b.Memory > 0 {
		prev := debug.SetMemoryLimit(-1)
		if b.Memory < prev {
			debug.SetMemoryLimit(b.Memory)
		}
		defer debug.SetMemoryLimit(prev)
	}
	done := make(chan error, 1)
	go func() {
		var err error
		defer func() { done <- err }()
		defer crash.Capture(&err)
		work()
	}()
	// The heap grows with everything the process holds besides the work:
	// the budget counts from where it starts.
	sample := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(sample)
	base := heapBytes(sample[0])
	var timeout <-chan time.Time
	if b.Time > 0 {
		t := time.NewTimer(b.Time)
		defer t.Stop()
		timeout = t.C
	}
	var tick <-chan time.Time
	if b.Memory > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case err := <-done:
			if err != nil {
				panic(err)
			}
			return nil
		case <-timeout:
			return &Exceeded{Limit: b}
		case <-tick:
			metrics.Read(sample)
			if heapBytes(sample[0])-base > b.Memory {
				return &Exceeded{Memory: true, Limit: b}
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

// Size writes n bytes as "2 GiB", "256 MiB" or "1000 bytes".
func Size(n int64) string {
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
