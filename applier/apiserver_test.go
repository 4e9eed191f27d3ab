package applier_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
)

// lockedBuffer is a log the agent writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// TestAgentAPIServerOutage: an API server that stops answering is said at
// once — a warning in the log, /status apiServerUnreachableSince and
// hnsplan_apiserver_reachable 0 — once, not at every probe; when it
// answers again, an APIServerUnreachable Event says how long it lasted.
func TestAgentAPIServerOutage(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	var log lockedBuffer
	k := &fakeKube{synced: true, node: kube.Node{Name: "win-1"}, changes: make(chan struct{})}
	cfg := agentConfig(t, hnsmem.New(), chanSource(nil))
	cfg.Kube, cfg.APIProbe = k, 10*time.Millisecond
	cfg.Reachable = func(context.Context) bool { return up.Load() }
	cfg.Log = slog.New(slog.NewTextHandler(&log, nil))
	a, err := applier.NewAgent(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	metric := func() string {
		rec := httptest.NewRecorder()
		a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		for line := range strings.Lines(rec.Body.String()) {
			if strings.HasPrefix(line, "hnsplan_apiserver_reachable ") {
				return strings.TrimSpace(line)
			}
		}
		return "(none)"
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s; log:\n%s", what, log.String())
			}
		}
	}
	waitFor("hnsplan_apiserver_reachable 1 before the outage", func() bool { return metric() == "hnsplan_apiserver_reachable 1" })

	before := time.Now()
	up.Store(false)
	waitFor("no apiServerUnreachableSince during the outage", func() bool { return a.Status().APIServerUnreachableSince != nil })
	if got := metric(); got != "hnsplan_apiserver_reachable 0" {
		t.Errorf("metric during the outage: %s", got)
	}
	if since := *a.Status().APIServerUnreachableSince; since.Before(before.Add(-time.Second)) {
		t.Errorf("apiServerUnreachableSince %v, before the outage began (%v)", since, before)
	}
	time.Sleep(100 * time.Millisecond) // ten probes
	if n := strings.Count(log.String(), "the API server does not answer"); n != 1 {
		t.Errorf("the outage's start said %d times, want once:\n%s", n, log.String())
	}

	up.Store(true)
	waitFor("the outage's end not reported", func() bool { return a.Status().APIServerUnreachableSince == nil })
	if got := metric(); got != "hnsplan_apiserver_reachable 1" {
		t.Errorf("metric after the outage: %s", got)
	}
	k.mu.Lock()
	events := strings.Join(k.events, "\n")
	k.mu.Unlock()
	if strings.Count(events, "Warning "+applier.ReasonAPIServerUnreachable+": the API server did not answer this node's agent for ") != 1 {
		t.Errorf("events:\n%s", events)
	}
}
