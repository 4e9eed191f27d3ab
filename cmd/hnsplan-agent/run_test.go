package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// freeAddr is a loopback address nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// lockedBuffer is a bytes.Buffer the agent writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// writeAtomic publishes a plan as compile does: a rename into place.
func writeAtomic(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// waitStatus polls /status until ok, or fails after 20 s.
func waitStatus(t *testing.T, addr string, what string, ok func(agentStatus) bool) agentStatus {
	t.Helper()
	var st agentStatus
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if st, err = getStatus(addr); err == nil && ok(st) {
			return st
		}
	}
	t.Errorf("waiting for %s: last status %+v, %v", what, st, err)
	return st
}

// TestRunUntilConverged: the service applies a plan file and exits.
func TestRunUntilConverged(t *testing.T) {
	dir := t.TempDir()
	path := writePlan(t, dir)
	var out bytes.Buffer
	var errOut lockedBuffer
	f := &runFlags{node: "win-1", planFile: path, planSource: "file", hns: "mem", listen: freeAddr(t),
		stateDir: filepath.Join(dir, "state"), resync: time.Minute, untilConverged: true}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := runAgent(ctx, f, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	for _, want := range []string{"node win-1: HNS matches plan sha256:", "network Calico Overlay", "route 192.168.0.64/26 VSID 4096", "endpoint Calico_ep 192.168.0.2/26"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestRunKeepsLastGoodPlan: while running, a bad plan is refused and the
// last good one stays applied; a good one is applied; a VNI change
// without a cluster to drain waits, blocked, and changes nothing.
func TestRunKeepsLastGoodPlan(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "win-1.json")
	p := samplePlan()
	// A pod, which --simulate-cni networks: a replace must drain it.
	p.Endpoints = []plan.Endpoint{{Pod: "web/a", IpConfigurations: []plan.IpConfig{{IpAddress: netip.MustParseAddr("192.168.0.5"), PrefixLength: 26}}}}
	b := encodeInto(t, dir, p)
	writeAtomic(t, path, b)
	addr := freeAddr(t)
	var out, errOut lockedBuffer
	f := &runFlags{node: "win-1", planFile: path, planSource: "file", hns: "mem", listen: addr,
		stateDir: filepath.Join(dir, "state"), resync: time.Minute, simulateCNI: true, drainTimeout: 50 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runAgent(ctx, f, &out, &errOut) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	first := waitStatus(t, addr, "the first plan", func(s agentStatus) bool { return s.State == "converged" && s.Applied != "" })

	writeAtomic(t, path, []byte(`{"kind": "NodePlan", "node": "win-1", "formatVersion": "2", "digest": "sha256:00"}`))
	st := waitStatus(t, addr, "the rejection", func(s agentStatus) bool { return s.Reject != "" })
	if st.Applied != first.Applied || st.Plan != first.Plan || !strings.Contains(st.Reject, "digest") {
		t.Errorf("after a bad plan: %+v; want %s still applied and the digest named", st, first.Applied)
	}

	moveRoute(p)
	b = encodeInto(t, filepath.Dir(path), p)
	writeAtomic(t, path, b)
	second := waitStatus(t, addr, "the second plan", func(s agentStatus) bool { return s.Applied == p.Digest })
	t.Log(errOut.String())
	if second.State != "converged" || second.Reject != "" {
		t.Errorf("second plan: %+v", second)
	}

	setVNI(p, 5000)
	b = encodeInto(t, dir, p)
	writeAtomic(t, path, b)
	st = waitStatus(t, addr, "the blocked replace", func(s agentStatus) bool { return s.Plan == p.Digest && s.State == "blocked" })
	if st.Applied != second.Applied {
		t.Errorf("a blocked replace moved the applied digest: %+v", st)
	}
}

// The node the agent acts for agrees with the node its token is bound to,
// the only one the admission policies let it patch and drain.
func TestAgentNode(t *testing.T) {
	review := func(extra map[string]authenticationv1.ExtraValue, err error) kubernetes.Interface {
		cs := fake.NewClientset()
		cs.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{
				Username: "system:serviceaccount:hnsplan-system:hnsplan-agent", Extra: extra,
			}}}, err
		})
		return cs
	}
	bound := func(nodes ...string) map[string]authenticationv1.ExtraValue {
		return map[string]authenticationv1.ExtraValue{kube.ExtraNodeName: nodes}
	}
	for _, c := range []struct {
		name           string
		cs             kubernetes.Interface
		flag, fallback string
		want, warn     string
		wantErr        string
	}{
		{name: "bound, no flag: the token's node", cs: review(bound("win-1"), nil), fallback: "host", want: "win-1"},
		{name: "bound, same flag", cs: review(bound("win-1"), nil), flag: "win-1", fallback: "win-1", want: "win-1"},
		{name: "bound, other flag", cs: review(bound("win-1"), nil), flag: "win-2", fallback: "win-2",
			wantErr: "--node win-2, but the agent's token (system:serviceaccount:hnsplan-system:hnsplan-agent) is bound to node win-1"},
		{name: "bound to no node", cs: review(nil, nil), flag: "win-2", fallback: "win-2", want: "win-2", warn: "bound to no node"},
		{name: "two node names count as none", cs: review(bound("win-1", "win-2"), nil), fallback: "host", want: "host", warn: "bound to no node"},
		{name: "the server cannot say", cs: review(nil, errors.New("connection refused")), fallback: "host", want: "host", warn: "connection refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			got, err := agentNode(t.Context(), c.cs, c.flag, c.fallback, slog.New(slog.NewTextHandler(&logs, nil)))
			if c.wantErr != "" {
				var ee *exitError
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !errors.As(err, &ee) || ee.code != exitUsage {
					t.Fatalf("agentNode: %v, want a usage error containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("agentNode = %q, %v; want %q", got, err, c.want)
			}
			if c.warn == "" && logs.Len() > 0 || !strings.Contains(logs.String(), c.warn) {
				t.Errorf("logged %q, want a warning containing %q", logs.String(), c.warn)
			}
		})
	}
}

// TestRunCleanOrphansNeedsCluster: --clean-orphans without a cluster is
// a usage error: only the synced cluster's pods, never a plan's, tell an
// orphan; and an age below a minute is refused.
func TestRunCleanOrphansNeedsCluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a cluster
	plan := filepath.Join(t.TempDir(), "win-1.json")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--clean-orphans"}, "--clean-orphans needs the cluster"},
		{[]string{"--clean-orphans", "--clean-orphans-age", "5s"}, "--clean-orphans-age 5s: give 1m0s or more"},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"run", "--plan", plan, "--node", "win-1", "--hns", "mem", "--listen", "127.0.0.1:0"}, tc.args...)
		if code := run(args, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, %s; want %d and %q", tc.args, code, errOut.String(), exitUsage, tc.want)
		}
	}
}
