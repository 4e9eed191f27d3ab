package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hnsplan/hnsplan/applier/rollout"
)

// The Node annotations the agent writes (applier/kube: AnnotationState,
// AnnotationDigest, AnnotationLastError), repeated as the ConfigMap names
// are, so that the compiler CLI does not link the agent's packages.
const (
	annotationState     = "hnsplan.io/state"
	annotationApplied   = "hnsplan.io/applied-digest"
	annotationLastError = "hnsplan.io/last-error"
)

// Exit codes of `rollout status` beyond the common ones (docs/operations.md,
// "Rollout status").
const (
	exitHalted  = 4 // a rollout is halted: a slot holder is blocked or failed
	exitTimeout = 5 // --wait: the --timeout passed before the rollout ended
)

// Phases of a node in `rollout status`.
const (
	phaseConverged = "converged"
	phasePending   = "pending"
	phaseHalted    = "halted"
	phaseSuspended = "suspended" // its agent is suspended (rollout_control.go)
)

// nodeRollout is one node's row of `rollout status`.
type nodeRollout struct {
	Node      string `json:"node"`
	Published string `json:"publishedDigest"`      // the plan ConfigMap's hnsplan.io/digest; "" without a ConfigMap
	Applied   string `json:"appliedDigest"`        // the Node's hnsplan.io/applied-digest
	State     string `json:"state"`                // the Node's hnsplan.io/state, as it is
	Slot      string `json:"slot"`                 // the slot Lease it holds; "" for none
	LastError string `json:"lastError"`            // the Node's hnsplan.io/last-error
	Phase     string `json:"phase"`                // converged, pending or halted
	NoNode    bool   `json:"nodeMissing,omitzero"` // the plan's Node does not exist

	uid string // the Node's UID, for resume's Event
}

type slotRollout struct {
	Name     string    `json:"name"`
	Holder   string    `json:"holder"`
	Acquired time.Time `json:"acquired,omitzero"`
	Renewed  time.Time `json:"renewed,omitzero"`
	Seconds  int       `json:"durationSeconds"`
}

// rolloutStatus is what `rollout status` prints.
type rolloutStatus struct {
	Namespace string        `json:"namespace"`
	Nodes     []nodeRollout `json:"nodes"`
	Slots     []slotRollout `json:"slots"`
	Summary   struct {
		Converged int `json:"converged"`
		Pending   int `json:"pending"`
		Halted    int `json:"halted"`
		Suspended int `json:"suspended"`
	} `json:"summary"`
}

func (s *rolloutStatus) halted() bool { return s.Summary.Halted > 0 }
func (s *rolloutStatus) done() bool {
	return s.Summary.Pending == 0 && s.Summary.Halted == 0 && s.Summary.Suspended == 0
}

// haltsRollout is the definition of a halt (docs/operations.md, "Rollout
// status"): a node halts the rollout when it holds a slot and its state is
// blocked or error, or its last error is set and its state is not
// replacing (a replace under way retries its own errors).
func haltsRollout(slot, state, lastError string) bool {
	if state == stateRolloutHeld {
		return true // a replace held for its Windows build: no slot, but no progress without an operator
	}
	if slot == "" {
		return false
	}
	return state == "blocked" || state == "error" || (lastError != "" && state != "replacing")
}

// gatherRollout reads the plan ConfigMaps and slot Leases of namespace and
// the Nodes, and joins them per node: every node with a plan ConfigMap,
// and every slot holder.
func gatherRollout(ctx context.Context, cs kubernetes.Interface, namespace string) (*rolloutStatus, error) {
	cms, err := cs.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{LabelSelector: labelManagedBy + "=hnsplan"})
	if err != nil {
		return nil, fmt.Errorf("list the plan ConfigMaps in %s: %w", namespace, err)
	}
	slots, err := rollout.Status(ctx, cs.CoordinationV1(), namespace)
	if err != nil {
		return nil, err
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list the nodes: %w", err)
	}
	st := &rolloutStatus{Namespace: namespace, Nodes: []nodeRollout{}, Slots: []slotRollout{}}
	rows := map[string]*nodeRollout{}
	row := func(node string) *nodeRollout {
		if r, ok := rows[node]; ok {
			return r
		}
		r := &nodeRollout{Node: node, NoNode: true}
		rows[node] = r
		return r
	}
	for _, cm := range cms.Items {
		node, ok := strings.CutPrefix(cm.Name, publishPrefix)
		if !ok || node == "" {
			continue
		}
		row(node).Published = cm.Annotations[annotationDigest]
	}
	for _, sl := range slots {
		st.Slots = append(st.Slots, slotRollout{Name: sl.Name, Holder: sl.Holder, Acquired: sl.Acquired.UTC(), Renewed: sl.Renewed.UTC(), Seconds: int(sl.Duration / time.Second)})
		if sl.Holder != "" {
			r := row(sl.Holder)
			if r.Slot != "" {
				r.Slot += ","
			}
			r.Slot += sl.Name
		}
	}
	for _, n := range nodes.Items {
		r, ok := rows[n.Name]
		if !ok {
			continue
		}
		r.NoNode, r.uid = false, string(n.UID)
		r.State, r.Applied, r.LastError = n.Annotations[annotationState], n.Annotations[annotationApplied], n.Annotations[annotationLastError]
	}
	for _, r := range rows {
		switch {
		case r.State == stateSuspended:
			r.Phase = phaseSuspended
			st.Summary.Suspended++
		case haltsRollout(r.Slot, r.State, r.LastError):
			r.Phase = phaseHalted
			st.Summary.Halted++
		case r.Published != "" && r.Applied == r.Published && r.State == "converged" && r.Slot == "":
			r.Phase = phaseConverged
			st.Summary.Converged++
		default:
			r.Phase = phasePending
			st.Summary.Pending++
		}
		st.Nodes = append(st.Nodes, *r)
	}
	slices.SortFunc(st.Nodes, func(a, b nodeRollout) int { return strings.Compare(a.Node, b.Node) })
	return st, nil
}

// writeRollout prints st as text or JSON.
func writeRollout(w io.Writer, format string, st *rolloutStatus) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(st)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPUBLISHED\tAPPLIED\tSTATE\tSLOT\tLAST ERROR")
	for _, r := range st.Nodes {
		state := r.State
		if r.NoNode {
			state = "(no Node)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", tableCell(r.Node, 63), tableCell(shortDigest(r.Published), 19), tableCell(shortDigest(r.Applied), 19),
			tableCell(state, 32), tableCell(r.Slot, 63), tableCell(r.LastError, 72))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	held := 0
	for _, s := range st.Slots {
		if s.Holder != "" {
			held++
		}
	}
	fmt.Fprintf(w, "%s: %d converged, %d pending, %d halted%s; %s held\n", plural(len(st.Nodes), "node"),
		st.Summary.Converged, st.Summary.Pending, st.Summary.Halted, suspendedCount(st), plural(held, "rollout slot"))
	writeSuspended(w, st)
	for _, r := range st.Nodes {
		if r.Phase == phaseHalted && r.State == stateRolloutHeld {
			fmt.Fprintf(w, "rollout held on %s: %s\n", r.Node, tableCell(r.LastError, 400))
		} else if r.Phase == phaseHalted {
			fmt.Fprintf(w, "rollout halted by %s: it holds %s in state %s; fix the node and run hnsplan-agent replace --retry on it, or hnsplan rollout resume %s to go on without it\n",
				r.Node, r.Slot, tableCell(r.State, 32), r.Node)
		}
	}
	return nil
}

// tableCell makes s one short table cell: whitespace (a tab, a newline) as
// spaces, at most max runes, "-" for nothing.
func tableCell(s string, max int) string {
	if s == "" {
		return "-"
	}
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return s
}

// shortDigest is "sha256:" and the first 12 hex digits, as a table shows it.
func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 && strings.HasPrefix(d, "sha256:") {
		return d[:len("sha256:")+12]
	}
	return d
}

type rolloutFlags struct {
	kubeconfig string
	context    string
	namespace  string
	watch      bool
	wait       bool
	timeout    time.Duration
	interval   time.Duration
	force      bool
}

func (f *rolloutFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	cmd.Flags().StringVar(&f.context, "context", "", "kubeconfig context to use (default: the current one)")
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", publishNamespace, "the namespace of the plan ConfigMaps and the slot Leases")
}

// client checks the flags and connects.
func (f *rolloutFlags) client() (kubernetes.Interface, string, error) {
	if f.kubeconfig != "" {
		if _, err := os.Stat(f.kubeconfig); err != nil {
			return nil, "", &exitError{code: exitUsage, err: fmt.Errorf("--kubeconfig: %v", err)}
		}
	}
	if f.namespace == "" {
		return nil, "", &exitError{code: exitUsage, err: errors.New("--namespace: empty; the agents' namespace is " + publishNamespace)}
	}
	cs, host, err := kubeClient(f.kubeconfig, f.context)
	if err != nil {
		return nil, "", &exitError{code: exitInvalid, err: err}
	}
	return cs, host, nil
}

// apiFailure wraps err, naming the server when it could not be reached.
func apiFailure(host string, err error) error {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return &exitError{code: exitInvalid, err: fmt.Errorf("cannot reach the API server %s: %v", host, err)}
	}
	return &exitError{code: exitInvalid, err: fmt.Errorf("%v (API server %s)", err, host)}
}

func newRolloutCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Follow and steer the rollout of published plans across the Windows nodes",
		Long: `rollout reads what the agents report: the plan ConfigMaps hnsplan publish wrote, the
Nodes' hnsplan.io/ annotations and the rollout slot Leases (hnsplan-rollout-<i>) in
` + publishNamespace + `. status shows them; resume frees the slots of halted nodes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return &exitError{code: exitUsage, err: errors.New("rollout needs a subcommand: status, resume, suspend, unsuspend or reconcile (hnsplan rollout --help)")}
		},
	}
	cmd.AddCommand(newRolloutStatusCmd(g), newRolloutResumeCmd())
	cmd.AddCommand(newRolloutControlCmds()...)
	return cmd
}

func newRolloutStatusCmd(g *globalFlags) *cobra.Command {
	f := &rolloutFlags{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show each Windows node's published and applied plan, state and rollout slot; exit 4 while halted",
		Long: `status prints, per Windows node (each node with a plan ConfigMap, and each slot holder):
the published digest (the ConfigMap's hnsplan.io/digest), the applied digest (the Node's
hnsplan.io/applied-digest), the state (hnsplan.io/state, as the agent wrote it), the rollout
slot it holds and its last error (hnsplan.io/last-error); then a summary line.

A node is converged when its applied digest is the published one, its state is converged
and it holds no slot; halted when it holds a slot and its state is blocked or error, or
its last error is set and its state is not replacing; pending otherwise. A rollout is
halted while any node is.

--watch prints the status again each time it changes (polling every --interval) until
interrupted or --timeout passes. --wait follows it until it ends: every node converged
(exit 0), or halted (exit 4); after --timeout, exit 5.

Exit codes: 0 no rollout halted (converged or progressing), 1 the cluster could not be
read, 3 usage error, 4 halted, 5 --wait timed out while still pending.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.checkOutput(cmd, "text", "json"); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if f.interval < 100*time.Millisecond || f.interval > 5*time.Minute {
				return &exitError{code: exitUsage, err: fmt.Errorf("--interval %v: give a duration from 100ms to 5m", f.interval)}
			}
			if f.timeout < 0 {
				return &exitError{code: exitUsage, err: fmt.Errorf("--timeout %v: give a positive duration, or 0 for none", f.timeout)}
			}
			if f.timeout > 0 && !f.watch && !f.wait {
				return &exitError{code: exitUsage, err: errors.New("--timeout bounds --watch or --wait; give one of them")}
			}
			cs, host, err := f.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return rolloutStatusCmd(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), cs, host, g.output, f)
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVarP(&f.watch, "watch", "w", false, "print the status again whenever it changes, until interrupted or --timeout")
	cmd.Flags().BoolVar(&f.wait, "wait", false, "follow the rollout until every node is converged (exit 0) or it halts (exit 4)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 0, "end --watch or --wait after this long (0: never); --wait then exits 5")
	cmd.Flags().DurationVar(&f.interval, "interval", 2*time.Second, "how often --watch and --wait read the cluster")
	g.outputFlag(cmd, "text", "json")
	return cmd
}

// rolloutStatusCmd prints the status once, or follows it.
func rolloutStatusCmd(ctx context.Context, out, errOut io.Writer, cs kubernetes.Interface, host, format string, f *rolloutFlags) error {
	st, err := gatherRollout(ctx, cs, f.namespace)
	if err != nil {
		return apiFailure(host, err)
	}
	var last []byte
	show := func(st *rolloutStatus) error {
		var buf bytes.Buffer
		if err := writeRollout(&buf, format, st); err != nil {
			return err
		}
		if bytes.Equal(buf.Bytes(), last) {
			return nil
		}
		if last != nil && format == "text" {
			fmt.Fprintln(out)
		}
		last = buf.Bytes()
		_, err := out.Write(last)
		return err
	}
	if err := show(st); err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	if f.watch || f.wait {
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		if f.timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, f.timeout)
			defer cancel()
		}
		tick := time.NewTicker(f.interval)
		defer tick.Stop()
		var lastErr string
		for !(f.wait && (st.done() || st.halted())) {
			select {
			case <-ctx.Done():
				if f.wait && errors.Is(ctx.Err(), context.DeadlineExceeded) {
					return &exitError{code: exitTimeout, err: fmt.Errorf("rollout status --wait: the rollout is still pending (%d of %s) after %v",
						st.Summary.Pending, plural(len(st.Nodes), "node"), f.timeout)}
				}
				return statusExit(st)
			case <-tick.C:
			}
			next, err := gatherRollout(ctx, cs, f.namespace)
			if err != nil {
				if ctx.Err() != nil {
					continue // ended while reading: the select says how
				}
				// A watch outlives a passing error; say it once.
				if msg := err.Error(); msg != lastErr {
					fmt.Fprintf(errOut, "hnsplan: rollout status: %v (API server %s); trying again every %v\n", err, host, f.interval)
					lastErr = msg
				}
				continue
			}
			lastErr, st = "", next
			if err := show(st); err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
		}
	}
	return statusExit(st)
}

// statusExit is the exit of a status: exitHalted while halted.
func statusExit(st *rolloutStatus) error {
	if st.halted() {
		return &exitError{code: exitHalted}
	}
	return nil
}
