package control

import (
	"strings"
	"testing"
	"time"
)

func TestFor(t *testing.T) {
	t1 := time.Date(2026, 11, 28, 21, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Minute)
	v := func(at time.Time, r string) string { return Value{At: at, Reason: r}.Format() }
	for _, tc := range []struct {
		name string
		data map[string]string
		want State
	}{
		{"nothing", nil, State{}},
		{"another node", map[string]string{"suspend.win-2": v(t1, "x"), "reconcile.win-2": v(t2, "")}, State{}},
		{"all", map[string]string{"suspend": v(t1, "patching")}, State{Suspended: true, Key: "suspend", Reason: "patching", Since: t1}},
		{"own key first", map[string]string{"suspend": v(t1, "all"), "suspend.win-1": v(t2, "mine")}, State{Suspended: true, Key: "suspend.win-1", Reason: "mine", Since: t2}},
		{"by hand", map[string]string{"suspend.win-1": "true"}, State{Suspended: true, Key: "suspend.win-1", Reason: "(unreadable value) true"}},
		{"newest reconcile", map[string]string{"reconcile": v(t2, ""), "reconcile.win-1": v(t1, "")}, State{Reconcile: t2, ReconcileKey: "reconcile"}},
		{"unreadable reconcile", map[string]string{"reconcile.win-1": "now"}, State{}},
	} {
		if got := For(tc.data, "win-1"); got != tc.want {
			t.Errorf("%s: For = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestReason(t *testing.T) {
	if got := Reason("a\nb\t\x00c  d\u200b"); got != "a b c d" {
		t.Errorf("Reason = %q", got)
	}
	long := Reason(strings.Repeat("é", 300))
	if len(long) > MaxReason || !strings.HasSuffix(long, "…") || !strings.HasPrefix(long, "éé") {
		t.Errorf("Reason of 600 bytes: %d bytes %q", len(long), long[len(long)-8:])
	}
}

func TestCheckNode(t *testing.T) {
	for node, ok := range map[string]bool{"win-1": true, "akswin000000.example.com": true, "": false, "a/b": false, strings.Repeat("a", 250): false} {
		if err := CheckNode(node); (err == nil) != ok {
			t.Errorf("CheckNode(%q) = %v, want ok %v", node, err, ok)
		}
	}
}

// TestKeys pins the keys: docs/operations.md and the CLI name them.
func TestKeys(t *testing.T) {
	if SuspendKey("n") != "suspend.n" || ReconcileKey("n") != "reconcile.n" || Name != "hnsplan-control" || Namespace != "hnsplan-system" {
		t.Error("the control ConfigMap's names changed: they are a contract with operators")
	}
}
