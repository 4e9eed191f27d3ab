package budget_test

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/hnsplan/hnsplan/internal/budget"
)

// TestRunCountsResidentMemory: memory the Go heap does not see (mapped
// outside Go, as a cgo library or a runaway of stacks and fragmentation
// would) counts against the budget on Linux: the resident set is watched,
// not only the heap.
func TestRunCountsResidentMemory(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	// The maps are left to the test process's end: the work may still be
	// running when Run returns.
	err := budget.Budget{Time: 10 * time.Second, Memory: 64 << 20}.Run(func() {
		var maps [][]byte
		for len(maps) < 256 { // 256 MiB at most
			select {
			case <-stop:
				return
			default:
			}
			m, err := syscall.Mmap(-1, 0, 1<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
			if err != nil {
				return
			}
			for i := 0; i < len(m); i += 4096 {
				m[i] = 1 // touched: resident
			}
			maps = append(maps, m)
			time.Sleep(time.Millisecond)
		}
		<-stop
	})
	var ex *budget.Exceeded
	if !errors.As(err, &ex) || !ex.Memory {
		t.Fatalf("64 MiB budget, 256 MiB mapped and touched outside the Go heap: %v", err)
	}
}
