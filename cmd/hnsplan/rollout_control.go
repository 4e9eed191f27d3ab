package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/hnsplan/hnsplan/applier/control"
)

// The agent states rollout status gives a meaning of their own
// (applier/kube: StateSuspended, StateRolloutHeld).
const (
	stateSuspended   = "suspended"
	stateRolloutHeld = "rollout-held"
)

// suspendedCount is the summary line's ", N suspended", "" for none (the
// line stays as it was without suspensions).
func suspendedCount(st *rolloutStatus) string {
	if st.Summary.Suspended == 0 {
		return ""
	}
	return fmt.Sprintf(", %d suspended", st.Summary.Suspended)
}

// writeSuspended names the suspended nodes, and says so when every agent
// is: such a rollout makes no progress until unsuspended.
func writeSuspended(w io.Writer, st *rolloutStatus) {
	if st.Summary.Suspended == 0 {
		return
	}
	if st.Summary.Suspended == len(st.Nodes) {
		fmt.Fprintf(w, "every agent is suspended: nothing changes on any node until hnsplan rollout unsuspend --all (and NODE for those suspended by their own key)\n")
		return
	}
	var names []string
	for _, r := range st.Nodes {
		if r.Phase == phaseSuspended {
			names = append(names, r.Node)
		}
	}
	fmt.Fprintf(w, "suspended: %s (hnsplan rollout unsuspend NODE...)\n", strings.Join(names, ", "))
}

// heldNote says why resume frees nothing for a node whose replace is held
// for its Windows build, "" for another node.
func heldNote(r nodeRollout) string {
	if r.State != stateRolloutHeld {
		return ""
	}
	return fmt.Sprintf("node %s is rollout-held: it holds no rollout slot, so resume frees nothing for it; its replace starts by itself once the node reports a Windows build without a known regression (install the update its last error names), or when the plan's rollout.buildRegression is proceed (%s)",
		r.Node, tableCell(r.LastError, 300))
}

// controlAction is one of the control commands: which key it writes and
// whether it sets or removes it.
type controlAction struct {
	use, short, long, example string
	key                       func(node string) string // the node's key
	all                       string                   // the key of --all
	remove                    bool
}

var controlActions = []controlAction{
	{use: "suspend", short: "Suspend agents: they write nothing to HNS and take no step of a replace until unsuspended",
		long: `suspend sets the key suspend.<NODE> (or suspend with --all) of the ConfigMap
hnsplan-system/hnsplan-control to the time and --reason. The agents watch it: a suspended agent
makes no HNS call and takes no step of a network replace (one under way goes on from its
journal once unsuspended); it reports state suspended with the key and reason on its Node,
in /status, as an AgentSuspended Event and as hnsplan_agent_suspended. rollout status shows
suspended nodes, and --wait does not end while one is. An agent that cannot read the
ConfigMap is not suspended.`,
		example: `  hnsplan rollout suspend win-1 win-2 --reason "KB5040437 under investigation"
  hnsplan rollout suspend --all --reason "change freeze"`,
		key: control.SuspendKey, all: control.KeySuspend},
	{use: "unsuspend", short: "Let suspended agents program HNS again",
		long: `unsuspend removes the key suspend.<NODE> (or suspend with --all; a node's own key stays, and
is named) from hnsplan-system/hnsplan-control. The agents go on at once.`,
		example: `  hnsplan rollout unsuspend win-1
  hnsplan rollout unsuspend --all`,
		key: control.SuspendKey, all: control.KeySuspend, remove: true},
	{use: "reconcile", short: "Ask agents for a pass now, instead of at their next resync",
		long: `reconcile sets the key reconcile.<NODE> (or reconcile with --all) of hnsplan-system/hnsplan-control
to the time: each agent runs a pass at once and records a ReconcileRequested Event on its
Node. A request older than an agent is ignored by it (it passed since it started). A
suspended agent records the request and passes once unsuspended.`,
		example: `  hnsplan rollout reconcile win-1
  hnsplan rollout reconcile --all --reason "after the HNS reset"`,
		key: control.ReconcileKey, all: control.KeyReconcile},
}

func newRolloutControlCmds() []*cobra.Command {
	var cmds []*cobra.Command
	for _, act := range controlActions {
		f := &rolloutFlags{}
		var all bool
		var reason string
		cmd := &cobra.Command{
			Use: act.use + " NODE...|--all", Short: act.short, Example: act.example,
			Long: act.long + `

It writes its own keys only, by a JSON merge patch of the ConfigMap, which deploy/ ships empty;
the Role hnsplan-rollout-control may get and patch that ConfigMap and nothing else.

Exit codes: 0 written, 1 the cluster failed (or the ConfigMap is missing), 3 usage error.`,
			RunE: func(cmd *cobra.Command, args []string) error {
				if all == (len(args) > 0) {
					return &exitError{code: exitUsage, err: fmt.Errorf("%s needs NODE names or --all, not both", act.use)}
				}
				for _, n := range args {
					if err := control.CheckNode(n); err != nil {
						return &exitError{code: exitUsage, err: err}
					}
				}
				if act.remove && reason != "" {
					return &exitError{code: exitUsage, err: errors.New("--reason: unsuspend writes no value; give it to suspend")}
				}
				cs, host, err := f.client()
				if err != nil {
					return err
				}
				ctx := cmd.Context()
				if ctx == nil {
					ctx = context.Background()
				}
				return runControl(ctx, cmd.OutOrStdout(), cs, host, f.namespace, act, args, all, reason, time.Now())
			},
		}
		f.register(cmd)
		cmd.Flags().BoolVar(&all, "all", false, "every agent (the key "+act.all+")")
		if !act.remove {
			cmd.Flags().StringVar(&reason, "reason", "", fmt.Sprintf("why, for the agents' status and Events (one printable line, at most %d bytes)", control.MaxReason))
		}
		cmds = append(cmds, cmd)
	}
	return cmds
}

// runControl writes act's keys for nodes (or its --all key) by a merge
// patch that names those keys only.
func runControl(ctx context.Context, out io.Writer, cs kubernetes.Interface, host, namespace string, act controlAction, nodes []string, all bool, reason string, now time.Time) error {
	keys := []string{act.all}
	if !all {
		keys = keys[:0]
		for _, n := range nodes {
			keys = append(keys, act.key(n))
		}
	}
	data := map[string]any{}
	value := control.Value{At: now, Reason: reason}.Format()
	for _, k := range keys {
		if act.remove {
			data[k] = nil // merge patch: remove
		} else {
			data[k] = value
		}
	}
	patch, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		return err
	}
	cm, err := cs.CoreV1().ConfigMaps(namespace).Patch(ctx, control.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "hnsplan-rollout"})
	if apierrors.IsNotFound(err) {
		return &exitError{code: exitInvalid, err: fmt.Errorf("the ConfigMap %s/%s does not exist: apply deploy/ (its base ships it empty), or create it: kubectl -n %s create configmap %s",
			namespace, control.Name, namespace, control.Name)}
	}
	if err != nil {
		return apiFailure(host, err)
	}
	verb := map[string]string{"suspend": "suspended", "unsuspend": "unsuspended", "reconcile": "asked for a pass"}[act.use]
	who := "every agent"
	if !all {
		who = strings.Join(nodes, ", ")
	}
	fmt.Fprintf(out, "%s: %s (%s/%s keys %s)\n", who, verb, namespace, control.Name, strings.Join(keys, ", "))
	if act.remove && all {
		var still []string
		for k := range cm.Data {
			if n, ok := strings.CutPrefix(k, control.KeySuspend+"."); ok {
				still = append(still, n)
			}
		}
		if len(still) > 0 {
			slices.Sort(still)
			fmt.Fprintf(out, "still suspended by their own key: %s (hnsplan rollout unsuspend %s)\n", strings.Join(still, ", "), strings.Join(still, " "))
		}
	}
	return nil
}
