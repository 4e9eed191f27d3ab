package applier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/hnsplan/hnsplan/applier/audit"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/applier/rollout"
	"github.com/hnsplan/hnsplan/applier/statedir"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// Config is an agent's settings: what `hnsplan-agent run` makes of its
// flags. Node, HNS, Plans, StateDir and HostRoutes are required; the
// zero value of every other field has a default (withDefaults).
type Config struct {
	// Node is the node the agent acts for (--node).
	Node string
	// HNS is the node's HNS (--hns); HNSName names it in the log.
	HNS     hns.Client
	HNSName string
	// Plans delivers the node's verified plans (--plan, --plan-source);
	// PlansFrom names it in the log.
	Plans     planwatch.Source
	PlansFrom string
	// StateDir is the agent's state directory (--state-dir), prepared and
	// locked by the caller: the replace journal, confirmations, the record
	// of the network the agent owns and the echo baseline.
	StateDir string
	// HostRoutes is the host's routing table a replace restores
	// (replace.WindowsRoutes on Windows).
	HostRoutes replace.HostRoutes
	// Kube is the live cluster (--kubeconfig, or in-cluster); nil for an
	// agent that applies the plan alone, which cannot drain (a replace
	// blocks until the operator drains) nor collect leaked endpoints.
	Kube Kube
	// Leases, with Kube, makes network replaces take turns cluster-wide:
	// a replace takes a rollout slot (applier/rollout) before it cordons
	// and gives it back once done, at most the plan's
	// rollout.maxUnavailable nodes at a time. nil: no slots (an agent
	// without a cluster replaces when its plan says).
	Leases typedcoordinationv1.LeasesGetter
	// RolloutNamespace holds the slot Leases (default hnsplan-system);
	// SlotDuration is a slot's lease duration (default
	// rollout.DefaultDuration); SlotPoll how often a node that waits for a
	// slot, or for an operator, looks again (default 10 s).
	RolloutNamespace string
	SlotDuration     time.Duration
	SlotPoll         time.Duration
	// Reachable says whether the API server answers now; with Kube it
	// enables the collection of leaked pod endpoints (GC.Reachable).
	Reachable func(context.Context) bool
	// APIProbe is how often Reachable is asked, to say an outage of the
	// API server (DefaultAPIProbe when zero).
	APIProbe time.Duration
	// Listen is the address of /healthz, /readyz, /metrics and /status
	// (--listen; default 127.0.0.1:9180).
	Listen string
	// Resync (--resync, default 5 min), DrainTimeout (--drain-timeout,
	// default 10 min), GCGrace (--gc-grace, default 10 min) and
	// EndpointPoll (--endpoint-poll, default 2 s: how often a policy-only
	// agent looks for pod endpoints the CNI made): see the flags.
	Resync, DrainTimeout, GCGrace, EndpointPoll time.Duration
	// ACLWriters is how many endpoints' ACL lists a pass writes at once
	// (--acl-writers; 0: DefaultACLWriters).
	ACLWriters int
	// UntilConverged makes Run return nil once HNS matches the plan in
	// force (--until-converged), and an error once it reads back otherwise
	// than written, which no further pass mends.
	UntilConverged bool
	// CNI, if set, plays the CNI (--simulate-cni): after a pass that
	// converged it networks the plan's pods and says how many it added.
	// Pods it added make the agent look again at once (their ACLs).
	CNI func(context.Context, *plan.NodePlan) (int, error)
	// OSBuild reads the node's Windows build, 10.0.<build>.<UBR>
	// (default: RegistryBuild, the registry's; where it fails, the Node's
	// status.nodeInfo.kernelVersion): /status osBuild, the metric
	// hnsplan_windows_build_info and rollout.buildRegression's hold.
	OSBuild func() (string, error)
	// Control is the operator's control ConfigMap (applier/control):
	// suspend and reconcile requests. nil: none.
	Control ControlSource

	// CleanOrphans, if set, removes orphan pod endpoints the audit finds
	// once every guard of audit.Cleanup holds (--clean-orphans; needs
	// Kube and Reachable). nil: the audit only reports them.
	CleanOrphans *audit.Cleanup
	// Adapters lists the host's network adapters by name, for the
	// audit's adapter check; nil where they cannot be listed (off
	// Windows, the in-memory HNS): not checked.
	Adapters func() ([]string, error)
	// Now is the clock of the audit's orphan ages (default time.Now).
	Now func() time.Time
	// Tasks run beside the agent until Run returns (the trusted keys'
	// watcher).
	Tasks []func(context.Context)
	// Log is the agent's log (default: discarded).
	Log *slog.Logger
}

// DefaultEndpointPoll is how often a policy-only agent lists HNS's
// endpoints for ones the CNI made (Config.EndpointPoll).
const DefaultEndpointPoll = 2 * time.Second

// DefaultListen is the address of the agent's HTTP endpoints.
const DefaultListen = "127.0.0.1:9180"

// withDefaults is c with every unset optional field at its default.
func (c Config) withDefaults() Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Resync <= 0 {
		c.Resync = 5 * time.Minute
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 10 * time.Minute
	}
	if c.GCGrace <= 0 {
		c.GCGrace = 10 * time.Minute
	}
	if c.EndpointPoll <= 0 {
		c.EndpointPoll = DefaultEndpointPoll
	}
	if c.RolloutNamespace == "" {
		c.RolloutNamespace = planwatch.ConfigMapNamespace
	}
	if c.SlotDuration <= 0 {
		c.SlotDuration = rollout.DefaultDuration
	}
	if c.SlotPoll <= 0 {
		c.SlotPoll = 10 * time.Second
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// Validate says what is missing from c, naming the field, the flag that
// sets it and what to do; every problem, not the first only.
func (c Config) Validate() error {
	var errs []error
	if c.Node == "" {
		errs = append(errs, errors.New("Config.Node is empty: give --node NAME, the Kubernetes node this agent acts for"))
	}
	if c.HNS == nil {
		errs = append(errs, errors.New("Config.HNS is nil: give --hns (windows, mem or mem:FILE)"))
	}
	if c.Plans == nil {
		errs = append(errs, errors.New("Config.Plans is nil: give --plan FILE, or --plan-source configmap"))
	}
	if c.StateDir == "" {
		errs = append(errs, errors.New("Config.StateDir is empty: give --state-dir DIR, prepared and locked (applier/statedir)"))
	}
	if c.HostRoutes == nil {
		errs = append(errs, errors.New("Config.HostRoutes is nil: give the host's routing table (replace.WindowsRoutes on Windows, replace.NewMemRoutes elsewhere)"))
	}
	if c.Leases != nil && c.Kube == nil {
		errs = append(errs, errors.New("Config.Leases is set without Config.Kube: rollout slots need the cluster's nodes (give both, or neither)"))
	}
	if c.CleanOrphans != nil {
		if err := c.CleanOrphans.Validate(); err != nil {
			errs = append(errs, err)
		}
		if c.Kube == nil || c.Reachable == nil {
			errs = append(errs, errors.New("--clean-orphans needs the cluster (--kubeconfig, or in-cluster): only the synced cluster's pods, never a plan's, tell an orphan"))
		}
	}
	if c.ACLWriters < 0 || c.ACLWriters > 64 {
		errs = append(errs, fmt.Errorf("--acl-writers %d: give 1 (one write at a time) to 64", c.ACLWriters))
	}
	if c.SlotDuration > rollout.MaxDuration {
		errs = append(errs, fmt.Errorf("Config.SlotDuration %v: a slot is renewed at least every %v (the lease-policy refuses longer Leases); give less", c.SlotDuration, rollout.MaxDuration))
	}
	if c.SlotDuration != 0 && c.SlotDuration < 3*time.Second {
		errs = append(errs, fmt.Errorf("Config.SlotDuration %v: a Lease counts whole seconds and is renewed every third of it; give 3s or more", c.SlotDuration))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--resync", c.Resync}, {"--drain-timeout", c.DrainTimeout}, {"--gc-grace", c.GCGrace}, {"--endpoint-poll", c.EndpointPoll}, {"Config.SlotPoll", c.SlotPoll}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s %v is negative: give a positive duration, or leave it out for the default", d.name, d.v))
		}
	}
	return errors.Join(errs...)
}

// Kube is the live cluster as the agent uses it; *kube.Client is one.
type Kube interface {
	Caches
	// Start starts the caches; Changes signals that something in them
	// changed.
	Start(ctx context.Context)
	Changes() <-chan struct{}
	// Node is this node as the cache shows it.
	Node() (kube.Node, bool)
	// SetStatus writes the node's hnsplan.io/ annotations; PublishTunnel
	// its VXLAN tunnel for Calico's Linux nodes; Event records an Event
	// on it.
	SetStatus(ctx context.Context, st kube.Status) error
	PublishTunnel(ctx context.Context, mac string, vtep netip.Addr) error
	Event(eventtype, reason, message string)
	// The drain of a network replace.
	replace.Drainer
}

// AgentStatus is the agent's /status: the last pass's status and the plan
// it applies. `hnsplan-agent status` prints it.
type AgentStatus struct {
	Node    string `json:"node"`
	Plan    string `json:"plan,omitempty"`    // digest of the plan in force
	Applied string `json:"applied,omitempty"` // digest HNS matches
	// AppliedRoutes is the digest of the route table head whose routes
	// HNS holds: routes change without the plan's digest (a node joins).
	AppliedRoutes string         `json:"appliedRoutes,omitempty"`
	State         kube.NodeState `json:"state"`
	Error         string         `json:"lastError,omitempty"`
	Ops           int            `json:"ops"`
	Pending       []string       `json:"pending,omitempty"`
	// Notes are what the last pass found wrong in what others made and
	// left alone (an address several endpoints hold).
	Notes []string `json:"notes,omitempty"`
	// Mismatches are the fields HNS reads back otherwise than the agent
	// wrote them (state hns-readback-mismatch).
	Mismatches []string `json:"readbackMismatches,omitempty"`
	Planned    string   `json:"planSource,omitempty"`
	Reject     string   `json:"rejected,omitempty"` // the last plan refused, why
	Signer     string   `json:"signedBy,omitempty"` // the trusted key that signed the plan in force
	// OSBuild is the node's Windows build and its known regression; nil
	// while unknown.
	OSBuild *OSBuild `json:"osBuild,omitempty"`
	// Suspended is the operator's suspension (state suspended); nil when
	// the agent is not suspended.
	Suspended *Suspension `json:"suspended,omitempty"`

	// Audit is the HNS audit of the last pass's snapshot (applier/audit).
	Audit *audit.Report `json:"audit,omitempty"`
	// APIServerUnreachableSince is when the API server stopped answering
	// the agent's probe; nil while it answers.
	APIServerUnreachableSince *time.Time `json:"apiServerUnreachableSince,omitempty"`
}

// Agent is the node agent's service: it takes verified plans from its
// source, runs the reconciler's passes in a Loop on every plan, cluster
// change and resync, and reports each pass: /status, the Node's
// annotations and Events, the VXLAN tunnel. What it does after a pass is
// its requeue policy (Pass).
type Agent struct {
	cfg   Config
	r     *Reconciler
	loop  *Loop
	slots *slotGate
	build *buildWatch
	ctl   *controlGate
	api   *apiWatch // nil without a cluster
	reg   *prometheus.Registry
	// clusters makes each pass's Cluster (passes run one at a time).
	clusters ClusterCache
	// ctx is Run's: the replacer's callbacks, called within a pass, use it.
	ctx context.Context

	mu           sync.Mutex
	st           AgentStatus
	tunnelFor    string // the applied digest the tunnel was last looked at for
	mismatchSaid string // the mismatches the last Event named
	conflictSaid string // the conflict the last Event named
	notesSaid    string // the notes the last Event named
	audit        auditor
	auditSummary string // the last audit's summary, the Node annotation
	done         chan error
}

// NewAgent validates cfg and returns its agent.
func NewAgent(cfg Config) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a := &Agent{cfg: cfg, reg: reg, ctx: context.Background(), st: AgentStatus{Node: cfg.Node, State: kube.StateWaiting}, done: make(chan error, 1)}
	a.loop = &Loop{Pass: a.Pass, Resync: cfg.Resync, Poll: cfg.SlotPoll}
	a.loop.Init()
	a.build = newBuildWatch(reg)
	a.ctl = newControlGate(reg)
	a.build.registry = cfg.OSBuild
	if a.build.registry == nil {
		a.build.registry = RegistryBuild
	}
	a.slots = &slotGate{dir: cfg.StateDir, log: cfg.Log, trigger: a.loop.Trigger,
		base: func() context.Context { return a.ctx }, event: func(string, string, string) {}, held: a.build.regressed}
	if k := cfg.Kube; k != nil {
		a.build.event = k.Event
		a.ctl.events = k.Event
		a.build.node = func() (string, bool) { n, ok := k.Node(); return n.KernelVersion, ok }
		a.slots.event = k.Event
		if cfg.Leases != nil {
			a.slots.leases, a.slots.nodes = cfg.Leases, k.Nodes
			a.slots.slots = &rollout.Slots{Leases: cfg.Leases, Namespace: cfg.RolloutNamespace, Holder: cfg.Node, Duration: cfg.SlotDuration}
		}
	}
	if cfg.Kube != nil && cfg.Reachable != nil {
		a.api = newAPIWatch(a)
	}
	a.r = &Reconciler{HNS: cfg.HNS, Metrics: NewMetrics(reg), Log: cfg.Log, ACLWriters: cfg.ACLWriters,
		Owned: statedir.Record(cfg.StateDir), Echo: statedir.Baseline(cfg.StateDir), Replacer: a.replacer(), KeepSnapshot: true}
	if cfg.Kube != nil {
		// Leaked pod endpoints go only while the API server answers now.
		a.r.GC = &GC{Grace: cfg.GCGrace, Reachable: cfg.Reachable}
	}
	return a, nil
}

// Status is the agent's status as /status shows it.
func (a *Agent) Status() AgentStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st
}

// replacer is the drain replacer of the agent's node; its states and
// steps are reported as they happen.
func (a *Agent) replacer() *DrainReplacer {
	drainer := a.drainer()
	return &DrainReplacer{Admit: a.slots.Admit, Done: a.slots.Done, Retried: a.slots.Retried, Base: replace.Config{
		HNS: a.cfg.HNS, Drainer: drainer, HostRoutes: a.cfg.HostRoutes,
		JournalPath:  filepath.Join(a.cfg.StateDir, statedir.JournalFile),
		ConfirmPath:  filepath.Join(a.cfg.StateDir, statedir.ConfirmFile),
		DrainTimeout: a.cfg.DrainTimeout,
		OnState: func(s kube.NodeState) {
			a.mu.Lock()
			a.st.State = s
			applied, summary := a.st.Applied, a.auditSummary
			a.mu.Unlock()
			if a.cfg.Kube != nil {
				if err := a.cfg.Kube.SetStatus(a.ctx, kube.Status{Digest: applied, State: s, Audit: summary}); err != nil {
					a.cfg.Log.Warn("node status", "err", err)
				}
			}
		},
		OnEvent: func(e replace.Event) {
			a.cfg.Log.Info("replace", "step", e.Step, "msg", e.Message)
			if a.cfg.Kube != nil {
				a.cfg.Kube.Event(map[bool]string{true: "Warning", false: "Normal"}[e.Warning], "NetworkReplace", e.Message)
			}
		},
	}}
}

// drainer is the Kube's drain, or NoDrainer without a cluster.
func (a *Agent) drainer() replace.Drainer {
	if a.cfg.Kube != nil {
		return a.cfg.Kube
	}
	return NoDrainer{}
}

// NoDrainer is the Drainer of an agent without a cluster: it cannot
// drain, so a replace blocks until the operator drains the node.
type NoDrainer struct{}

func (NoDrainer) Cordon(context.Context) error   { return nil }
func (NoDrainer) Uncordon(context.Context) error { return nil }
func (NoDrainer) Evict(context.Context) ([]string, error) {
	return []string{"(no cluster: drain the node yourself)"}, nil
}
