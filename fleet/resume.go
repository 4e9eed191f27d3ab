package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/rollout"
)

// ReasonRolloutResumed is the reason of the Event Resume records on each
// Node whose slot it frees (docs/operations.md, Events).
const ReasonRolloutResumed = "RolloutResumed"

// eventComponent is the source component of the Events the CLI records.
const eventComponent = "hnsplan"

// ResumeOptions say which slots Resume frees and where it reports.
type ResumeOptions struct {
	Namespace string
	// Nodes are the nodes whose slots to free; none for every halted
	// node. Force frees those of named nodes that are not halted.
	Nodes []string
	Force bool
	Host  string // the API server, for messages
	// Out gets a line per node and the summary, ErrOut the warnings.
	Out, ErrOut io.Writer
}

// Resume frees the slots of the halted nodes, or of the named ones, and
// records a RolloutResumed Event on each freed node. Nothing is freed
// unless every named node may be.
func Resume(ctx context.Context, cs kubernetes.Interface, opts ResumeOptions) error {
	st, err := Gather(ctx, cs, opts.Namespace)
	if err != nil {
		return APIError(opts.Host, err)
	}
	todo, err := toResume(st, opts)
	if err != nil {
		return err
	}
	if todo == nil && len(opts.Nodes) == 0 {
		held := 0
		for _, r := range st.Nodes {
			if note := heldNote(r); note != "" {
				fmt.Fprintln(opts.Out, note)
				held++
			}
		}
		if held > 0 {
			return nil
		}
	}
	if todo == nil {
		_, err := fmt.Fprintln(opts.Out, "no rollout is halted: nothing to free")
		return err
	}
	ev := nodeEvents{cs: cs}
	freedSlots, letGo := 0, 0
	for _, r := range todo {
		var freed []string
		if r.Slot != "" {
			if freed, err = rollout.Free(ctx, cs.CoordinationV1(), opts.Namespace, r.Node); err != nil {
				return APIError(opts.Host, err)
			}
		}
		freedSlots += len(freed)
		let, err := letGoOf(ctx, cs, r)
		if err != nil {
			return APIError(opts.Host, err)
		}
		if let {
			letGo++
		}
		freedNode(opts, ev, r, freed, let)
	}
	msg := fmt.Sprintf("freed %s of %s in %s", plural(freedSlots, "rollout slot"), plural(len(todo), "node"), opts.Namespace)
	if letGo > 0 {
		msg += fmt.Sprintf("; let go of %s cordoned by hnsplan's agent", plural(letGo, "node"))
	}
	_, err = fmt.Fprintln(opts.Out, msg)
	return err
}

// letGoOf records on r's Node that an operator let go of it
// (kube.AnnotationLetGo), when it is cordoned by hnsplan's agent: without
// a slot, it would count against maxUnavailable as stranded. It says
// whether it did.
func letGoOf(ctx context.Context, cs kubernetes.Interface, r NodeRollout) (bool, error) {
	if r.NoNode || !kube.Stranded(r.facts.unschedulable, r.facts.annotations) {
		return false, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		kube.AnnotationLetGo: time.Now().UTC().Format(time.RFC3339)}}})
	if err != nil {
		return false, err
	}
	if _, err := cs.CoreV1().Nodes().Patch(ctx, r.Node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return false, fmt.Errorf("let go of node %s (annotate %s): %w", r.Node, kube.AnnotationLetGo, err)
	}
	return true, nil
}

// toResume is the rows whose slots Resume frees: the halted ones
// without names (nil if none), else the named ones, all or none.
func toResume(st *Status, opts ResumeOptions) ([]NodeRollout, error) {
	var todo []NodeRollout
	if len(opts.Nodes) == 0 {
		for _, r := range st.Nodes {
			if r.Phase == PhaseHalted && heldNote(r) == "" {
				todo = append(todo, r)
			}
		}
		return todo, nil
	}
	rows := map[string]NodeRollout{}
	for _, r := range st.Nodes {
		rows[r.Node] = r
	}
	var errs []error
	seen := map[string]bool{}
	for _, n := range opts.Nodes {
		if seen[n] {
			continue
		}
		seen[n] = true
		r, ok := rows[n]
		switch {
		case ok && heldNote(r) != "":
			errs = append(errs, errors.New(heldNote(r)))
		case !ok || (r.Slot == "" && r.Stall == nil):
			errs = append(errs, fmt.Errorf("node %s holds no rollout slot in %s and is not stranded: nothing to free (hnsplan rollout status lists the holders)", n, opts.Namespace))
		case r.Phase != PhaseHalted && !opts.Force:
			errs = append(errs, fmt.Errorf("node %s is not halted: it holds %s in state %s, so its replace is under way; wait for it, or give --force to free its slot anyway", n, r.Slot, TableCell(r.State, 32)))
		default:
			todo = append(todo, r)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("nothing freed: %w", errors.Join(errs...))
	}
	return todo, nil
}

// freedNode reports what was freed of r's node, true to its stall, and
// records its Event.
func freedNode(opts ResumeOptions, ev nodeEvents, r NodeRollout, freed []string, letGo bool) {
	was := TableCell(r.State, 32)
	if r.LastError != "" {
		was += ": " + TableCell(r.LastError, 200)
	}
	const letGoMsg = "; let go of its cordon by hnsplan's agent: it no longer counts against maxUnavailable, and stays cordoned until its agent finishes its replace or you uncordon it"
	kind := ""
	if r.Stall != nil {
		kind = r.Stall.Kind
	}
	switch {
	case kind == StallStranded && letGo:
		fmt.Fprintf(opts.Out, "node %s: held no rollout slot (its agent is gone in the middle of a replace)%s\n", r.Node, letGoMsg)
	case len(freed) == 0 && letGo:
		fmt.Fprintf(opts.Out, "node %s: its slot is gone already%s\n", r.Node, letGoMsg)
	case len(freed) == 0:
		fmt.Fprintf(opts.Out, "node %s: its slot is gone already (released, or taken over after it expired)\n", r.Node)
		return
	case kind == StallForeignHolder:
		fmt.Fprintf(opts.Out, "node %s: freed %s, held by a name that is no Windows node (no agent would ever release it)\n", r.Node, strings.Join(freed, ", "))
	case kind == StallAbandoned:
		fmt.Fprintf(opts.Out, "node %s: freed %s, which its agent had stopped renewing (was %s)%s\n", r.Node, strings.Join(freed, ", "), was, map[bool]string{true: letGoMsg}[letGo])
	default:
		fmt.Fprintf(opts.Out, "node %s: freed %s (was %s)%s\n", r.Node, strings.Join(freed, ", "), was, map[bool]string{true: letGoMsg}[letGo])
	}
	if r.NoNode {
		fmt.Fprintf(opts.ErrOut, "hnsplan: node %s: no Node object, so no %s Event was recorded\n", r.Node, ReasonRolloutResumed)
		return
	}
	what := "let go of this node, cordoned by hnsplan's agent with no rollout slot (it no longer counts against maxUnavailable)"
	if len(freed) > 0 {
		what = "freed rollout slot " + strings.Join(freed, ", ")
		if letGo {
			what += " and let go of this node's cordon"
		}
	}
	msg := fmt.Sprintf("hnsplan rollout resume %s (state %s); the rollout goes on without this node. Fix it, then run hnsplan-agent replace --retry on it",
		what, was)
	if err := ev.Event(r, corev1.EventTypeNormal, ReasonRolloutResumed, msg); err != nil {
		// The slot is freed either way; the Event only records it.
		fmt.Fprintf(opts.ErrOut, "hnsplan: node %s: the slot is freed, but the %s Event could not be recorded: %v\n", r.Node, ReasonRolloutResumed, err)
	}
}

// nodeEvents records Events on Nodes, as the agent's do (namespace
// default, the namespace client-go's recorder gives a cluster-scoped
// object's Events), but synchronously: a CLI that exits right after must
// not lose them in a broadcaster's queue.
type nodeEvents struct {
	cs  kubernetes.Interface
	now func() time.Time
}

// Event records an Event of eventtype and reason on r's Node.
func (e nodeEvents) Event(r NodeRollout, eventtype, reason, message string) error {
	now := time.Now()
	if e.now != nil {
		now = e.now()
	}
	t := metav1.NewTime(now)
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", r.Node, now.UnixNano()),
			Namespace: metav1.NamespaceDefault,
		},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: r.Node, UID: types.UID(r.uid)},
		Reason:         reason,
		Message:        message,
		Type:           eventtype,
		Source:         corev1.EventSource{Component: eventComponent},
		FirstTimestamp: t,
		LastTimestamp:  t,
		Count:          1,
	}
	ctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
	defer cancel()
	_, err := e.cs.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{})
	return err
}
