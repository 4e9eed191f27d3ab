package intent

import (
	"os"
	"runtime/debug"
	"sync"
)

// cueGCPercent is the garbage collector's GOGC while CUE evaluates an
// intent (evaluate). CUE keeps nearly all it allocates — the graph of the
// values — until the export: measured at 1,100 nodes (GODEBUG=gctrace=1),
// 80 to 90% of the heap survives each collection, so a collection frees
// little and marks everything, and at GOGC 100 they were a quarter of
// vet's CPU. Collecting when the heap has grown four-fold rather than
// two-fold makes them a third as frequent: vet at 1,100 nodes spends
// about 12% less CPU, for up to twice the heap while CUE runs (the
// intent's evaluation, 50 MiB at 1,100 nodes, far less than compiling
// the plans holds; the CUE budget's soft memory limit, budget.Run, still
// collects before --cue-memory). The inventory and the compile run at the
// process's own GOGC. A GOGC set in the environment is left as it is.
const cueGCPercent = 400

// gcDuringCUE counts the evaluations running (BuildEach loads two
// intents at once): the first sets cueGCPercent, the last puts back what
// was there before.
var gcDuringCUE struct {
	sync.Mutex
	running int
	before  int
}

// withCUEGC runs f at cueGCPercent, unless GOGC is set in the
// environment.
func withCUEGC(f func()) {
	if os.Getenv("GOGC") != "" {
		f()
		return
	}
	g := &gcDuringCUE
	g.Lock()
	if g.running == 0 {
		g.before = debug.SetGCPercent(cueGCPercent)
	}
	g.running++
	g.Unlock()
	defer func() {
		g.Lock()
		if g.running--; g.running == 0 {
			debug.SetGCPercent(g.before)
		}
		g.Unlock()
	}()
	f()
}
