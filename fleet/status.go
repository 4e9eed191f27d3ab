package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/rollout"
)

// Phases of a node in `rollout status`.
const (
	PhaseConverged = "converged"
	PhasePending   = "pending"
	PhaseHalted    = "halted"
	PhaseSuspended = "suspended" // its agent is suspended (control.go)
)

// NodeRollout is one node's row of `rollout status`.
type NodeRollout struct {
	Node      string `json:"node"`
	Published string `json:"publishedDigest"`      // the plan ConfigMap's hnsplan.io/digest; "" without a ConfigMap
	Applied   string `json:"appliedDigest"`        // the Node's hnsplan.io/applied-digest
	State     string `json:"state"`                // the Node's hnsplan.io/state, as it is
	Slot      string `json:"slot"`                 // the slot Lease it holds; "" for none
	LastError string `json:"lastError"`            // the Node's hnsplan.io/last-error
	Phase     string `json:"phase"`                // converged, pending or halted
	NoNode    bool   `json:"nodeMissing,omitzero"` // the plan's Node does not exist
	// Stall is why the node halts the rollout; nil unless Phase is halted.
	Stall *Stall `json:"stall,omitempty"`

	uid   string     // the Node's UID, for resume's Event
	facts stallFacts // what the stall checks read
}

// SlotRollout is one rollout slot Lease.
type SlotRollout struct {
	Name     string    `json:"name"`
	Holder   string    `json:"holder"`
	Acquired time.Time `json:"acquired,omitzero"`
	Renewed  time.Time `json:"renewed,omitzero"`
	Seconds  int       `json:"durationSeconds"`
}

// Status is what `rollout status` shows: the rollout as the agents
// report it.
type Status struct {
	Namespace string        `json:"namespace"`
	Nodes     []NodeRollout `json:"nodes"`
	Slots     []SlotRollout `json:"slots"`
	Summary   struct {
		Converged int `json:"converged"`
		Pending   int `json:"pending"`
		Halted    int `json:"halted"`
		Suspended int `json:"suspended"`
	} `json:"summary"`
}

// Halted says whether a node halts the rollout.
func (s *Status) Halted() bool { return s.Summary.Halted > 0 }

// Done says whether the rollout ended: no node pending, halted or
// suspended (a suspended agent applies nothing, so it has not ended).
func (s *Status) Done() bool {
	return s.Summary.Pending == 0 && s.Summary.Halted == 0 && s.Summary.Suspended == 0
}

// Gather reads the plan ConfigMaps and slot Leases of namespace and the
// Nodes, and joins them per node: every node with a plan ConfigMap, every
// slot holder, and every node cordoned by hnsplan's agent.
func Gather(ctx context.Context, cs kubernetes.Interface, namespace string) (*Status, error) {
	return gather(ctx, cs, namespace, time.Now())
}

func gather(ctx context.Context, cs kubernetes.Interface, namespace string, now time.Time) (*Status, error) {
	cms, err := cs.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelManagedBy + "=hnsplan"})
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
	st := &Status{Namespace: namespace, Nodes: []NodeRollout{}, Slots: []SlotRollout{}}
	rows := map[string]*NodeRollout{}
	row := func(node string) *NodeRollout {
		if r, ok := rows[node]; ok {
			return r
		}
		r := &NodeRollout{Node: node, NoNode: true}
		rows[node] = r
		return r
	}
	for _, cm := range cms.Items {
		node, ok := strings.CutPrefix(cm.Name, PlanPrefix)
		if !ok || node == "" {
			continue
		}
		row(node).Published = cm.Annotations[AnnotationDigest]
	}
	for _, sl := range slots {
		s := SlotRollout{Name: sl.Name, Holder: sl.Holder, Acquired: utc(sl.Acquired), Renewed: utc(sl.Renewed), Seconds: int(sl.Duration / time.Second)}
		st.Slots = append(st.Slots, s)
		if sl.Holder != "" {
			r := row(sl.Holder)
			if r.Slot != "" {
				r.Slot += ","
			}
			r.Slot += sl.Name
			r.facts.slots = append(r.facts.slots, s)
		}
	}
	for _, n := range nodes.Items {
		r, ok := rows[n.Name]
		if !ok && !kube.Stranded(n.Spec.Unschedulable, n.Annotations) {
			continue
		}
		if !ok {
			r = row(n.Name)
		}
		r.NoNode, r.uid = false, string(n.UID)
		r.State, r.Applied, r.LastError = n.Annotations[AnnotationState], n.Annotations[AnnotationApplied], n.Annotations[AnnotationLastError]
		r.facts.windows, r.facts.unschedulable, r.facts.annotations = windowsNode(n.Labels), n.Spec.Unschedulable, n.Annotations
	}
	for _, r := range rows {
		r.facts.now = now
		if r.NoNode {
			r.facts.windows = false
		}
	}
	st.phases(rows)
	return st, nil
}

// phases gives each row its phase, counts them, and lists them by name.
func (st *Status) phases(rows map[string]*NodeRollout) {
	for _, r := range rows {
		r.Stall = st.stallOf(r, r.facts)
		switch {
		case r.State == StateSuspended:
			r.Phase = PhaseSuspended
			st.Summary.Suspended++
		case r.Stall != nil:
			r.Phase = PhaseHalted
			st.Summary.Halted++
		case r.Published != "" && r.Applied == r.Published && r.State == "converged" && r.Slot == "":
			r.Phase = PhaseConverged
			st.Summary.Converged++
		default:
			r.Phase = PhasePending
			st.Summary.Pending++
		}
		st.Nodes = append(st.Nodes, *r)
	}
	slices.SortFunc(st.Nodes, func(a, b NodeRollout) int { return strings.Compare(a.Node, b.Node) })
}

// Write prints st as text (a table, a summary and a line per halted
// node) or as JSON (format "json").
func (st *Status) Write(w io.Writer, format string) error {
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", TableCell(r.Node, 63), TableCell(shortDigest(r.Published), 19), TableCell(shortDigest(r.Applied), 19),
			TableCell(state, 32), TableCell(r.Slot, 63), TableCell(r.LastError, 72))
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
		if r.Stall != nil && r.Stall.Kind == StallHeld {
			fmt.Fprintf(w, "rollout held on %s: %s; %s\n", r.Node, r.Stall.Reason, r.Stall.Fix)
		} else if r.Stall != nil {
			fmt.Fprintf(w, "rollout halted by %s: %s; %s\n", r.Node, r.Stall.Reason, r.Stall.Fix)
		}
	}
	return nil
}

// TableCell makes s one short table cell: whitespace (a tab, a newline) as
// spaces, at most max runes, "-" for nothing.
func TableCell(s string, max int) string {
	if s == "" {
		return "-"
	}
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return s
}

// utc is t in UTC, and the zero time as it is (omitted from JSON).
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// shortDigest is "sha256:" and the first 12 hex digits, as a table shows it.
func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 && strings.HasPrefix(d, "sha256:") {
		return d[:len("sha256:")+12]
	}
	return d
}

// ErrTimeout is Follow's error when --wait's timeout passed before the
// rollout ended.
var ErrTimeout = errors.New("timed out")

// timeoutError says how far the rollout got; it is ErrTimeout.
type timeoutError struct{ msg string }

func (e *timeoutError) Error() string        { return e.msg }
func (e *timeoutError) Is(target error) bool { return target == ErrTimeout }

// FollowOptions are how Follow reads and prints the rollout.
type FollowOptions struct {
	Namespace string
	Format    string // "text" or "json"
	// Watch prints the status again whenever it changes; Wait follows it
	// until it ends (Done or Halted). Neither: once.
	Watch, Wait bool
	Timeout     time.Duration // ends Watch or Wait; 0 for never
	Interval    time.Duration // how often Watch and Wait read the cluster
	Host        string        // the API server, for messages
	// Out gets the status, ErrOut a passing error of a later read.
	Out, ErrOut io.Writer
}

// Follow prints the rollout's status once, or follows it (opts.Watch,
// opts.Wait) until it ends, ctx ends or opts.Timeout passes. It returns
// the last status read; its error wraps ErrTimeout when Wait timed out
// while the rollout was still pending. A read that fails after the first
// is said once on ErrOut and tried again.
func Follow(ctx context.Context, cs kubernetes.Interface, opts FollowOptions) (*Status, error) {
	st, err := Gather(ctx, cs, opts.Namespace)
	if err != nil {
		return nil, APIError(opts.Host, err)
	}
	f := &follower{opts: opts}
	if err := f.show(st); err != nil {
		return st, err
	}
	if !opts.Watch && !opts.Wait {
		return st, nil
	}
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	tick := time.NewTicker(opts.Interval)
	defer tick.Stop()
	var lastErr string
	for !(opts.Wait && (st.Done() || st.Halted())) {
		select {
		case <-ctx.Done():
			if opts.Wait && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return st, &timeoutError{fmt.Sprintf("rollout status --wait: the rollout is still pending (%d of %s) after %v",
					st.Summary.Pending, plural(len(st.Nodes), "node"), opts.Timeout)}
			}
			return st, nil
		case <-tick.C:
		}
		next, err := Gather(ctx, cs, opts.Namespace)
		if err != nil {
			if ctx.Err() != nil {
				continue // ended while reading: the select says how
			}
			// A watch outlives a passing error; say it once.
			if msg := err.Error(); msg != lastErr {
				fmt.Fprintf(opts.ErrOut, "hnsplan: rollout status: %v (API server %s); trying again every %v\n", err, opts.Host, opts.Interval)
				lastErr = msg
			}
			continue
		}
		lastErr, st = "", next
		if err := f.show(st); err != nil {
			return st, err
		}
	}
	return st, nil
}

// follower prints each status that differs from the last printed.
type follower struct {
	opts FollowOptions
	last []byte
}

func (f *follower) show(st *Status) error {
	var buf bytes.Buffer
	if err := st.Write(&buf, f.opts.Format); err != nil {
		return err
	}
	if bytes.Equal(buf.Bytes(), f.last) {
		return nil
	}
	if f.last != nil && f.opts.Format != "json" {
		fmt.Fprintln(f.opts.Out)
	}
	f.last = buf.Bytes()
	_, err := f.opts.Out.Write(f.last)
	return err
}
