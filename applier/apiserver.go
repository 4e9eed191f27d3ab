package applier

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ReasonAPIServerUnreachable is the Event the agent records on its Node
// once an outage of the API server ends, with its length (it cannot
// record one while the API server does not answer).
const ReasonAPIServerUnreachable = "APIServerUnreachable"

// DefaultAPIProbe is how often the agent asks the API server whether it
// answers (Config.Reachable).
const DefaultAPIProbe = 5 * time.Second

// apiWatch follows whether the API server answers, so that an outage is
// seen: the agent goes on with the plan it has (the caches keep the last
// view), but the operator must know that its status, slots and Events are
// stale. An outage is said when it starts (a warning in the log,
// /status apiServerUnreachableSince, hnsplan_apiserver_reachable 0) and
// when it ends (an APIServerUnreachable Event with its length).
type apiWatch struct {
	a         *Agent
	reachable prometheus.Gauge
	now       func() time.Time
}

func newAPIWatch(a *Agent) *apiWatch {
	w := &apiWatch{a: a, now: time.Now, reachable: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hnsplan_apiserver_reachable", Help: "1 while the API server answers the agent's probe (its /readyz), 0 during an outage.",
	})}
	a.reg.MustRegister(w.reachable)
	w.reachable.Set(1)
	return w
}

// run probes every interval until ctx ends.
func (w *apiWatch) run(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		w.note(w.a.cfg.Reachable(ctx))
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// note records one probe's answer, saying an outage's start and end once.
func (w *apiWatch) note(ok bool) {
	a, now := w.a, w.now()
	a.mu.Lock()
	since := a.st.APIServerUnreachableSince
	switch {
	case !ok && since == nil:
		t := now.UTC()
		a.st.APIServerUnreachableSince = &t
	case ok && since != nil:
		a.st.APIServerUnreachableSince = nil
	}
	a.mu.Unlock()
	switch {
	case !ok && since == nil:
		w.reachable.Set(0)
		a.cfg.Log.Warn("the API server does not answer: going on with the last plan and cluster view; status, rollout slots and Events wait until it is back")
	case ok && since != nil:
		w.reachable.Set(1)
		length := now.Sub(*since).Round(time.Second)
		msg := fmt.Sprintf("the API server did not answer this node's agent for %s (from %s to %s); the agent went on with the last plan and cluster view",
			length, since.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		a.cfg.Log.Warn("the API server answers again", "outage", length.String(), "since", since.Format(time.RFC3339))
		if a.cfg.Kube != nil {
			a.cfg.Kube.Event("Warning", ReasonAPIServerUnreachable, msg)
		}
	}
}
