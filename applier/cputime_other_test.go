//go:build !unix

package applier_test

import (
	"testing"
	"time"
)

// cpuTime needs getrusage: the CPU benchmarks run on unix only.
func cpuTime(t testing.TB) time.Duration {
	t.Skip("the process's CPU time is read with getrusage (unix only)")
	return 0
}
