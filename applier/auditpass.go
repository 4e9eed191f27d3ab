package applier

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/hnsplan/hnsplan/applier/audit"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/statedir"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// AuditOptions are what an audit reads beside the HNS snapshot and plan.
type AuditOptions struct {
	// Cluster is the synced cluster (its pods explain endpoints); nil:
	// the plan's endpoints do.
	Cluster *Cluster
	// Adapters lists the host's network adapters; nil where they cannot
	// be listed (off Windows, the in-memory HNS).
	Adapters func() ([]string, error)
	// Seen is when each orphan was first seen (audit.Seen.First).
	Seen map[string]time.Time
	Now  time.Time
	// Want is p's want (hns.WantFromPlan), if the caller has it: the
	// agent keeps it per plan, since a plan's routes make it costly.
	Want *hns.Want
}

// AuditOf audits have, one HNS snapshot, for node and plan p (nil: none
// yet): the one audit both the agent's passes and `hnsplan-agent audit`
// run. It makes no HNS call.
func AuditOf(node string, p *plan.NodePlan, have *hns.State, o AuditOptions) (*audit.Report, error) {
	in := audit.Input{Node: node, Have: have, Seen: o.Seen, Now: o.Now}
	if p != nil {
		want := o.Want
		if want == nil {
			var err error
			if want, _, err = hns.WantFromPlan(p, hns.LiveValues{}); err != nil {
				return nil, fmt.Errorf("plan %s: %w", p.Digest, err)
			}
		}
		in.Want, in.Plan = want, p.Digest
	}
	in.Pods, in.PodsFrom = auditPods(p, o.Cluster)
	if o.Adapters != nil {
		names, err := o.Adapters()
		if err != nil {
			return nil, fmt.Errorf("list the host's network adapters: %w", err)
		}
		in.Adapters, in.AdaptersKnown = names, true
	}
	return audit.Of(in), nil
}

// auditPods are the pods that explain endpoints: the cluster's (every
// node's), or without one the plan's (its node's, at compile time).
func auditPods(p *plan.NodePlan, c *Cluster) ([]audit.Pod, string) {
	var out []audit.Pod
	if c != nil {
		for _, pod := range c.Pods {
			if pod.IP.IsValid() {
				out = append(out, audit.Pod{Name: pod.Key(), Node: c.nodeOf(pod), IP: pod.IP})
			}
		}
		return out, "cluster"
	}
	if p != nil {
		for _, e := range p.Endpoints {
			if len(e.IpConfigurations) > 0 {
				out = append(out, audit.Pod{Name: e.Pod, Node: p.Node, IP: e.IpConfigurations[0].IpAddress})
			}
		}
	}
	return out, "plan"
}

// auditor is the agent's audit after each pass: its first-seen record,
// what it last said, and the opt-in clean-up.
type auditor struct {
	seen *audit.Seen
	said string // the problems the last Event named ("" none)
	// want is the plan's want, of the plan with digest wantFor.
	want    *hns.Want
	wantFor string
}

// wantOf is p's want, kept while the plan stays.
func (au *auditor) wantOf(p *plan.NodePlan) *hns.Want {
	if p == nil {
		return nil
	}
	if au.wantFor != p.Digest {
		w, _, err := hns.WantFromPlan(p, hns.LiveValues{})
		if err != nil {
			return nil // AuditOf says why
		}
		au.want, au.wantFor = w, p.Digest
	}
	return au.want
}

// auditPass audits the snapshot the pass read, reports it (metrics,
// /status, Events; the annotation goes with the pass's status) and, with
// Config.CleanOrphans, after a pass that converged, removes the orphan
// endpoints every guard lets go. It returns the Node annotation's
// summary, "" when there was no snapshot to audit.
func (a *Agent) auditPass(ctx context.Context, c *Cluster, st Status) string {
	have := a.r.TakeSnapshot()
	if have == nil {
		return ""
	}
	if a.audit.seen == nil {
		s, err := audit.LoadSeen(filepath.Join(a.cfg.StateDir, statedir.SeenFile))
		if err != nil {
			a.cfg.Log.Warn("the audit's record of orphan endpoints; their ages start again", "err", err)
		}
		a.audit.seen = s
	}
	p := a.r.Plan()
	opts := AuditOptions{Cluster: c, Adapters: a.cfg.Adapters, Seen: a.audit.seen.First, Now: a.now(), Want: a.audit.wantOf(p)}
	r, err := AuditOf(a.cfg.Node, p, have, opts)
	if err != nil {
		a.cfg.Log.Warn("HNS audit", "err", err)
		return ""
	}
	if removed := a.cleanOrphans(ctx, r, c, have, st); len(removed) > 0 {
		// What the audit reports is HNS after the clean-up.
		have.Endpoints = slices.DeleteFunc(have.Endpoints, func(e hns.Endpoint) bool { return removed[audit.Key(&e)] })
		if r2, err := AuditOf(a.cfg.Node, p, have, opts); err == nil {
			r = r2
		}
	}
	if a.audit.seen.Observe(r) {
		if err := a.audit.seen.Save(); err != nil {
			a.cfg.Log.Warn("save the audit's record of orphan endpoints", "err", err)
		}
	}
	a.r.Metrics.audit(r)
	a.mu.Lock()
	a.st.Audit = r
	a.mu.Unlock()
	a.reportAudit(r)
	return r.Summary()
}

// reportAudit logs and records an Event when the problems found change:
// HNSAuditProblems for a new set, HNSAuditResolved once none is left;
// not at every pass.
func (a *Agent) reportAudit(r *audit.Report) {
	key := r.ProblemKey()
	if key == a.audit.said {
		return
	}
	was := a.audit.said
	a.audit.said = key
	event := func(eventtype, reason, message string) {
		if a.cfg.Kube != nil {
			a.cfg.Kube.Event(eventtype, reason, message)
		}
	}
	switch {
	case key != "":
		a.cfg.Log.Warn("HNS audit found problems (hnsplan-agent audit lists them)", "audit", r.Summary())
		event("Warning", "HNSAuditProblems", "HNS audit: "+r.Summary()+"; `hnsplan-agent audit` on the node lists them")
	case was != "":
		a.cfg.Log.Info("HNS audit: the problems are gone", "audit", r.Summary())
		event("Normal", "HNSAuditResolved", "HNS audit: "+r.Summary())
	}
}

// cleanOrphans removes the orphans every guard of Config.CleanOrphans
// lets go, after a pass that converged, and returns their keys.
func (a *Agent) cleanOrphans(ctx context.Context, r *audit.Report, c *Cluster, have *hns.State, st Status) map[string]bool {
	clean := a.cfg.CleanOrphans
	if clean == nil || len(r.Orphans) == 0 || st.State != kube.StateConverged {
		return nil
	}
	g := audit.Guards{ClusterSynced: c != nil, Have: have, Want: a.audit.wantOf(a.r.Plan())}
	g.Pods, _ = auditPods(nil, c)
	// Asked only when an orphan is old enough to go: one request then.
	g.Reachable = true
	if del, _ := clean.Select(r, g); len(del) == 0 {
		return nil
	}
	g.Reachable = a.cfg.Reachable != nil && a.cfg.Reachable(ctx)
	del, refused := clean.Select(r, g)
	for _, rf := range refused {
		a.cfg.Log.Debug("orphan endpoint kept", "endpoint", rf.Key, "why", rf.Why)
	}
	removed := map[string]bool{}
	for _, op := range del {
		if err := a.r.apply(ctx, op); err != nil && !hns.IsNotFound(err) {
			a.cfg.Log.Warn("remove an orphan endpoint", "endpoint", op.Network+"/"+op.Name, "err", err)
			continue
		}
		removed[op.Network+"/"+op.Name] = true
		a.r.Metrics.orphanRemoved()
		a.cfg.Log.Warn("removed an orphan endpoint (--clean-orphans)", "endpoint", op.Network+"/"+op.Name, "why", op.Reason)
		if a.cfg.Kube != nil {
			a.cfg.Kube.Event("Normal", "HNSOrphanEndpointRemoved", fmt.Sprintf("removed endpoint %s on %s: %s", op.Name, op.Network, op.Reason))
		}
	}
	return removed
}

// now is the agent's clock.
func (a *Agent) now() time.Time {
	if a.cfg.Now != nil {
		return a.cfg.Now()
	}
	return time.Now()
}

// AuditOnce is `hnsplan-agent audit`: one snapshot of c (the only HNS
// call), audited as the agent's passes audit theirs, with the orphans'
// ages from the state directory's record if stateDir has one (read only:
// the running agent owns it). Without a cluster the plan's endpoints are
// the pods. p may be nil (no plan: everything is foreign).
func AuditOnce(ctx context.Context, c hns.Client, node string, p *plan.NodePlan, stateDir string, adapters func() ([]string, error)) (*audit.Report, error) {
	have, err := c.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("read HNS: %w", err)
	}
	var seen map[string]time.Time
	if stateDir != "" {
		s, err := audit.LoadSeen(filepath.Join(stateDir, statedir.SeenFile))
		if err != nil {
			return nil, err
		}
		seen = s.First
	}
	return AuditOf(node, p, have, AuditOptions{Adapters: adapters, Seen: seen, Now: time.Now()})
}
