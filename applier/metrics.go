package applier

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hnsplan/hnsplan/applier/audit"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/kube"
)

// Metrics are the reconciler's Prometheus metrics (/metrics).
type Metrics struct {
	passes   *prometheus.HistogramVec
	ops      *prometheus.CounterVec
	errors   *prometheus.CounterVec
	drifted  prometheus.Gauge
	applied  *prometheus.GaugeVec
	lastPass prometheus.Gauge
	mismatch prometheus.Gauge
	conflict prometheus.Gauge
	findings *prometheus.GaugeVec
	lbs      prometheus.Gauge
	removed  prometheus.Counter
	lastDig  string
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		passes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hnsplan_reconcile_duration_seconds", Help: "Duration of reconcile passes, by the state they ended in.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"state"}),
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hnsplan_hns_ops_total", Help: "Mutating HNS calls, by object kind, action and result.",
		}, []string{"kind", "action", "result"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hnsplan_reconcile_errors_total", Help: "Reconcile passes that failed, by state.",
		}, []string{"state"}),
		drifted: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hnsplan_drift_ops", Help: "Ops the last pass found between HNS and the plan (0: HNS matched).",
		}),
		applied: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hnsplan_applied_plan", Help: "1 for the digest of the plan HNS matches.",
		}, []string{"digest"}),
		lastPass: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hnsplan_last_pass_timestamp_seconds", Help: "When the last pass ended (Unix time).",
		}),
		mismatch: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hnsplan_hns_readback_mismatches", Help: "Fields HNS reads back otherwise than the agent wrote them, after two writes (state hns-readback-mismatch; 0: none).",
		}),
		conflict: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hnsplan_dataplane_conflict", Help: "1 while another dataplane programs this node's HNS and the agent writes nothing (state conflict).",
		}),
	}
	m.findings = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hnsplan_hns_audit_findings", Help: "What the HNS audit of the last pass found, by kind (duplicate-ip, orphan-endpoint, endpoint-state, adapter-wrong, adapter-missing: problems; foreign-network, foreign-endpoint: reported, never touched).",
	}, []string{"kind"})
	m.lbs = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hnsplan_hns_load_balancers", Help: "Load balancers (kube-proxy's) HNS held at the last pass.",
	})
	m.removed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hnsplan_hns_orphan_endpoints_removed_total", Help: "Orphan pod endpoints removed by --clean-orphans.",
	})
	reg.MustRegister(m.passes, m.ops, m.errors, m.drifted, m.applied, m.lastPass, m.mismatch, m.conflict, m.findings, m.lbs, m.removed)
	return m
}

func (m *Metrics) pass(st Status, d time.Duration, err error) {
	m.passes.WithLabelValues(string(st.State)).Observe(d.Seconds())
	m.lastPass.SetToCurrentTime()
	if st.State != kube.StateError && st.State != kube.StateWaiting {
		m.mismatch.Set(float64(len(st.Mismatches)))
	}
	if st.State != kube.StateError {
		m.conflict.Set(map[bool]float64{true: 1}[st.State == kube.StateConflict])
	}
	if err != nil {
		m.errors.WithLabelValues(string(st.State)).Inc()
	}
	if st.Digest != "" && st.Digest != m.lastDig {
		if m.lastDig != "" {
			m.applied.DeleteLabelValues(m.lastDig)
		}
		m.applied.WithLabelValues(st.Digest).Set(1)
		m.lastDig = st.Digest
	}
}

func (m *Metrics) op(op hns.Op, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.ops.WithLabelValues(string(op.Kind), string(op.Action), result).Inc()
}

func (m *Metrics) drift(n int) { m.drifted.Set(float64(n)) }

// audit sets the audit's gauges: every kind, 0 when none was found.
func (m *Metrics) audit(r *audit.Report) {
	if m == nil {
		return
	}
	for _, f := range r.Findings {
		m.findings.WithLabelValues(f.Kind).Set(float64(f.Count))
	}
	m.lbs.Set(float64(r.LoadBalancers))
}

func (m *Metrics) orphanRemoved() {
	if m != nil {
		m.removed.Inc()
	}
}
