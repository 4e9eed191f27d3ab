package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"

	"k8s.io/apimachinery/pkg/api/resource"
)

// defaultMemoryLimit is --memory-limit's default: above the 150 MiB a
// node of a 50,000-pod, 5,000-node cluster peaks at without a limit
// (BenchmarkAgentMemory), below the DaemonSet's request of 256Mi plus
// what is not Go heap. See docs/operations.md, "Memory".
const defaultMemoryLimit = "224Mi"

// setMemoryLimit sets the Go runtime's soft memory limit from
// --memory-limit (a quantity such as 224Mi; 0 turns it off), unless
// GOMEMLIMIT is set, which wins. It is a safety net, not a cap: the GC
// works harder as the heap nears it, so that garbage cannot double a
// heap that is mostly the informers' caches; live memory above it still
// grows. It returns the limit in force (0: none).
func setMemoryLimit(flag string, log *slog.Logger) (int64, error) {
	if env := os.Getenv("GOMEMLIMIT"); env != "" {
		return debug.SetMemoryLimit(-1), nil // the runtime read it at start
	}
	if flag == "" {
		flag = defaultMemoryLimit // a runFlags made in code, not parsed
	}
	q, err := resource.ParseQuantity(flag)
	if err != nil || q.Sign() < 0 {
		return 0, fmt.Errorf("--memory-limit %q: want a size such as 224Mi, or 0 for none", flag)
	}
	n := q.Value()
	if n == 0 {
		return 0, nil
	}
	debug.SetMemoryLimit(n)
	if log != nil {
		log.Info("soft memory limit", "bytes", n)
	}
	return n, nil
}
