// Package control is the operator's hand on the running agents: the
// ConfigMap hnsplan-system/hnsplan-control, which every agent watches and
// `hnsplan rollout suspend|unsuspend|reconcile` writes.
//
// Its keys:
//
//	suspend              every agent is suspended
//	suspend.<node>       the agent of <node> is suspended
//	reconcile            every agent runs a pass at once
//	reconcile.<node>     the agent of <node> runs a pass at once
//
// Each value is "<time> <reason>": when it was written (RFC 3339, UTC) and
// why, one printable line (Value). A suspended agent writes nothing to HNS
// and takes no step of a replace until its keys are gone; a reconcile
// request is a pass now, taken once per new time and ignored when it is
// older than the agent (a request made before it started is done).
//
// An agent that cannot read the ConfigMap (it does not exist, RBAC
// forbids it, the API server is away) is not suspended by that: a
// suspension is an operator's act the agent must see, and an agent that
// stopped on every failed read would stop mending HNS on every API
// outage, when nodes need it most. The plan and the rollout slots, not
// this ConfigMap, are what keep an agent safe.
package control

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Where the ConfigMap is.
const (
	Namespace = "hnsplan-system"
	Name      = "hnsplan-control"
)

// Its keys: KeySuspend and KeyReconcile for all agents, with "."+node for
// one (SuspendKey, ReconcileKey).
const (
	KeySuspend   = "suspend"
	KeyReconcile = "reconcile"
)

// MaxReason bounds a reason, in bytes: it goes into an annotation, an
// Event and /status.
const MaxReason = 256

// maxKey is a ConfigMap key's longest (Kubernetes: 253 characters).
const maxKey = 253

// SuspendKey is the key that suspends node's agent.
func SuspendKey(node string) string { return KeySuspend + "." + node }

// ReconcileKey is the key that asks node's agent for a pass.
func ReconcileKey(node string) string { return KeyReconcile + "." + node }

// CheckNode says why node cannot be given its own keys: a ConfigMap key
// is at most 253 characters of [-._a-zA-Z0-9].
func CheckNode(node string) error {
	if node == "" {
		return fmt.Errorf("empty node name")
	}
	if len(SuspendKey(node)) > maxKey || len(ReconcileKey(node)) > maxKey {
		return fmt.Errorf("node %q: its key %q would be longer than a ConfigMap key may be (253)", node, SuspendKey(node))
	}
	for _, r := range node {
		if !(r == '-' || r == '.' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return fmt.Errorf("node %q: %q cannot be in a ConfigMap key; give a Kubernetes node name", node, r)
		}
	}
	return nil
}

// Value is a key's value: when and why.
type Value struct {
	At     time.Time
	Reason string
}

// Format writes v as a key's value.
func (v Value) Format() string {
	s := v.At.UTC().Format(time.RFC3339)
	if r := Reason(v.Reason); r != "" {
		s += " " + r
	}
	return s
}

// Parse reads a key's value. A value whose time cannot be read keeps the
// whole text as its reason and a zero time.
func Parse(s string) (Value, error) {
	at, rest, _ := strings.Cut(strings.TrimSpace(s), " ")
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return Value{Reason: Reason(s)}, fmt.Errorf("value %q does not start with an RFC 3339 time", Reason(s))
	}
	return Value{At: t, Reason: Reason(rest)}, nil
}

// Reason makes s a reason to show: one line of printable characters
// (others become a space, runs of spaces one), at most MaxReason bytes,
// cut at a character's boundary with "…".
func Reason(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) || unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	out := b.String()
	if len(out) <= MaxReason {
		return out
	}
	cut := MaxReason - len("…")
	for cut > 0 && !utf8.RuneStart(out[cut]) {
		cut--
	}
	return out[:cut] + "…"
}

// State is what the ConfigMap says to one node's agent.
type State struct {
	// Suspended: a suspend key is set; Key names it (the node's own if
	// both are), Reason and Since are its value's.
	Suspended bool
	Key       string
	Reason    string
	Since     time.Time
	// Reconcile is the newest time of the reconcile keys that apply
	// (zero: none, or none readable); ReconcileKey names it.
	Reconcile    time.Time
	ReconcileKey string
}

// For is what data (the ConfigMap's, nil when there is none) says to
// node's agent.
func For(data map[string]string, node string) State {
	var st State
	for _, k := range []string{SuspendKey(node), KeySuspend} {
		if raw, ok := data[k]; ok {
			v, err := Parse(raw)
			st = State{Suspended: true, Key: k, Reason: v.Reason, Since: v.At}
			if err != nil {
				// Set by hand, not by hnsplan: suspended all the same,
				// the key is there.
				st.Reason = "(unreadable value) " + v.Reason
			}
			break
		}
	}
	for _, k := range []string{ReconcileKey(node), KeyReconcile} {
		if raw, ok := data[k]; ok {
			if v, err := Parse(raw); err == nil && v.At.After(st.Reconcile) {
				st.Reconcile, st.ReconcileKey = v.At, k
			}
		}
	}
	return st
}

// Message is a suspended State as one line for a node's last error and
// Events; "" when not suspended.
func (s State) Message() string {
	if !s.Suspended {
		return ""
	}
	msg := fmt.Sprintf("suspended by %s/%s key %s", Namespace, Name, s.Key)
	if !s.Since.IsZero() {
		msg += " since " + s.Since.UTC().Format(time.RFC3339)
	}
	if s.Reason != "" {
		msg += ": " + s.Reason
	}
	return msg + "; the agent writes nothing to HNS until hnsplan rollout unsuspend"
}
