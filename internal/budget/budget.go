// Package budget runs work under a budget of wall time and memory, the
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
	Time time.Duration
	// Memory is bytes of memory the process may come to hold beyond
	// what it held where Run starts: the larger of its resident set (on
	// Linux: what /usr/bin/time and an out-of-memory killer count) and
	// the Go runtime's memory less what it returned to the system.
	Memory int64
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

// goMetrics are the Go runtime's memory, all classes, and the part of it
// returned to the system: their difference is what debug.SetMemoryLimit
// governs (heap, fragmentation, stacks, metadata). Reading them stops
// nothing (unlike runtime.ReadMemStats).
var goMetrics = []string{"/memory/classes/total:bytes", "/memory/classes/heap/released:bytes"}

// held is the memory the process holds, the larger of two counts: its
// resident set where the OS says (residentBytes: the binary's pages and
// memory mapped outside Go count, untouched pages do not), and the Go
// runtime's memory less what it returned to the system (which counts
// what Go mapped even before it is touched).
func held(sample []metrics.Sample) int64 {
	metrics.Read(sample)
	n := metricBytes(sample[0]) - metricBytes(sample[1])
	if rss, ok := residentBytes(); ok {
		n = max(n, rss)
	}
	return n
}

// interval is how often the watchdog samples the memory held.
const interval = 10 * time.Millisecond

// Run runs work in a goroutine under b: it returns when work does, or
// with an *Exceeded when work has run longer than b.Time or the memory
// held has grown past b.Memory. While work runs, the Go runtime's soft
// memory limit is b.Memory (or lower if GOMEMLIMIT or an enclosing Run
// says so), so that garbage is collected before it counts against the
// budget. The watchdog samples every 10 ms, so a runaway allocation
// overshoots the budget by what it touches in that time. Runs nest: an inner Run (the
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
	// The process holds more than the work: the budget counts from where
	// it starts.
	sample := make([]metrics.Sample, len(goMetrics))
	for i, name := range goMetrics {
		sample[i].Name = name
	}
	base := held(sample)
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
			if held(sample)-base > b.Memory {
				return &Exceeded{Memory: true, Limit: b}
			}
		}
	}
}

func metricBytes(s metrics.Sample) int64 {
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
