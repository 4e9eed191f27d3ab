package budget_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hnsplan/hnsplan/internal/budget"
)

// TestRun: work within its budget returns nil; work that outgrows the
// heap budget or the time is stopped with an Exceeded saying which.
func TestRun(t *testing.T) {
	if err := (budget.Budget{Time: time.Minute, Memory: 1 << 30}).Run(func() {}); err != nil {
		t.Fatalf("within budget: %v", err)
	}
	stop := make(chan struct{})
	defer close(stop)
	var ex *budget.Exceeded
	err := budget.Budget{Time: 50 * time.Millisecond}.Run(func() { <-stop })
	if !errors.As(err, &ex) || ex.Memory || !strings.Contains(err.Error(), "did not finish within 50ms") {
		t.Errorf("time: %v", err)
	}
	var keep [][]byte
	err = budget.Budget{Time: time.Minute, Memory: 64 << 20}.Run(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			keep = append(keep, make([]byte, 1<<20))
			time.Sleep(time.Millisecond)
		}
	})
	if !errors.As(err, &ex) || !ex.Memory || !strings.Contains(err.Error(), "more than 64 MiB of memory") {
		t.Errorf("memory: %v", err)
	}
}

// TestRunPanics: a panic of the work is the caller's.
func TestRunPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(error).Error(), "boom") {
			t.Errorf("recovered %v, want the work's panic", r)
		}
	}()
	_ = budget.Budget{Time: time.Minute}.Run(func() { panic("boom") })
}
