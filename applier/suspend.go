package applier

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hnsplan/hnsplan/applier/control"
	"github.com/hnsplan/hnsplan/applier/kube"
)

// ControlSource delivers the control ConfigMap's data
// (hnsplan-system/hnsplan-control, applier/control): fn at every change,
// nil data once it is gone; a read that fails calls nothing.
// control.Watcher is one.
type ControlSource interface {
	Run(ctx context.Context, fn func(data map[string]string))
}

// Suspension is /status suspended: the key that suspends the agent, its
// reason and since when.
type Suspension struct {
	Key    string    `json:"key"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since,omitzero"`
}

// controlGate is the agent's side of the control ConfigMap.
type controlGate struct {
	started time.Time // requests to reconcile older than this are done
	metric  prometheus.Gauge

	state  control.State // under Agent.mu
	asked  time.Time     // the newest reconcile request taken
	said   string        // the suspension last announced; "" none
	events func(eventtype, reason, message string)
}

func newControlGate(reg prometheus.Registerer) *controlGate {
	g := &controlGate{started: time.Now(), events: func(string, string, string) {},
		metric: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hnsplan_agent_suspended",
			Help: "1 while an operator suspends this agent (hnsplan-system/hnsplan-control): it writes nothing to HNS.",
		})}
	reg.MustRegister(g.metric)
	return g
}

// takeControl takes the control ConfigMap's data: a new suspension or its
// end, and a new reconcile request, each ask for a pass now.
func (a *Agent) takeControl(data map[string]string) {
	st := control.For(data, a.cfg.Node)
	g := a.ctl
	a.mu.Lock()
	was := g.state
	g.state = st
	reconcile := !st.Reconcile.IsZero() && st.Reconcile.After(g.asked)
	if reconcile {
		g.asked = st.Reconcile
	}
	a.mu.Unlock()
	if reconcile && st.Reconcile.Before(g.started) {
		// Made before this agent started, which ran a pass since.
		reconcile = false
	}
	if reconcile {
		a.cfg.Log.Info("reconcile requested", "key", st.ReconcileKey, "at", st.Reconcile)
		g.events("Normal", "ReconcileRequested", "a pass was requested by "+control.Namespace+"/"+control.Name+" key "+st.ReconcileKey+" at "+st.Reconcile.UTC().Format(time.RFC3339))
	}
	if reconcile || was.Suspended != st.Suspended || was.Key != st.Key || was.Reason != st.Reason {
		a.loop.Trigger()
	}
}

// suspended reports a pass that a suspension stopped: no HNS call, no
// step of a replace, only the report (/status, the Node's state and last
// error, AgentSuspended once per suspension, the metric). ok is false
// when the agent is not suspended; a suspension that ended is announced
// once (AgentUnsuspended).
func (a *Agent) suspended(ctx context.Context) (Next, bool) {
	g := a.ctl
	a.mu.Lock()
	st := g.state
	msg := st.Message()
	said := g.said
	g.said = msg
	if !st.Suspended {
		a.st.Suspended = nil
		a.mu.Unlock()
		if said != "" {
			g.metric.Set(0)
			a.cfg.Log.Info("the agent is no longer suspended")
			g.events("Normal", "AgentUnsuspended", "the agent is no longer suspended: it programs HNS again")
		}
		return Wait, false
	}
	a.st.Suspended = &Suspension{Key: st.Key, Reason: st.Reason, Since: st.Since}
	a.st.State, a.st.Error, a.st.Ops, a.st.Pending = kube.StateSuspended, msg, 0, nil
	status := kube.Status{Digest: a.st.Applied, Routes: a.st.AppliedRoutes, State: kube.StateSuspended, Error: msg, Mismatch: ""}
	a.mu.Unlock()
	g.metric.Set(1)
	if msg != said {
		a.cfg.Log.Warn("suspended: writing nothing to HNS", "key", st.Key, "reason", st.Reason)
		g.events("Warning", "AgentSuspended", msg)
	}
	if k := a.cfg.Kube; k != nil {
		if err := k.SetStatus(ctx, status); err != nil {
			a.cfg.Log.Warn("node status", "err", err)
		}
	}
	return Wait, true
}
