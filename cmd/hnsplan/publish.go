package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hnsplan/hnsplan/compiler"
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

	// maxConfigMapData is what the API server accepts in a ConfigMap's
	// data, keys included (core.MaxSecretSize, 1 MiB).
	maxConfigMapData = 1 << 20

	publishTimeout = 30 * time.Second // per request
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
Each ConfigMap is written by server-side apply (field manager "hnsplan", forced); the
namespace is created if it is missing.

DIR is an intent directory (compiled here, as compile does; --inventory applies) or a
plan directory written by compile (_index.json and <node>.json; each plan is verified).

--sign-key KEY signs each plan with an OpenSSH ed25519 private key and publishes the
signature under the key ` + publishSigKey + ` beside the plan. Without it, the signatures compile
--sign-key wrote beside a plan directory's plans are published as they are (each checked
to sign its plan); a plan without one is published unsigned, and an agent with trusted
keys refuses it.

The cluster is the current context of the kubeconfig (--kubeconfig, else $KUBECONFIG,
else ~/.kube/config, else the in-cluster service account); --context picks another.
--prune deletes the plan ConfigMaps labelled ` + labelManagedBy + `=hnsplan of nodes that
have no plan any more. --dry-run never connects: it prints the ConfigMaps it would apply,
their digests and sizes, and checks they fit (1 MiB); whether each would be created,
updated or left unchanged, and what --prune would delete, needs the cluster.

--nodes a,b publishes the plans of those nodes only; --canary N those of the first N
nodes, by name, whose plans differ from their ConfigMaps (so that running it again goes on
to the next N). The other nodes' ConfigMaps are not touched: each is reported "held back"
when its plan would change, or "unchanged". --nodes must name nodes that have a plan; neither
combines with --prune. With --dry-run, --canary cannot know which plans change and takes the
first N nodes by name.

One line per node: "configmap ` + publishNamespace + `/` + publishPrefix + `win-1: created|updated|unchanged (sha256:…)",
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
			files, err := publishFiles(cmd, g, args[0], f.inventory)
			if err != nil {
				return err
			}
			if err := sel.check(files, f.prune, args[0]); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if err := f.signKey.sign(args[0], files); err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			if err := checkPublishable(files); err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			out := cmd.OutOrStdout()
			if f.dryRun {
				return dryRunPublish(out, files, f.prune, sel)
			}
			cs, host, err := kubeClient(f.kubeconfig, f.context)
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			return publish(cmd.Context(), out, cmd.ErrOrStderr(), cs, host, files, f.prune, sel)
		},
	}
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	cmd.Flags().StringVar(&f.context, "context", "", "kubeconfig context to use (default: the current one)")
	cmd.Flags().StringArrayVar(&f.inventory, "inventory", nil, "live-state file (kubectl get ... -o yaml), when DIR is an intent; repeatable")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "print what would be applied; do not connect to the cluster")
	cmd.Flags().BoolVar(&f.prune, "prune", false, "delete hnsplan's plan ConfigMaps of nodes that have no plan any more")
	cmd.Flags().StringArrayVar(&f.nodes, "nodes", nil, "publish only the plans of these nodes (comma-separated; repeatable)")
	cmd.Flags().IntVar(&f.canary, "canary", 0, "publish only to the first N nodes, by name, whose plans change")
	cmd.MarkFlagsMutuallyExclusive("nodes", "canary")
	f.signKey.register(cmd)
	return cmd
}

// publishFiles returns the encoded plans of dir: a plan directory's files
// as they are (each verified), or an intent directory's, compiled and
// encoded as compile writes them.
func publishFiles(cmd *cobra.Command, g *globalFlags, dir string, inventory []string) ([]compiler.File, error) {
	if files, _, ok, err := compiler.ReadPlanDir(dir); ok {
		if err != nil {
			return nil, &exitError{code: exitInvalid, err: fmt.Errorf("%s: %v", dir, err)}
		}
		if len(inventory) > 0 {
			return nil, &exitError{code: exitUsage, err: fmt.Errorf("--inventory applies to an intent directory; %s is a plan directory", dir)}
		}
		return files, nil
	}
	c, err := build(cmd, g, dir, dir, inputLimits.options(inventory))
	if err != nil {
		return nil, err
	}
	files, err := compiler.EncodePlans(c.Plans)
	if err != nil {
		return nil, &exitError{code: exitInvalid, err: err}
	}
	return files, nil
}

// checkPublishable rejects plans that cannot become ConfigMaps: too large,
// or for a node whose name makes no valid ConfigMap name.
func checkPublishable(files []compiler.File) error {
	var errs []error
	seen := map[string]bool{}
	for _, f := range files {
		if seen[f.Node] {
			errs = append(errs, fmt.Errorf("node %s has two plans", f.Node))
		}
		seen[f.Node] = true
		if msgs := validation.IsDNS1123Subdomain(configMapName(f.Node)); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("node %s: ConfigMap name %q is invalid: %s", f.Node, configMapName(f.Node), strings.Join(msgs, "; ")))
		}
		if n := len(f.Data) + len(publishKey) + len(f.Signature) + len(publishSigKey); n > maxConfigMapData {
			errs = append(errs, fmt.Errorf("the plan of node %s is %d bytes (%.2f MiB); a ConfigMap holds at most %d bytes (1 MiB): split the node's policies or publish with a file plan source",
				f.Node, len(f.Data), float64(len(f.Data))/(1<<20), maxConfigMapData-len(publishKey)))
		}
	}
	return errors.Join(errs...)
}

func dryRunPublish(out io.Writer, files []compiler.File, prune bool, sel selection) error {
	// Without the cluster every plan may change.
	picked := sel.pick(files, func(string) bool { return true })
	for _, f := range files {
		if !picked[f.Node] {
			fmt.Fprintf(out, "configmap %s/%s: held back (%s, %s)\n", publishNamespace, configMapName(f.Node), sel.flag(), f.Digest)
			continue
		}
		fmt.Fprintf(out, "configmap %s/%s: would apply (%s, %d bytes%s)\n", publishNamespace, configMapName(f.Node), f.Digest, len(f.Data), signedBy(f))
	}
	msg := fmt.Sprintf("dry run: would apply %s to namespace %s; nothing sent", plural(len(files), "ConfigMap"), publishNamespace)
	if sel.active() {
		msg = fmt.Sprintf("dry run: would apply %d of %s to namespace %s, holding back %d (%s); nothing sent",
			len(picked), plural(len(files), "ConfigMap"), publishNamespace, len(files)-len(picked), sel.flag())
	}
	if sel.canary > 0 {
		msg += "; --canary picks among the plans that change, which needs the cluster: here the first " + plural(sel.canary, "node") + " by name"
	}
	if prune {
		msg += "; --prune needs the cluster to know what it would delete"
	}
	_, err := fmt.Fprintln(out, msg)
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	return nil
}

// kubeClient connects as kubectl does: --kubeconfig, else $KUBECONFIG,
// else ~/.kube/config, else in-cluster. It returns the server's URL for
// messages.
func kubeClient(kubeconfig, context string) (kubernetes.Interface, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %v", err)
	}
	cfg.Timeout = publishTimeout
	cfg.UserAgent = "hnsplan/" + buildinfo.Get().Version
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, cfg.Host, fmt.Errorf("kubeconfig: %v", err)
	}
	return cs, cfg.Host, nil
}

// publish applies one ConfigMap per plan, then prunes (or reports) the
// plan ConfigMaps of nodes that are gone.
func publish(ctx context.Context, out, errOut io.Writer, cs kubernetes.Interface, host string, files []compiler.File, prune bool, sel selection) error {
	if ctx == nil {
		ctx = context.Background()
	}
	// failed wraps an error; one that is not the API server's answer
	// means it could not be reached.
	failed := func(what string, err error) error {
		var status apierrors.APIStatus
		if !errors.As(err, &status) {
			return &exitError{code: exitInvalid, err: fmt.Errorf("cannot reach the API server %s: %s: %v", host, what, err)}
		}
		return &exitError{code: exitInvalid, err: fmt.Errorf("%s: %v (API server %s)", what, err, host)}
	}
	apply := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}

	// The namespace: created if missing, never changed if present.
	if _, err := cs.CoreV1().Namespaces().Get(ctx, publishNamespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		ns := corev1ac.Namespace(publishNamespace).WithLabels(map[string]string{labelManagedBy: "hnsplan"})
		if _, err := cs.CoreV1().Namespaces().Apply(ctx, ns, apply); err != nil {
			return failed("create namespace "+publishNamespace, err)
		}
		fmt.Fprintf(out, "namespace %s: created\n", publishNamespace)
	} else if err != nil {
		return failed("get namespace "+publishNamespace, err)
	}

	existing := map[string]map[string]string{} // name -> annotations, of ConfigMaps holding a plan
	existingData := map[string]string{}
	existingSig := map[string]string{}
	managed := map[string]bool{}
	list, err := cs.CoreV1().ConfigMaps(publishNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return failed("list configmaps in "+publishNamespace, err)
	}
	for _, cm := range list.Items {
		existing[cm.Name] = cm.Annotations
		existingData[cm.Name] = cm.Data[publishKey]
		existingSig[cm.Name] = cm.Data[publishSigKey]
		managed[cm.Name] = cm.Labels[labelManagedBy] == "hnsplan" && strings.HasPrefix(cm.Name, publishPrefix)
	}

	// stateOf says what applying f does: created, updated or unchanged.
	stateOf := func(f compiler.File) string {
		name := configMapName(f.Node)
		ann, ok := existing[name]
		switch {
		case !ok:
			return "created"
		case ann[annotationDigest] == f.Digest && existingData[name] == string(f.Data) && existingSig[name] == string(f.Signature):
			return "unchanged"
		}
		return "updated"
	}
	byNode := map[string]compiler.File{}
	for _, f := range files {
		byNode[f.Node] = f
	}
	picked := sel.pick(files, func(node string) bool { return stateOf(byNode[node]) != "unchanged" })

	var created, updated, unchanged, pruned, heldBack int
	want := map[string]bool{}
	for _, f := range files {
		name := configMapName(f.Node)
		want[name] = true
		if !picked[f.Node] {
			// Not sent: the ConfigMap stays as it is.
			if st := stateOf(f); st == "unchanged" {
				unchanged++
				fmt.Fprintf(out, "configmap %s/%s: unchanged (%s%s)\n", publishNamespace, name, f.Digest, signedBy(f))
			} else {
				heldBack++
				fmt.Fprintf(out, "configmap %s/%s: held back, would be %s (%s, %s%s)\n", publishNamespace, name, st, sel.flag(), f.Digest, signedBy(f))
			}
			continue
		}
		labels := map[string]string{labelManagedBy: "hnsplan"}
		if len(validation.IsValidLabelValue(f.Node)) == 0 {
			labels[labelNode] = f.Node
		} else {
			fmt.Fprintf(errOut, "hnsplan: node %s: the name is no valid label value; %s omits label %s\n", f.Node, name, labelNode)
		}
		// Server-side apply drops a key this manager no longer sends: an
		// unsigned publish removes an earlier signature.
		data := map[string]string{publishKey: string(f.Data)}
		if f.Signature != nil {
			data[publishSigKey] = string(f.Signature)
		}
		cm := corev1ac.ConfigMap(name, publishNamespace).
			WithLabels(labels).
			WithAnnotations(map[string]string{annotationDigest: f.Digest}).
			WithData(data)
		if _, err := cs.CoreV1().ConfigMaps(publishNamespace).Apply(ctx, cm, apply); err != nil {
			return failed(fmt.Sprintf("apply configmap %s/%s", publishNamespace, name), err)
		}
		state := stateOf(f)
		switch state {
		case "created":
			created++
		case "updated":
			updated++
		default:
			unchanged++
		}
		fmt.Fprintf(out, "configmap %s/%s: %s (%s%s)\n", publishNamespace, name, state, f.Digest, signedBy(f))
	}

	var stale []string
	for name := range existing {
		if managed[name] && !want[name] {
			stale = append(stale, name)
		}
	}
	sort.Strings(stale)
	for _, name := range stale {
		if !prune {
			fmt.Fprintf(out, "configmap %s/%s: stale, no plan for node %s (--prune deletes it)\n", publishNamespace, name, strings.TrimPrefix(name, publishPrefix))
			continue
		}
		err := cs.CoreV1().ConfigMaps(publishNamespace).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return failed(fmt.Sprintf("delete configmap %s/%s", publishNamespace, name), err)
		}
		pruned++
		fmt.Fprintf(out, "configmap %s/%s: pruned\n", publishNamespace, name)
	}
	msg := fmt.Sprintf("published %s to %s on %s: %d created, %d updated, %d unchanged",
		plural(len(files), "plan"), publishNamespace, host, created, updated, unchanged)
	if sel.active() {
		msg = fmt.Sprintf("published %d of %s to %s on %s (%s): %d created, %d updated, %d unchanged, %d held back",
			len(picked), plural(len(files), "plan"), publishNamespace, host, sel.flag(), created, updated, unchanged, heldBack)
	}
	if prune {
		msg += fmt.Sprintf(", %d pruned", pruned)
	} else if len(stale) > 0 {
		msg += fmt.Sprintf(", %d stale", len(stale))
	}
	if _, err := fmt.Fprintln(out, msg); err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	return nil
}
