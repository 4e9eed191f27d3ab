package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/hnsplan/hnsplan/applier/rollout"
)

// reasonRolloutResumed is the reason of the Event resume records on each
// Node whose slot it frees (docs/operations.md, Events).
const reasonRolloutResumed = "RolloutResumed"

// eventComponent is the source component of the Events the CLI records.
const eventComponent = "hnsplan"

func newRolloutResumeCmd() *cobra.Command {
	f := &rolloutFlags{}
	cmd := &cobra.Command{
		Use:   "resume [NODE...]",
		Short: "Free the rollout slots of halted nodes, so that the rollout goes on without them",
		Long: `resume frees the rollout slots held by halted nodes (as rollout status defines halted):
all of them without NODE, else those of the nodes named. A named node that holds no slot
is an error; one that is not halted (its replace is under way) is refused unless --force.
Nothing is freed unless every named node may be.

Each slot is freed by deleting its Lease at the version read, so a slot another node took
over in between is left alone; each freed node gets a Normal Event RolloutResumed. The
node itself stays as it is (cordoned, blocked or in error): its agent does not take a slot
for the same change again until its state changes; fix it and run
hnsplan-agent replace --retry there.

Exit codes: 0 freed (or nothing halted), 1 a node refused or the cluster failed, 3 usage
error.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				if strings.TrimSpace(a) == "" {
					return &exitError{code: exitUsage, err: errors.New("an empty NODE name; give node names, or none for every halted node")}
				}
			}
			cs, host, err := f.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return resume(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), cs, host, f.namespace, args, f.force)
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&f.force, "force", false, "free the slots of named nodes that are not halted (a replace under way loses its slot)")
	return cmd
}

// resume frees the slots of the halted nodes, or of the named ones.
func resume(ctx context.Context, out, errOut io.Writer, cs kubernetes.Interface, host, namespace string, names []string, force bool) error {
	st, err := gatherRollout(ctx, cs, namespace)
	if err != nil {
		return apiFailure(host, err)
	}
	rows := map[string]nodeRollout{}
	for _, r := range st.Nodes {
		rows[r.Node] = r
	}
	var todo []nodeRollout
	if len(names) == 0 {
		held := 0
		for _, r := range st.Nodes {
			if note := heldNote(r); note != "" {
				fmt.Fprintln(out, note)
				held++
			} else if r.Phase == phaseHalted {
				todo = append(todo, r)
			}
		}
		if len(todo) == 0 && held > 0 {
			return nil
		}
		if len(todo) == 0 {
			_, err := fmt.Fprintln(out, "no rollout is halted: nothing to free")
			return err
		}
	} else {
		var errs []error
		seen := map[string]bool{}
		for _, n := range names {
			if seen[n] {
				continue
			}
			seen[n] = true
			r, ok := rows[n]
			switch {
			case ok && heldNote(r) != "":
				errs = append(errs, errors.New(heldNote(r)))
			case !ok || r.Slot == "":
				errs = append(errs, fmt.Errorf("node %s holds no rollout slot in %s: nothing to free (hnsplan rollout status lists the holders)", n, namespace))
			case r.Phase != phaseHalted && !force:
				errs = append(errs, fmt.Errorf("node %s is not halted: it holds %s in state %s, so its replace is under way; wait for it, or give --force to free its slot anyway", n, r.Slot, tableCell(r.State, 32)))
			default:
				todo = append(todo, r)
			}
		}
		if len(errs) > 0 {
			return &exitError{code: exitInvalid, err: fmt.Errorf("nothing freed: %w", errors.Join(errs...))}
		}
	}
	ev := nodeEvents{cs: cs}
	freedSlots := 0
	for _, r := range todo {
		freed, err := rollout.Free(ctx, cs.CoordinationV1(), namespace, r.Node)
		if err != nil {
			return apiFailure(host, err)
		}
		freedSlots += len(freed)
		was := tableCell(r.State, 32)
		if r.LastError != "" {
			was += ": " + tableCell(r.LastError, 200)
		}
		if len(freed) == 0 {
			fmt.Fprintf(out, "node %s: its slot is gone already (released, or taken over after it expired)\n", r.Node)
			continue
		}
		fmt.Fprintf(out, "node %s: freed %s (was %s)\n", r.Node, strings.Join(freed, ", "), was)
		if r.NoNode {
			fmt.Fprintf(errOut, "hnsplan: node %s: no Node object, so no %s Event was recorded\n", r.Node, reasonRolloutResumed)
			continue
		}
		msg := fmt.Sprintf("hnsplan rollout resume freed rollout slot %s (state %s); the rollout goes on without this node. Fix it, then run hnsplan-agent replace --retry on it",
			strings.Join(freed, ", "), was)
		if err := ev.Event(r, corev1.EventTypeNormal, reasonRolloutResumed, msg); err != nil {
			// The slot is freed either way; the Event only records it.
			fmt.Fprintf(errOut, "hnsplan: node %s: the slot is freed, but the %s Event could not be recorded: %v\n", r.Node, reasonRolloutResumed, err)
		}
	}
	_, err = fmt.Fprintf(out, "freed %s of %s in %s\n", plural(freedSlots, "rollout slot"), plural(len(todo), "node"), namespace)
	return err
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
func (e nodeEvents) Event(r nodeRollout, eventtype, reason, message string) error {
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
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	_, err := e.cs.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{})
	return err
}
