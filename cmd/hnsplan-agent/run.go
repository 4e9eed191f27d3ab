package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/control"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// serviceName is the Windows service's name.
const serviceName = "hnsplan-agent"

// runFlags are the service's settings (`run`, and what `install` passes).
type runFlags struct {
	node, planFile, planSource, kubeconfig, hns, listen, stateDir string
	trustedKeys, memoryLimit                                      string
	aclWriters                                                    int
	mem                                                           memOptions
	resync, drainTimeout, gcGrace, endpointPoll                   time.Duration
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
	f.mem.register(fl)
	fl.StringVar(&f.memoryLimit, "memory-limit", defaultMemoryLimit, "the Go runtime's soft memory limit, such as 224Mi (0: none; GOMEMLIMIT, if set, wins): the GC works harder near it")
	fl.DurationVar(&f.resync, "resync", 5*time.Minute, "period of passes that catch drift nobody announced")
	fl.DurationVar(&f.drainTimeout, "drain-timeout", 10*time.Minute, "how long a replace waits for the node's pods to leave before it reports blocked (and retries)")
	fl.DurationVar(&f.gcGrace, "gc-grace", 10*time.Minute, "how long a pod endpoint no pod explains is left before it is removed (needs a cluster)")
	fl.IntVar(&f.aclWriters, "acl-writers", applier.DefaultACLWriters, "how many endpoints' ACL lists a pass writes at once (1: one after the other, if HNS on this host does not take concurrent writes well)")
	fl.DurationVar(&f.endpointPoll, "endpoint-poll", applier.DefaultEndpointPoll, "with a policy-only plan: how often to list HNS's endpoints for ones the CNI made or remade without a change in the cluster (a restarted sandbox)")
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

// agentStatus is /status (applier.AgentStatus).
type agentStatus = applier.AgentStatus

// runAgent wires the flags to an applier.Agent and runs it: flags that
// cannot work are usage errors (exit 3), what fails once it runs exit 1.
func runAgent(ctx context.Context, f *runFlags, stdout, stderr io.Writer) error {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	klog.SetSlogLogger(log) // client-go's logs join ours
	if f.planSource == "file" && f.planFile == "" {
		return &exitError{code: exitUsage, err: errors.New("run needs --plan FILE, or --plan-source configmap")}
	}
	if f.planSource != "file" && f.planSource != "configmap" {
		return &exitError{code: exitUsage, err: fmt.Errorf("--plan-source %q: want file or configmap", f.planSource)}
	}
	if _, err := setMemoryLimit(f.memoryLimit, log); err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	cl, err := connect(ctx, f, log)
	if err != nil {
		return err
	}
	client := f.client
	if client == nil {
		if client, err = openRunHNS(f.hns, f.mem); err != nil {
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
	cfg := applier.Config{Node: f.node, HNS: client, HNSName: f.hns, StateDir: sd.dir, HostRoutes: hostRoutes(),
		Listen: f.listen, Resync: f.resync, DrainTimeout: f.drainTimeout, GCGrace: f.gcGrace, EndpointPoll: f.endpointPoll, ACLWriters: f.aclWriters,
		UntilConverged: f.untilConverged, Log: log}
	if m, ok := client.(*hnsmem.HNS); ok && f.simulateCNI {
		cfg.CNI = func(_ context.Context, p *plan.NodePlan) (int, error) { return simulatePods(m, p) }
	}
	if cl != nil {
		// Network replaces take turns through the rollout slots.
		cfg.Kube, cfg.Reachable, cfg.Leases = cl.kc, cl.reachable, cl.cs.CoordinationV1()
		// The operator's suspend and reconcile requests.
		cfg.Control = control.Watcher{Client: cl.cs}
	}
	if cfg.Plans, cfg.PlansFrom, cfg.Tasks, err = planSource(f, cl, log); err != nil {
		return err
	}
	a, err := applier.NewAgent(cfg)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if err := a.Run(ctx); err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	if f.untilConverged && ctx.Err() == nil {
		fmt.Fprintf(stdout, "node %s: HNS matches plan %s\n", f.node, a.Status().Plan)
		if m, ok := client.(fmt.Stringer); ok {
			fmt.Fprintf(stdout, "\nHNS now:\n%s", m)
		}
	}
	return nil
}

// cluster is the agent's connection to Kubernetes.
type cluster struct {
	cs kubernetes.Interface
	kc *kube.Client
}

// reachable says whether the API server answers now (its /readyz).
func (c *cluster) reachable(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := c.cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil
}

// connect connects to the cluster of --kubeconfig, or in-cluster; nil
// without one. It settles f.node: --node, the token's node, or the host
// name.
func connect(ctx context.Context, f *runFlags, log *slog.Logger) (*cluster, error) {
	nodeFlag := f.node
	if f.node == "" {
		f.node = hostName()
	}
	restCfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return nil, &exitError{code: exitUsage, err: err}
	}
	if restCfg == nil {
		if f.planSource == "configmap" {
			return nil, &exitError{code: exitUsage, err: errors.New("--plan-source configmap needs a cluster: --kubeconfig, or run in-cluster")}
		}
		return nil, nil
	}
	who, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, &exitError{code: exitFailed, err: err}
	}
	if f.node, err = agentNode(ctx, who, nodeFlag, f.node, log); err != nil {
		return nil, err
	}
	restCfg.UserAgent = "hnsplan-agent/" + f.node
	// Protobuf: a third of JSON's decode cost on the pod informer.
	restCfg.ContentType = "application/vnd.kubernetes.protobuf"
	restCfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, &exitError{code: exitFailed, err: err}
	}
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return nil, &exitError{code: exitFailed, err: err}
	}
	return &cluster{cs: cs, kc: kube.New(cs, dyn, f.node)}, nil
}

// planSource is the plan source of --plan or --plan-source, with the
// trust --trusted-keys or --trusted-keys-configmap give it (and the
// trusted keys' watcher, a task to run beside the agent): only verified
// plans reach the reconciler, and with trusted keys only signed ones.
func planSource(f *runFlags, cl *cluster, log *slog.Logger) (planwatch.Source, string, []func(context.Context), error) {
	var cs kubernetes.Interface
	var kc *kube.Client
	if cl != nil {
		cs, kc = cl.cs, cl.kc
	}
	trust, task, err := startTrust(f, log, cs, kc)
	if err != nil {
		return nil, "", nil, err
	}
	var tasks []func(context.Context)
	if task != nil {
		tasks = append(tasks, task)
	}
	if f.planSource == "configmap" {
		return &planwatch.ConfigMap{Client: cs, Node: f.node, Trust: trust}, "configmap " + planwatch.ConfigMapNamespace + "/" + planwatch.ConfigMapName(f.node), tasks, nil
	}
	return &planwatch.File{Path: f.planFile, Node: f.node, Trust: trust}, f.planFile, tasks, nil
}

// agentNode checks the node the agent acts for against the node its token
// is bound to, which is the only one the admission policies of
// deploy/ let it patch and drain. Without --node (flag "") the
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
		log.Warn("the agent's token is bound to no node: with the admission policies of deploy/ it can neither patch node "+
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
