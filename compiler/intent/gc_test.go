package intent

import (
	"runtime/debug"
	"sync"
	"testing"
)

// TestWithCUEGC: evaluations at once, as BuildEach runs them, each see
// cueGCPercent, and the last to end puts back the process's own GOGC.
func TestWithCUEGC(t *testing.T) {
	t.Setenv("GOGC", "")
	defer debug.SetGCPercent(debug.SetGCPercent(150))
	var wg sync.WaitGroup
	start, hold := make(chan struct{}), make(chan struct{})
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			withCUEGC(func() {
				start <- struct{}{}
				<-hold
				if got := debug.SetGCPercent(cueGCPercent); got != cueGCPercent {
					t.Errorf("GOGC during an evaluation = %d, want %d", got, cueGCPercent)
				}
			})
		}()
	}
	for range 3 {
		<-start
	}
	close(hold)
	wg.Wait()
	if got := debug.SetGCPercent(150); got != 150 {
		t.Errorf("GOGC after the evaluations = %d, want the process's 150", got)
	}
}
