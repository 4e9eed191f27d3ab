package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/internal/buildinfo"
)

// The ConfigMap contract between `hnsplan publish` and the agent's
// ConfigMap watcher (DESIGN §6). The agent's package applier/planwatch
// defines the same names (ConfigMapNamespace, ConfigMapKey, ConfigMapName);
// they are repeated here so that the compiler CLI does not depend on the
// agent's code. Change both or neither.
const (
	publishNamespace = "hnsplan-system" // planwatch.ConfigMapNamespace
	publishKey       = "plan.json"      // planwatch.ConfigMapKey
	publishPrefix    = "plan-"          // planwatch.ConfigMapName(node) = "plan-" + node

	fieldManager   = "hnsplan"
	labelManagedBy = "app.kubernetes.io/managed-by"
	labelNode      = "hnsplan.io/node"
	// publishSigKey holds the plan's detached signature, when it is
	// signed: planwatch.ConfigMapSignatureKey.
	publishSigKey    = "plan.json.sig"
	annotationDigest = "hnsplan.io/digest"

	// A shared part (plan.RouteTable, RouteShard, ProgramChunk) is the
	// ConfigMap named exactly as the part, its file under partKey (and a
	// signed head's signature under partSigKey), labelled labelPart with
	// its kind in lower case (partLabel).
	partKey    = "part.json"
	partSigKey = "part.json.sig"
	labelPart  = "hnsplan.io/part"

	// maxObject bounds the data of every ConfigMap publish writes, keys
	// and signature included: a quarter of the API server's 1 MiB, as
	// plan.MaxPartSize bounds every part and plan compile writes, so that
	// each object stays cheap to store and to send to every watcher.
	maxObject = plan.MaxPartSize

	publishTimeout = 30 * time.Second // per request
	// publishQPS and publishBurst are the default client-side rate limit,
	// kubectl's: a publish of 5,000 nodes must not flood the API server.
	publishQPS   = 50
	publishBurst = 100
	// publishWorkers is how many requests publish has in flight at once.
	publishWorkers = 8
)

// configMapName is the name of node's plan ConfigMap.
func configMapName(node string) string { return publishPrefix + node }

type publishFlags struct {
	kubeconfig string
	context    string
	inventory  []string
	dryRun     bool
	prune      bool
	signKey    signKey
	nodes      []string
	canary     int
	qps        float32
}

func newPublishCmd(g *globalFlags) *cobra.Command {
	f := &publishFlags{}
	cmd := &cobra.Command{
		Use:   "publish DIR",
		Short: "Publish the plans as ConfigMaps (hnsplan-system/plan-<node>) by server-side apply",
		Long: `publish puts each Windows node's plan where its agent watches for it: the ConfigMap
` + publishNamespace + `/` + publishPrefix + `<node>, key ` + publishKey + `, holding the plan file byte for byte
(as compile writes it, so the agent verifies its digest), labelled
` + labelManagedBy + `=hnsplan and ` + labelNode + `=<node>, annotated ` + annotationDigest + `.
The parts the plans share (the route table's head and shards, the policy program's
chunks) are ConfigMaps of their own, named as the part (routes-…, program-…), key
` + partKey + `, labelled ` + labelManagedBy + `=hnsplan and ` + labelPart + `=routetable|routeshard|programchunk,
annotated ` + annotationDigest + `. Parts are written first (shards and chunks, then heads),
plans last: an agent never finds a plan, or a head, before what it names. Each ConfigMap
is written by server-side apply (field manager "hnsplan", forced), only when its digest,
data, signature or labels differ from the cluster's; the namespace is created if it is
missing. Every ConfigMap holds at most ` + fmt.Sprint(maxObject) + ` bytes (256 KiB).

DIR is an intent directory (compiled here, as compile does; --inventory applies) or a
plan directory written by compile (_index.json, <node>.json and _<part>.json; each plan
and part is verified).

--sign-key KEY signs each plan and each route table head (which names its shards by
digest) with an OpenSSH ed25519 private key and publishes the signature under the key
` + publishSigKey + ` (` + partSigKey + `) beside it. Without it, the signatures compile --sign-key wrote beside
a plan directory's files are published as they are (each checked to sign its file);
an unsigned plan is published unsigned, and an agent with trusted keys refuses it.

The cluster is the current context of the kubeconfig (--kubeconfig, else $KUBECONFIG,
else ~/.kube/config, else the in-cluster service account); --context picks another;
--qps bounds the requests per second (` + fmt.Sprint(publishQPS) + `, as kubectl; 0 for no limit).
--prune deletes the plan ConfigMaps labelled ` + labelManagedBy + `=hnsplan of nodes that
have no plan any more. Every publish deletes the part ConfigMaps hnsplan wrote that no
plan ConfigMap in the namespace names any more (nor the route table heads those name),
after the plans are written; a plan ConfigMap whose plan cannot be read keeps them all.
--dry-run never connects: it prints the ConfigMaps it would apply, their digests and
sizes, and checks they fit; whether each would be created, updated or left unchanged,
and what would be deleted, needs the cluster.

--nodes a,b publishes the plans of those nodes only; --canary N those of the first N
nodes, by name, whose plans differ from their ConfigMaps (so that running it again goes on
to the next N). The parts those plans name are published with them: a new route table or
program reaches only the chosen nodes, but the route table a plan already names (by its
key) is shared, and a node joining the cluster changes it for every node at once. The
other nodes' ConfigMaps are not touched: each is reported "held back" when its plan would
change, or "unchanged". --nodes must name nodes that have a plan; neither combines with
--prune. With --dry-run, --canary cannot know which plans change and takes the first N
nodes by name.

One line per ConfigMap: "configmap ` + publishNamespace + `/` + publishPrefix + `win-1: created|updated|unchanged (sha256:…)",
then a summary. Exit codes: 0 published, 1 invalid plans or the cluster refused or could
not be reached, 3 usage error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.kubeconfig != "" && !f.dryRun {
				if _, err := os.Stat(f.kubeconfig); err != nil {
					return &exitError{code: exitUsage, err: fmt.Errorf("--kubeconfig: %v", err)}
				}
			}
			nodes, err := parseNodes(f.nodes)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			sel := selection{nodes: nodes, canary: f.canary}
			if cmd.Flags().Changed("canary") && f.canary < 1 {
				sel.canary = -1 // no silent "all nodes" for --canary 0
			}
			if sel.canary < 0 || (sel.active() && f.prune) {
				return &exitError{code: exitUsage, err: sel.check(nil, f.prune, args[0])}
			}
			if err := f.signKey.load(); err != nil {
				return err
			}
			files, plans, err := publishFiles(cmd, g, args[0], f.inventory)
			if err != nil {
				return err
			}
			if err := sel.check(files, f.prune, args[0]); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if err := f.signKey.sign(args[0], files); err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			objs, err := publishObjects(files, plans)
			if err != nil {
				return &exitError{code: exitInvalid, err: fmt.Errorf("%s: %w", args[0], err)}
			}
			out := cmd.OutOrStdout()
			if f.dryRun {
				return dryRunPublish(out, objs, f.prune, sel)
			}
			if f.qps < 0 {
				return &exitError{code: exitUsage, err: fmt.Errorf("--qps %v: give requests per second, or 0 for no limit", f.qps)}
			}
			qps := f.qps
			if qps == 0 {
				qps = -1
			}
			cs, host, err := kubeClientQPS(f.kubeconfig, f.context, qps)
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			return publish(cmd.Context(), out, cmd.ErrOrStderr(), cs, host, objs, publishOptions{prune: f.prune, sel: sel})
		},
	}
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	cmd.Flags().StringVar(&f.context, "context", "", "kubeconfig context to use (default: the current one)")
	cmd.Flags().StringArrayVar(&f.inventory, "inventory", nil, "live-state file (kubectl get ... -o yaml), when DIR is an intent; repeatable")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "print what would be applied; do not connect to the cluster")
	cmd.Flags().BoolVar(&f.prune, "prune", false, "delete hnsplan's plan ConfigMaps of nodes that have no plan any more")
	cmd.Flags().StringArrayVar(&f.nodes, "nodes", nil, "publish only the plans of these nodes (comma-separated; repeatable)")
	cmd.Flags().IntVar(&f.canary, "canary", 0, "publish only to the first N nodes, by name, whose plans change")
	cmd.Flags().Float32Var(&f.qps, "qps", publishQPS, "requests per second to the API server at most (0: no limit)")
	cmd.MarkFlagsMutuallyExclusive("nodes", "canary")
	f.signKey.register(cmd)
	return cmd
}

// publishFiles returns the encoded parts and plans of dir (parts first,
// as compiler.EncodePlans and ReadPlanDir give them) and the plans
// themselves: a plan directory's files as they are (each verified and
// assembled), or an intent directory's, compiled and encoded as compile
// writes them.
func publishFiles(cmd *cobra.Command, g *globalFlags, dir string, inventory []string) ([]compiler.File, []*plan.NodePlan, error) {
	if files, plans, ok, err := compiler.ReadPlanDir(dir); ok {
		if err != nil {
			return nil, nil, &exitError{code: exitInvalid, err: fmt.Errorf("%s: %v", dir, err)}
		}
		if len(inventory) > 0 {
			return nil, nil, &exitError{code: exitUsage, err: fmt.Errorf("--inventory applies to an intent directory; %s is a plan directory", dir)}
		}
		return files, plans, nil
	}
	c, err := build(cmd, g, dir, dir, inputLimits.options(inventory))
	if err != nil {
		return nil, nil, err
	}
	files, err := compiler.EncodePlans(c.Plans)
	if err != nil {
		return nil, nil, &exitError{code: exitInvalid, err: err}
	}
	return files, c.Plans, nil
}

// kubeClient connects as kubectl does: --kubeconfig, else $KUBECONFIG,
// else ~/.kube/config, else in-cluster. It returns the server's URL for
// messages.
func kubeClient(kubeconfig, context string) (kubernetes.Interface, string, error) {
	return kubeClientQPS(kubeconfig, context, 0)
}

// kubeClientQPS is kubeClient sending at most qps requests per second: 0
// for client-go's default, less than 0 for no limit.
func kubeClientQPS(kubeconfig, context string, qps float32) (kubernetes.Interface, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %v", err)
	}
	cfg.Timeout = publishTimeout
	if qps != 0 {
		cfg.QPS, cfg.Burst = qps, max(publishBurst, int(2*qps)) // client-go: no rate limiter for QPS < 0
	}
	cfg.UserAgent = "hnsplan/" + buildinfo.Get().Version
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, cfg.Host, fmt.Errorf("kubeconfig: %v", err)
	}
	return cs, cfg.Host, nil
}
