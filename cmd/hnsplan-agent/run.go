package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/applier/statedir"
	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/internal/crash"
)

// serviceName is the Windows service's name.
const serviceName = "hnsplan-agent"

// runFlags are the service's settings (`run`, and what `install` passes).
type runFlags struct {
	node, planFile, planSource, kubeconfig, hns, listen, stateDir string
	trustedKeys, memQuirks                                        string
	resync, drainTimeout, gcGrace                                 time.Duration
	untilConverged, simulateCNI, trustedKeysCM                    bool

	client hns.Client // tests: this HNS instead of --hns
}

func (f *runFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.node, "node", "", "this node's name (default: the node the agent's token is bound to, else the host name, lower case)")
	fl.StringVar(&f.planFile, "plan", "", "the plan file to watch (plans arrive by atomic rename into its directory)")
	fl.StringVar(&f.planSource, "plan-source", "file", "where the plan comes from: file (--plan) or configmap (hnsplan-system/plan-<node>)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the agent's service account (default: in-cluster, or none: no live pods, plan only)")
	fl.StringVar(&f.hns, "hns", defaultHNS, "HNS to talk to: mem, mem:STATE.json"+windowsHNSHelp)
	fl.StringVar(&f.listen, "listen", "127.0.0.1:9180", "address of /healthz, /readyz, /metrics and /status")
	fl.StringVar(&f.stateDir, "state-dir", "", stateDirHelp)
	fl.StringVar(&f.memQuirks, "mem-quirks", "", memQuirksHelp)
	fl.DurationVar(&f.resync, "resync", 5*time.Minute, "period of passes that catch drift nobody announced")
	fl.DurationVar(&f.drainTimeout, "drain-timeout", 10*time.Minute, "how long a replace waits for the node's pods to leave before it reports blocked (and retries)")
	fl.DurationVar(&f.gcGrace, "gc-grace", 10*time.Minute, "how long a pod endpoint no pod explains is left before it is removed (needs a cluster)")
	fl.BoolVar(&f.untilConverged, "until-converged", false, "exit 0 once HNS matches the plan (demos, scripts)")
	fl.BoolVar(&f.simulateCNI, "simulate-cni", false, "with --hns mem: network the plan's pods as the CNI would")
	fl.StringVar(&f.trustedKeys, "trusted-keys", "", trustedKeysHelp)
	fl.BoolVar(&f.trustedKeysCM, "trusted-keys-configmap", false, trustedKeysCMHelp)
}

func newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [--plan FILE | --plan-source configmap] [--kubeconfig F] [--hns ...]",
		Short: "Converge this node's HNS to its plan and the live cluster, until stopped",
		Long: `run is the agent's service. It watches the node's plan (a file, by its directory, or
the ConfigMap hnsplan-system/plan-<node>), applies only plans that verify, and keeps the
last good one; it watches the cluster's pods, namespaces and nodes, renders the ACLs of
this node's pods from the plan's policy program, and converges HNS: on every plan or
cluster change, and every --resync for drift. A change HNS cannot make in place is a
journalled replace (cordon, drain, recreate, uncordon), or waits for
'hnsplan-agent replace --confirm' when the plan says replacement: manual.

Status goes to the Node's hnsplan.io/ annotations and Events, and to /status.
Under the Windows service control manager it runs as the service 'hnsplan-agent'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			run := func(ctx context.Context) error { return runAgent(ctx, &f, cmd.OutOrStdout(), cmd.ErrOrStderr()) }
			if handled, err := runAsService(serviceName, run); handled {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return run(ctx)
		},
	}
	f.register(cmd)
	return cmd
}

// agentStatus is /status: the reconciler's status with what it applies.
type agentStatus struct {
	Node    string         `json:"node"`
	Plan    string         `json:"plan,omitempty"`    // digest of the plan in force
	Applied string         `json:"applied,omitempty"` // digest HNS matches
	State   kube.NodeState `json:"state"`
	Error   string         `json:"lastError,omitempty"`
	Ops     int            `json:"ops"`
	Pending []string       `json:"pending,omitempty"`
	// Mismatches are the fields HNS reads back otherwise than the agent
	// wrote them (state hns-readback-mismatch).
	Mismatches []string `json:"readbackMismatches,omitempty"`
	Planned    string   `json:"planSource,omitempty"`
	Reject     string   `json:"rejected,omitempty"` // the last plan refused, why
	Signer     string   `json:"signedBy,omitempty"` // the trusted key that signed the plan in force
}

func runAgent(ctx context.Context, f *runFlags, stdout, stderr io.Writer) error {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	klog.SetSlogLogger(log) // client-go's logs join ours
	nodeFlag := f.node
	if f.node == "" {
		f.node = hostName()
	}
	if f.planSource == "file" && f.planFile == "" {
		return &exitError{code: exitUsage, err: errors.New("run needs --plan FILE, or --plan-source configmap")}
	}
	if f.planSource != "file" && f.planSource != "configmap" {
		return &exitError{code: exitUsage, err: fmt.Errorf("--plan-source %q: want file or configmap", f.planSource)}
	}

	// Kubernetes, when there is one.
	var kc *kube.Client
	restCfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if restCfg == nil && f.planSource == "configmap" {
		return &exitError{code: exitUsage, err: errors.New("--plan-source configmap needs a cluster: --kubeconfig, or run in-cluster")}
	}
	var cs kubernetes.Interface
	if restCfg != nil {
		who, err := kubernetes.NewForConfig(restCfg)
		if err != nil {
			return &exitError{code: exitFailed, err: err}
		}
		if f.node, err = agentNode(ctx, who, nodeFlag, f.node, log); err != nil {
			return err
		}
		restCfg.UserAgent = "hnsplan-agent/" + f.node
		// Protobuf: a third of JSON's decode cost on the pod informer.
		restCfg.ContentType = "application/vnd.kubernetes.protobuf"
		restCfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
		if cs, err = kubernetes.NewForConfig(restCfg); err != nil {
			return &exitError{code: exitFailed, err: err}
		}
		dyn, err := dynamic.NewForConfig(restCfg)
		if err != nil {
			return &exitError{code: exitFailed, err: err}
		}
		kc = kube.New(cs, dyn, f.node)
	}

	// HNS. The in-memory one plays this node once the first plan is known.
	client := f.client
	if client == nil {
		if client, err = openRunHNS(f.hns, f.memQuirks); err != nil {
			return err
		}
	}

	// One agent per node: a second one on the same state directory
	// would run the same replace.
	sd, err := openStateDir(f.stateDir, f.hns, "run")
	if err != nil {
		return err
	}
	defer sd.close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var mu sync.Mutex
	st := agentStatus{Node: f.node, State: kube.StateWaiting}
	r := &applier.Reconciler{HNS: client, Metrics: applier.NewMetrics(reg), Log: log, Owned: statedir.Record(sd.dir), Echo: statedir.Baseline(sd.dir)}
	var drainer replace.Drainer = noDrainer{}
	if kc != nil {
		drainer = kc
		// Leaked pod endpoints go only while the API server answers now.
		r.GC = &applier.GC{Grace: f.gcGrace, Reachable: func(ctx context.Context) bool {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			return err == nil
		}}
	}
	r.Replacer = &applier.DrainReplacer{Base: replace.Config{
		HNS: client, Drainer: drainer, HostRoutes: hostRoutes(),
		JournalPath:  filepath.Join(sd.dir, statedir.JournalFile),
		ConfirmPath:  filepath.Join(sd.dir, statedir.ConfirmFile),
		DrainTimeout: f.drainTimeout,
		OnState: func(s kube.NodeState) {
			mu.Lock()
			st.State = s
			applied := st.Applied
			mu.Unlock()
			if kc != nil {
				if err := kc.SetStatus(ctx, kube.Status{Digest: applied, State: s}); err != nil {
					log.Warn("node status", "err", err)
				}
			}
		},
		OnEvent: func(e replace.Event) {
			log.Info("replace", "step", e.Step, "msg", e.Message)
			if kc != nil {
				kc.Event(map[bool]string{true: "Warning", false: "Normal"}[e.Warning], "NetworkReplace", e.Message)
			}
		},
	}}

	loop := &applier.Loop{R: r, Resync: f.resync}
	if kc != nil {
		loop.Cluster = func() (*applier.Cluster, bool) { return clusterOf(kc) }
	}
	loop.Init()

	converged := make(chan struct{}, 1)
	errc := make(chan error, 4)
	var tunnelFor string    // the applied digest the tunnel was last looked at for (Report only)
	var mismatchSaid string // the mismatches last reported by an Event (Report only)
	r.Report = func(ctx context.Context, s applier.Status) {
		mismatches := make([]string, len(s.Mismatches))
		for i, m := range s.Mismatches {
			mismatches[i] = m.String()
		}
		mismatch := strings.Join(mismatches, "; ")
		mu.Lock()
		st.Applied, st.State, st.Error, st.Ops, st.Pending, st.Mismatches = s.Digest, s.State, s.LastError, s.Ops, s.Pending, mismatches
		if p := r.Plan(); p != nil {
			st.Plan = p.Digest
		}
		current := st.Plan
		mu.Unlock()
		if s.Ops > 0 || s.LastError != "" && s.State != kube.StateWaiting {
			log.Info("pass", "state", s.State, "ops", s.Ops, "applied", s.Digest, "err", s.LastError)
		}
		if s.State != kube.StateError && s.State != kube.StateWaiting && mismatch != mismatchSaid {
			// Once per new set of mismatches: they stay until the plan or
			// the object changes.
			if mismatch != "" {
				log.Warn("HNS reads objects back otherwise than the agent wrote them; not writing them again", "mismatch", mismatch)
				if kc != nil {
					kc.Event("Warning", "HNSReadbackMismatch", "hns-readback-mismatch: "+mismatch)
				}
			}
			mismatchSaid = mismatch
		}
		if kc != nil {
			if err := kc.SetStatus(ctx, kube.Status{Digest: s.Digest, State: s.State, Error: s.LastError, Mismatch: mismatch}); err != nil {
				log.Warn("node status", "err", err)
			}
			// The tunnel changes only with the network: look (a snapshot)
			// after a pass that changed HNS or applied a new plan (a replace
			// gives a new DrMacAddress), or while none is published.
			if n, ok := kc.Node(); s.Ops > 0 || s.Digest != tunnelFor || !ok || n.TunnelMAC == "" {
				publishTunnel(ctx, log, kc, client, r.Plan())
				tunnelFor = s.Digest
			}
		}
		if m, ok := client.(*hnsmem.HNS); ok && f.simulateCNI && s.State == kube.StateConverged {
			// The network is up: the CNI networks the plan's pods.
			if n, err := simulatePods(m, r.Plan()); err != nil {
				log.Warn("simulate the CNI", "err", err)
			} else if n > 0 {
				log.Info("the CNI networked pods (simulated)", "pods", n)
				s.Ops++ // a change: look again
			}
		}
		if s.Ops > 0 {
			// Verify: the next pass should find nothing to do.
			loop.Trigger()
		}
		if s.State == kube.StateConverged && s.Ops == 0 && s.Digest == current {
			select {
			case converged <- struct{}{}:
			default:
			}
		}
		if f.untilConverged && s.State == kube.StateReadbackMismatch && s.Ops == 0 {
			// It will not converge by itself: say so and stop.
			select {
			case errc <- &exitError{code: exitFailed, err: errors.New(s.LastError)}:
			default:
			}
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	goFn := func(fn func()) {
		wg.Add(1)
		go func() { defer wg.Done(); defer crash.Goroutine("hnsplan-agent"); fn() }()
	}

	// The plan source: only verified plans reach the reconciler, and with
	// trusted keys only signed ones.
	trust, err := startTrust(ctx, f, log, cs, kc, goFn)
	if err != nil {
		cancel()
		wg.Wait()
		return err
	}
	var src planwatch.Source = &planwatch.File{Path: f.planFile, Node: f.node, Trust: trust}
	srcName := f.planFile
	if f.planSource == "configmap" {
		src, srcName = &planwatch.ConfigMap{Client: cs, Node: f.node, Trust: trust}, "configmap "+planwatch.ConfigMapNamespace+"/"+planwatch.ConfigMapName(f.node)
	}
	updates := make(chan planwatch.Update)
	goFn(func() {
		if err := src.Run(ctx, updates); err != nil && ctx.Err() == nil {
			errc <- &exitError{code: exitFailed, err: err}
		}
	})
	goFn(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case u := <-updates:
				mu.Lock()
				st.Planned = u.Source
				if u.Err != nil {
					st.Reject = u.Err.Error()
					mu.Unlock()
					log.Warn("plan not applied; the last good plan stays", "source", u.Source, "err", u.Err)
					var se *plan.SignatureError
					switch {
					case kc == nil || errors.Is(u.Err, planwatch.ErrAbsent):
					case errors.As(u.Err, &se):
						// Its own reason: someone may be trying to
						// apply a plan nobody trusted signed.
						kc.Event("Warning", "PlanSignatureRejected", u.Err.Error())
					default:
						kc.Event("Warning", "PlanRejected", u.Err.Error())
					}
					continue
				}
				st.Reject, st.Plan, st.Signer = "", u.Plan.Digest, u.Signer
				mu.Unlock()
				// The digest and signer of every plan taken: a replayed
				// older plan, validly signed, shows here as an old digest.
				log.Info("plan", "digest", u.Plan.Digest, "source", u.Source, "signedBy", u.Signer)
				r.SetPlan(u.Plan)
				loop.Trigger()
			}
		}
	})
	if kc != nil {
		kc.Start(ctx)
		goFn(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-kc.Changes():
					loop.Trigger()
				}
			}
		})
	}

	// /healthz, /readyz, /metrics, /status.
	srv, err := serve(f.listen, reg, func() agentStatus { mu.Lock(); defer mu.Unlock(); return st }, kc)
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	defer srv.Close()
	log.Info("hnsplan-agent running", "node", f.node, "plan", srcName, "hns", f.hns, "listen", srv.Addr, "cluster", kc != nil)

	goFn(func() { loop.Run(ctx) })
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	case <-converged:
		if !f.untilConverged {
			<-ctx.Done() // keep going; converged is only a signal for --until-converged
			break
		}
		mu.Lock()
		digest := st.Plan
		mu.Unlock()
		fmt.Fprintf(stdout, "node %s: HNS matches plan %s\n", f.node, digest)
		if m, ok := client.(fmt.Stringer); ok {
			fmt.Fprintf(stdout, "\nHNS now:\n%s", m)
		}
	}
	cancel()
	wg.Wait()
	return runErr
}

// serve starts the HTTP endpoints. /readyz is ready once a plan has been
// applied and, with a cluster, the caches are synced.
func serve(addr string, reg *prometheus.Registry, status func() agentStatus, kc *kube.Client) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		s := status()
		switch {
		case kc != nil && !kc.Synced():
			http.Error(w, "cluster caches not synced", http.StatusServiceUnavailable)
		case s.Applied == "":
			http.Error(w, "no plan applied yet: "+string(s.State)+" "+s.Error, http.StatusServiceUnavailable)
		default:
			io.WriteString(w, "ok\n")
		}
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(status())
	})
	srv := &http.Server{Addr: ln.Addr().String(), Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return srv, nil
}

// agentNode checks the node the agent acts for against the node its token
// is bound to, which is the only one the admission policies of
// examples/deploy let it patch and drain. Without --node (flag "") the
// token's node wins over the host name (fallback): as a DaemonSet's pod the
// agent needs no flag. A --node that contradicts the token is a usage error;
// a token that names no node, or an API server that cannot say, is only
// warned about, since clusters without the policies work with it.
func agentNode(ctx context.Context, cs kubernetes.Interface, flag, fallback string, log *slog.Logger) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	id, err := kube.WhoAmI(ctx, cs)
	switch {
	case err != nil:
		log.Warn("cannot tell which node the agent's token is bound to; acting for "+fallback, "err", err)
		return fallback, nil
	case id.Node == "":
		log.Warn("the agent's token is bound to no node: with the admission policies of examples/deploy it can neither patch node "+
			fallback+" nor evict its pods; use a token bound to the Node or to the agent's Pod (docs/operations.md, Least privilege)",
			"user", id.User)
		return fallback, nil
	case flag != "" && flag != id.Node:
		return "", &exitError{code: exitUsage, err: fmt.Errorf("--node %s, but the agent's token (%s) is bound to node %s, "+
			"the only node the API server lets it patch and drain: pass --node %s, or give this node's agent a token bound to %s",
			flag, id.User, id.Node, id.Node, flag)}
	}
	return id.Node, nil
}

// restConfig is the kubeconfig's, in-cluster, or nil for no cluster.
func restConfig(path string) (*rest.Config, error) {
	if path != "" {
		c, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", path, err)
		}
		return c, nil
	}
	if c, err := rest.InClusterConfig(); err == nil {
		return c, nil
	}
	return nil, nil
}

// clusterOf turns the informers' caches into what the reconciler reads.
// It runs on every pass; it is linear in pods.
func clusterOf(kc *kube.Client) (*applier.Cluster, bool) {
	if !kc.Synced() {
		return nil, false
	}
	c := &applier.Cluster{PodNodes: map[string]string{}, Namespaces: map[string]map[string]string{}, TunnelMACs: kc.TunnelMACs()}
	for _, p := range kc.Pods() {
		if p.HostNetwork || len(p.IPs) == 0 {
			continue
		}
		pod := &acl.Pod{Namespace: p.Namespace, Name: p.Name, IP: p.IPs[0], Labels: p.Labels, ServiceAccount: cmp.Or(p.ServiceAccount, "default")}
		for _, ip := range p.IPs {
			if ip.Is4() {
				pod.IP = ip // Windows pods are IPv4 (the plan's block)
				break
			}
		}
		for _, port := range p.Ports {
			if port.Name != "" {
				pod.Ports = append(pod.Ports, acl.NamedPort{Name: port.Name, Protocol: protocolNumber[cmp.Or(port.Protocol, "TCP")], Port: uint16(port.Port)})
			}
		}
		c.Pods = append(c.Pods, pod)
		c.PodNodes[pod.Key()] = p.Node
	}
	for _, ns := range kc.Namespaces() {
		c.Namespaces[ns.Name] = ns.Labels
	}
	c.Blocks, c.NodeAddrs = map[string][]netip.Prefix{}, map[string]netip.Addr{}
	for _, n := range kc.Nodes() {
		for _, a := range n.Addresses {
			if a.Type == "InternalIP" && a.Addr.Is4() {
				c.NodeAddrs[n.Name] = a.Addr
				break
			}
		}
	}
	c.NodeAddr = c.NodeAddrs[kc.NodeName()]
	for _, b := range kc.BlockAffinities() {
		if b.State == "confirmed" && !b.Deleted {
			c.Blocks[b.Node] = append(c.Blocks[b.Node], b.CIDR)
		}
	}
	return c, true
}

var protocolNumber = map[string]int{"TCP": 6, "UDP": 17, "SCTP": 132}

// publishTunnel tells Calico's Linux nodes this node's VTEP: the block's
// .1 and the network's DrMacAddress, once HNS reports them and the
// network's ProviderAddress is the node's (Calico's EnsureVXLANTunnelAddr,
// research/calico-windows.md).
func publishTunnel(ctx context.Context, log *slog.Logger, kc *kube.Client, c hns.Client, p *plan.NodePlan) {
	if p == nil || p.Network.Type != "Overlay" {
		return
	}
	have, err := c.Snapshot(ctx)
	if err != nil {
		return
	}
	n := have.Network(p.Network.Name)
	pa, ok := plan.Find[plan.ProviderAddress](p.HostEndpoint.Policies)
	if n == nil || n.DRMAC == "" || len(n.Subnets) == 0 || !ok || n.ProviderAddress != pa.ProviderAddress {
		return
	}
	vtep := n.Subnets[0].Gateway
	if node, ok := kc.Node(); ok && node.TunnelMAC == n.DRMAC && node.TunnelAddr == vtep {
		return
	}
	if err := kc.PublishTunnel(ctx, n.DRMAC, vtep); err != nil {
		log.Warn("publish the VXLAN tunnel", "err", err)
	}
}

// noDrainer is the Drainer of an agent without a cluster: it cannot drain,
// so a replace blocks until the operator drains the node.
type noDrainer struct{}

func (noDrainer) Cordon(context.Context) error   { return nil }
func (noDrainer) Uncordon(context.Context) error { return nil }
func (noDrainer) Evict(context.Context) ([]string, error) {
	return []string{"(no cluster: drain the node yourself)"}, nil
}
