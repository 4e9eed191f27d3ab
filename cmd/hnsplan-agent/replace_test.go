package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/applier/statedir"
)

// TestReplaceRetryAbort: replace --retry and --abort leave a request for
// the running agent in its state directory, naming the plan it applies,
// only when there is something to retry or abort; --abort refuses once the
// network is deleted, saying why.
func TestReplaceRetryAbort(t *testing.T) {
	const digest = "sha256:0123"
	for _, tc := range []struct {
		name    string
		args    []string
		state   kube.NodeState
		journal replace.Step // "" for none
		code    int
		file    string // the request written
		out     string // in stdout or stderr
	}{
		{"retry blocked", []string{"--retry"}, kube.StateBlocked, replace.StepWaitDrained, exitOK, statedir.RetryFile, "retry the replace"},
		{"retry halted", []string{"--retry"}, kube.StateRolloutHalted, replace.StepWaitDrained, exitOK, statedir.RetryFile, "rollout-halted"},
		{"retry aborted", []string{"--retry"}, kube.StateReplacePending, "", exitOK, statedir.RetryFile, "replace-pending"},
		{"retry converged", []string{"--retry"}, kube.StateConverged, "", exitFailed, "", "no halted replace"},
		{"abort draining", []string{"--abort"}, kube.StateBlocked, replace.StepWaitDrained, exitOK, statedir.AbortFile, "uncordons"},
		{"abort waiting", []string{"--abort"}, kube.StateRolloutWaiting, "", exitOK, statedir.AbortFile, "abort"},
		{"abort deleted", []string{"--abort"}, kube.StateError, replace.StepCreateNetwork, exitFailed, "", "has no network"},
		{"abort nothing", []string{"--abort"}, kube.StateConverged, "", exitFailed, "", "nothing to abort"},
		{"two at once", []string{"--abort", "--retry"}, kube.StateBlocked, "", exitUsage, "", "one of --confirm"},
		{"none", nil, kube.StateBlocked, "", exitUsage, "", "one of --confirm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				json.NewEncoder(w).Encode(applier.AgentStatus{Node: "win-1", Plan: digest, State: tc.state})
			}))
			defer srv.Close()
			dir := t.TempDir()
			if tc.journal != "" {
				b, _ := json.Marshal(replace.Journal{Version: replace.JournalVersion, PlanDigest: digest, Reason: "vni-changed", Step: tc.journal,
					Want: hns.Network{Name: "Calico"}})
				if err := os.WriteFile(filepath.Join(dir, statedir.JournalFile), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var out, errOut bytes.Buffer
			args := append([]string{"replace", "--addr", strings.TrimPrefix(srv.URL, "http://"), "--state-dir", dir}, tc.args...)
			code := run(args, &out, &errOut)
			if code != tc.code || !strings.Contains(out.String()+errOut.String(), tc.out) {
				t.Fatalf("exit %d, want %d; output %q %q, want %q in it", code, tc.code, out.String(), errOut.String(), tc.out)
			}
			for _, f := range []string{statedir.RetryFile, statedir.AbortFile} {
				b, err := os.ReadFile(filepath.Join(dir, f))
				if f != tc.file {
					if err == nil {
						t.Errorf("%s written: %q", f, b)
					}
					continue
				}
				if err != nil || strings.TrimSpace(string(b)) != digest {
					t.Errorf("%s: %q, %v; want the plan's digest", f, b, err)
				}
			}
		})
	}
}
