package applier

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/hnsplan/hnsplan/applier/kube"
)

// key is the one key of the work queue: every trigger asks for the same
// pass, so bursts collapse into one.
const key = "node"

// Loop runs passes until ctx is done, in the shape of sample-controller
// with a single key: a plan update, a cluster change or the resync ticker
// asks for a pass (Trigger); a failed pass is retried with the rate
// limiter's backoff; a pass that succeeds resets it.
type Loop struct {
	R *Reconciler
	// Cluster returns the live cluster, or nil when there is none (a
	// plan-only agent). ok false means its caches are not synced yet:
	// the pass waits rather than program pods from a partial view.
	Cluster func() (c *Cluster, ok bool)
	// Resync is the period of passes that catch drift nobody announced
	// (a reboot that dropped a non-persistent network). Default 5 min.
	Resync time.Duration
	// RateLimiter paces retries; default exponential 100 ms .. 2 min.
	RateLimiter workqueue.TypedRateLimiter[string]

	queue workqueue.TypedRateLimitingInterface[string]
}

// Trigger asks for a pass. Call Init first; then it is safe from any
// goroutine.
func (l *Loop) Trigger() { l.queue.Add(key) }

// Init prepares the queue. Call it before Trigger or Run.
func (l *Loop) Init() {
	if l.queue != nil {
		return
	}
	rl := l.RateLimiter
	if rl == nil {
		rl = workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 2*time.Minute)
	}
	l.queue = workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[string]{Name: "hnsplan"})
}

// Run runs passes until ctx is done.
func (l *Loop) Run(ctx context.Context) {
	l.Init()
	resync := l.Resync
	if resync <= 0 {
		resync = 5 * time.Minute
	}
	go func() {
		<-ctx.Done()
		l.queue.ShutDown()
	}()
	go func() {
		t := time.NewTicker(resync)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				l.queue.Add(key)
			}
		}
	}()
	l.queue.Add(key) // the first pass: a restart converges without waiting
	for l.next(ctx) {
	}
}

func (l *Loop) next(ctx context.Context) bool {
	k, quit := l.queue.Get()
	if quit {
		return false
	}
	defer l.queue.Done(k)
	var c *Cluster
	if l.Cluster != nil {
		var ok bool
		if c, ok = l.Cluster(); !ok {
			l.queue.AddRateLimited(k) // caches syncing: look again soon
			return true
		}
	}
	st, err := l.R.Pass(ctx, c)
	if err != nil && ctx.Err() == nil {
		if l.R.Log != nil {
			l.R.Log.Warn("pass failed; retrying", "err", err, "retries", l.queue.NumRequeues(k))
		}
		l.queue.AddRateLimited(k)
		return true
	}
	if st.State == kube.StateBlocked {
		// A drain a PodDisruptionBudget holds up: nothing announces its
		// end (budgets are not watched), so look again, backing off.
		l.queue.AddRateLimited(k)
		return true
	}
	l.queue.Forget(k)
	return true
}
