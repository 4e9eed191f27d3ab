package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/fleet"
)

// The names publish's help gives, fleet's (the ConfigMap contract with
// the agents).
const (
	publishNamespace = fleet.Namespace
	publishKey       = fleet.PlanKey
	publishPrefix    = fleet.PlanPrefix
	publishSigKey    = fleet.PlanSigKey
	labelManagedBy   = fleet.LabelManagedBy
	labelNode        = fleet.LabelNode
	labelPart        = fleet.LabelPart
	annotationDigest = fleet.AnnotationDigest
	partKey          = fleet.PartKey
	partSigKey       = fleet.PartSigKey
	maxObject        = fleet.MaxObject
	publishQPS       = fleet.DefaultQPS
)

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
			return f.run(cmd, g, args[0])
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

// run publishes dir: it checks the flags, reads or compiles the plans,
// signs them, and hands them to fleet.Publish (fleet.DryRun).
func (f *publishFlags) run(cmd *cobra.Command, g *globalFlags, dir string) error {
	if f.kubeconfig != "" && !f.dryRun {
		if _, err := os.Stat(f.kubeconfig); err != nil {
			return &exitError{code: exitUsage, err: fmt.Errorf("--kubeconfig: %v", err)}
		}
	}
	sel, err := f.selection(cmd, dir)
	if err != nil {
		return err
	}
	if err := f.signKey.load(); err != nil {
		return err
	}
	files, plans, err := publishFiles(cmd, g, dir, f.inventory)
	if err != nil {
		return err
	}
	if err := sel.Check(files, f.prune, dir); err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if err := f.signKey.sign(dir, files); err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	objs, err := fleet.Objects(files, plans)
	if err != nil {
		return &exitError{code: exitInvalid, err: fmt.Errorf("%s: %w", dir, err)}
	}
	out := cmd.OutOrStdout()
	if f.dryRun {
		return invalid(fleet.DryRun(out, objs, f.prune, sel))
	}
	if f.qps < 0 {
		return &exitError{code: exitUsage, err: fmt.Errorf("--qps %v: give requests per second, or 0 for no limit", f.qps)}
	}
	qps := f.qps
	if qps == 0 {
		qps = -1
	}
	cs, host, err := fleet.Client(f.kubeconfig, f.context, qps)
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	opts := fleet.Options{Prune: f.prune, Sel: sel, Host: host, Out: out, ErrOut: cmd.ErrOrStderr()}
	return invalid(fleet.Publish(cmd.Context(), cs, objs, opts))
}

// selection is the nodes --nodes and --canary choose, checked as far as
// it can be before the plans are read.
func (f *publishFlags) selection(cmd *cobra.Command, dir string) (fleet.Selection, error) {
	nodes, err := fleet.ParseNodes(f.nodes)
	if err != nil {
		return fleet.Selection{}, &exitError{code: exitUsage, err: err}
	}
	sel := fleet.Selection{Nodes: nodes, Canary: f.canary}
	if cmd.Flags().Changed("canary") && f.canary < 1 {
		sel.Canary = -1 // no silent "all nodes" for --canary 0
	}
	if sel.Canary < 0 || (sel.Active() && f.prune) {
		return sel, &exitError{code: exitUsage, err: sel.Check(nil, f.prune, dir)}
	}
	return sel, nil
}

// invalid is err as exit 1, or nil.
func invalid(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: exitInvalid, err: err}
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

// kubeClient connects as kubectl does (fleet.Client), at client-go's
// default rate. It returns the server's URL for messages.
func kubeClient(kubeconfig, context string) (kubernetes.Interface, string, error) {
	return fleet.Client(kubeconfig, context, 0)
}
