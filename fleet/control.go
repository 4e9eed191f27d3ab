package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/hnsplan/hnsplan/applier/control"
)

// The agent states rollout status gives a meaning of their own
// (applier/kube: StateSuspended, StateRolloutHeld).
const (
	StateSuspended   = "suspended"
	StateRolloutHeld = "rollout-held"
)

// suspendedCount is the summary line's ", N suspended", "" for none (the
// line stays as it was without suspensions).
func suspendedCount(st *Status) string {
	if st.Summary.Suspended == 0 {
		return ""
	}
	return fmt.Sprintf(", %d suspended", st.Summary.Suspended)
}

// writeSuspended names the suspended nodes, and says so when every agent
// is: such a rollout makes no progress until unsuspended.
func writeSuspended(w io.Writer, st *Status) {
	if st.Summary.Suspended == 0 {
		return
	}
	if st.Summary.Suspended == len(st.Nodes) {
		fmt.Fprintf(w, "every agent is suspended: nothing changes on any node until hnsplan rollout unsuspend --all (and NODE for those suspended by their own key)\n")
		return
	}
	var names []string
	for _, r := range st.Nodes {
		if r.Phase == PhaseSuspended {
			names = append(names, r.Node)
		}
	}
	fmt.Fprintf(w, "suspended: %s (hnsplan rollout unsuspend NODE...)\n", strings.Join(names, ", "))
}

// heldNote says why resume frees nothing for a node whose replace is held
// for its Windows build, "" for another node.
func heldNote(r NodeRollout) string {
	if r.State != StateRolloutHeld {
		return ""
	}
	return fmt.Sprintf("node %s is rollout-held: it holds no rollout slot, so resume frees nothing for it; its replace starts by itself once the node reports a Windows build without a known regression (install the update its last error names), or when the plan's rollout.buildRegression is proceed (%s)",
		r.Node, TableCell(r.LastError, 300))
}

// ControlAction is one of the writes to the agents' control ConfigMap
// (applier/control): which key it writes, and whether it sets or removes it.
type ControlAction struct {
	Name   string                   // suspend, unsuspend or reconcile
	Key    func(node string) string // the node's key
	All    string                   // the key of every agent
	Remove bool                     // remove the keys instead of setting them
}

// ControlActions are the actions `hnsplan rollout` offers, by name.
var ControlActions = map[string]ControlAction{
	"suspend":   {Name: "suspend", Key: control.SuspendKey, All: control.KeySuspend},
	"unsuspend": {Name: "unsuspend", Key: control.SuspendKey, All: control.KeySuspend, Remove: true},
	"reconcile": {Name: "reconcile", Key: control.ReconcileKey, All: control.KeyReconcile},
}

// ControlOptions say what Control writes and where it reports.
type ControlOptions struct {
	Namespace string
	Action    ControlAction
	Nodes     []string // the nodes whose keys to write; none with All
	All       bool     // the action's key for every agent
	Reason    string   // the value's reason (not for a removal)
	Now       time.Time
	Host      string    // the API server, for messages
	Out       io.Writer // a line of what was written
}

// Control writes the action's keys for the nodes (or its every-agent key)
// by a JSON merge patch that names those keys only, so it never undoes a
// write of another operator's to another key.
func Control(ctx context.Context, cs kubernetes.Interface, opts ControlOptions) error {
	act := opts.Action
	keys := []string{act.All}
	if !opts.All {
		keys = keys[:0]
		for _, n := range opts.Nodes {
			keys = append(keys, act.Key(n))
		}
	}
	data := map[string]any{}
	value := control.Value{At: opts.Now, Reason: opts.Reason}.Format()
	for _, k := range keys {
		if act.Remove {
			data[k] = nil // merge patch: remove
		} else {
			data[k] = value
		}
	}
	patch, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		return err
	}
	cm, err := cs.CoreV1().ConfigMaps(opts.Namespace).Patch(ctx, control.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "hnsplan-rollout"})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("the ConfigMap %s/%s does not exist: apply deploy/ (its base ships it empty), or create it: kubectl -n %s create configmap %s",
			opts.Namespace, control.Name, opts.Namespace, control.Name)
	}
	if err != nil {
		return APIError(opts.Host, err)
	}
	verb := map[string]string{"suspend": "suspended", "unsuspend": "unsuspended", "reconcile": "asked for a pass"}[act.Name]
	who := "every agent"
	if !opts.All {
		who = strings.Join(opts.Nodes, ", ")
	}
	fmt.Fprintf(opts.Out, "%s: %s (%s/%s keys %s)\n", who, verb, opts.Namespace, control.Name, strings.Join(keys, ", "))
	if act.Remove && opts.All {
		var still []string
		for k := range cm.Data {
			if n, ok := strings.CutPrefix(k, control.KeySuspend+"."); ok {
				still = append(still, n)
			}
		}
		if len(still) > 0 {
			slices.Sort(still)
			fmt.Fprintf(opts.Out, "still suspended by their own key: %s (hnsplan rollout unsuspend %s)\n", strings.Join(still, ", "), strings.Join(still, " "))
		}
	}
	return nil
}
