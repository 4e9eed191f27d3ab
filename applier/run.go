package applier

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/hnsplan/hnsplan/applier/kube"
)

// key is the one key of the work queue: every trigger asks for the same
// pass, so bursts collapse into one.
const key = "node"

// Next is what the loop does after a pass: the pass decides, the loop
// does it.
type Next int

const (
	// Wait: nothing to do until a trigger (a plan, a cluster change) or
	// the resync. The backoff is reset.
	Wait Next = iota
	// Requeue: look again at once. The backoff is reset.
	Requeue
	// Backoff: look again after the rate limiter's next delay (an error,
	// a blocked drain, caches still syncing).
	Backoff
	// Poll: look again after the Loop's Poll period: a replace waits for
	// a rollout slot or an operator, which nothing announces (Leases and
	// other nodes' states do not trigger a pass). The backoff is reset.
	Poll
)

func (n Next) String() string {
	switch n {
	case Wait:
		return "wait"
	case Requeue:
		return "requeue"
	case Backoff:
		return "backoff"
	case Poll:
		return "poll"
	}
	return fmt.Sprintf("Next(%d)", int(n))
}

// NextAfter is the requeue policy of a reconciler pass that ended in st
// and err:
//   - an error: back off (the pass is retried with the rate limiter's
//     delay, whatever it applied before failing);
//   - state blocked: back off: a drain a PodDisruptionBudget holds up,
//     whose end nothing announces (budgets are not watched);
//   - states rollout-waiting and rollout-halted: poll: a slot freed, an
//     earlier group done or an operator's --retry announces itself to no
//     watch;
//   - ops applied: requeue, to verify: the next pass should find nothing
//     to do (what HNS made of the writes);
//   - otherwise wait.
func NextAfter(st Status, err error) Next {
	switch {
	case err != nil, st.State == kube.StateBlocked:
		return Backoff
	case st.State == kube.StateRolloutWaiting, st.State == kube.StateRolloutHalted, st.State == kube.StateRolloutHeld:
		return Poll
	case st.Ops > 0:
		return Requeue
	}
	return Wait
}

// Loop runs passes until ctx is done, in the shape of sample-controller
// with a single key: a plan update, a cluster change or the resync ticker
// asks for a pass (Trigger), and each pass says what comes next (Next):
// wait, requeue at once, or retry with the rate limiter's backoff.
type Loop struct {
	// Pass runs one pass and says what to do next. retries is how many
	// passes in a row have backed off.
	Pass func(ctx context.Context, retries int) Next
	// Resync is the period of passes that catch drift nobody announced
	// (a reboot that dropped a non-persistent network). Default 5 min.
	Resync time.Duration
	// Poll is the period of Next Poll; default 10 s.
	Poll time.Duration
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
	switch l.Pass(ctx, l.queue.NumRequeues(k)) {
	case Backoff:
		if ctx.Err() == nil {
			l.queue.AddRateLimited(k)
		}
	case Requeue:
		l.queue.Forget(k)
		l.queue.Add(k)
	case Poll:
		l.queue.Forget(k)
		if ctx.Err() == nil {
			l.queue.AddAfter(k, cmp.Or(l.Poll, 10*time.Second))
		}
	default:
		l.queue.Forget(k)
	}
	return true
}
