package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/applier/statedir"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// TestSecondAgentRefused: while the service runs on a state directory, an
// apply --once or a second service on it exits 1, names the holder, and
// changes nothing (issue 13: two agents on one state directory both ran
// the replace).
func TestSecondAgentRefused(t *testing.T) {
	dir := t.TempDir()
	path := writePlan(t, dir)
	state := filepath.Join(dir, "state")
	addr := freeAddr(t)
	var out, errOut lockedBuffer
	f := &runFlags{node: "win-1", planFile: path, planSource: "file", hns: "mem", listen: addr,
		stateDir: state, resync: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runAgent(ctx, f, &out, &errOut) }()
	waitStatus(t, addr, "the first agent to converge", func(s agentStatus) bool { return s.State == "converged" })

	hnsFile := filepath.Join(dir, "hns.json")
	var stdout, stderr bytes.Buffer
	code := run([]string{"apply", "--once", "--plan", path, "--node", "win-1", "--hns", "mem:" + hnsFile, "--state-dir", state}, &stdout, &stderr)
	host, _ := os.Hostname()
	for _, want := range []string{
		"the state directory is in use by another hnsplan-agent: " + filepath.Join(state, statedir.LockFile),
		fmt.Sprintf("is held by pid %d on host %s, started ", os.Getpid(), host), `running "run"`,
		"stop that agent first", "nothing was changed",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("apply --once beside a running agent: stderr %q lacks %q", stderr.String(), want)
		}
	}
	if code != exitFailed || stdout.Len() != 0 {
		t.Errorf("apply --once beside a running agent: exit %d, stdout %q; want 1 and nothing", code, stdout.String())
	}
	if _, err := os.Stat(hnsFile); err == nil {
		t.Error("the refused apply touched HNS")
	}

	g := *f
	g.listen = freeAddr(t)
	err := runAgent(context.Background(), &g, &out, &errOut)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitFailed || !errors.Is(err, statedir.ErrLocked) {
		t.Errorf("a second service: %v; want exit 1, the state directory in use", err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	// The first agent gone, the directory is free.
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"apply", "--once", "--plan", path, "--node", "win-1", "--hns", "mem:" + hnsFile, "--state-dir", state}, &stdout, &stderr); code != exitOK {
		t.Errorf("apply --once after the agent stopped: exit %d\n%s", code, stderr.String())
	}
}

// TestApplyResumesJournal: a replace killed half way (the network deleted,
// not yet created again) is resumed by apply --once, which says so, instead
// of being ignored (issue 13): the node ends with the new network, its
// routes and host endpoint, and no journal.
func TestApplyResumesJournal(t *testing.T) {
	dir := t.TempDir()
	base := samplePlan()
	head := samplePlan()
	setVNI(head, 5000)
	write := func(name string, p *plan.NodePlan) string {
		b := encodeInto(t, dir, p)
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	basePath, headPath := write("base.json", base), write("head.json", head)
	hnsFile, state := filepath.Join(dir, "hns.json"), filepath.Join(dir, "state")
	args := func(planPath string, more ...string) []string {
		return append([]string{"apply", "--once", "--plan", planPath, "--node", "win-1", "--hns", "mem:" + hnsFile, "--state-dir", state}, more...)
	}
	var stdout, stderr bytes.Buffer
	if code := run(args(basePath), &stdout, &stderr); code != exitOK {
		t.Fatalf("apply base: exit %d\n%s", code, stderr.String())
	}

	// The service starts the replace to head and is killed right after
	// deleting the network.
	h, err := hnsmem.Open(hnsFile)
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := hns.WantFromPlan(head, hns.LiveValues{})
	if err != nil {
		t.Fatal(err)
	}
	errKilled := errors.New("killed")
	_, err = replace.Run(context.Background(), replace.Config{HNS: h, Drainer: applier.NoDrainer{}, HostRoutes: replace.NewMemRoutes(),
		Want: want, PlanDigest: head.Digest, JournalPath: filepath.Join(state, statedir.JournalFile),
		Hook: func(s replace.Step, after bool) error {
			if s == replace.StepDeleteNetwork && after {
				return errKilled
			}
			return nil
		}})
	if !errors.Is(err, errKilled) {
		t.Fatalf("the replace: %v, want it killed", err)
	}

	stdout.Reset()
	if code := run(args(headPath, "--dry-run"), &stdout, &stderr); code != exitOK ||
		!strings.Contains(stdout.String(), "unfinished: the replace of network Calico (vni-changed), journalled at step delete-network in "+filepath.Join(state, statedir.JournalFile)+", which apply without --dry-run resumes") {
		t.Errorf("dry run: exit %d; stdout:\n%s", code, stdout.String())
	}
	stdout.Reset()
	if code := run(args(headPath), &stdout, &stderr); code != exitOK {
		t.Fatalf("apply head: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"resumed now", "replace: resuming the replace of network Calico (vni-changed) at step delete-network", "replace: created network Calico",
		"network Calico Overlay\n  subnet 192.168.0.0/26 gateway 192.168.0.1 VSID 5000", "route 192.168.0.64/26 VSID 5000", "endpoint Calico_ep 192.168.0.2/26"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("apply head: stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	if _, err := os.Stat(filepath.Join(state, statedir.JournalFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the journal is still there after the resumed replace: %v", err)
	}
	stdout.Reset()
	if code := run(args(headPath), &stdout, &stderr); code != exitOK || !strings.Contains(stdout.String(), "HNS matches the plan.") {
		t.Errorf("then: exit %d\n%s", code, stdout.String())
	}
}

// TestApplyRefusesJournalOfAnotherNetwork: an unfinished replace of
// another network than the plan's is not guessed at: apply exits 1 and
// says what to do.
func TestApplyRefusesJournalOfAnotherNetwork(t *testing.T) {
	dir := t.TempDir()
	path := writePlan(t, dir)
	state := filepath.Join(dir, "state")
	if err := statedir.Prepare(state); err != nil {
		t.Fatal(err)
	}
	j := `{"version": 1, "planDigest": "sha256:x", "reason": "vni-changed", "step": "create-network", "attempts": 1,
  "have": {"name": "Other", "type": "Overlay", "subnets": null}, "want": {"name": "Other", "type": "Overlay", "subnets": null},
  "startedAt": "2026-01-01T00:00:00Z", "stepStartedAt": "2026-01-01T00:00:00Z"}`
	if err := os.WriteFile(filepath.Join(state, statedir.JournalFile), []byte(j), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"apply", "--once", "--plan", path, "--node", "win-1", "--hns", "mem", "--state-dir", state}, &stdout, &stderr)
	if code != exitFailed || !strings.Contains(stderr.String(), "is of network Other, the plan's is Calico: an operator must finish or remove it") {
		t.Errorf("exit %d; stderr %q", code, stderr.String())
	}
}

// TestStateDirWritableByOthers: the agent refuses a state directory its
// group or others may write (issue 13), apply and run alike.
func TestStateDirWritableByOthers(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Unix modes; Windows ACLs are statedir's TestJudgeACL")
	}
	dir := t.TempDir()
	path := writePlan(t, dir)
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(state, 0o777); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"apply", "--once", "--plan", path, "--node", "win-1", "--hns", "mem", "--state-dir", state}, &stdout, &stderr)
	if code != exitFailed || !strings.Contains(stderr.String(), "its group or others can write it (mode 0777)") || !strings.Contains(stderr.String(), "chmod go-w "+state) {
		t.Errorf("apply: exit %d; stderr %q", code, stderr.String())
	}
	f := &runFlags{node: "win-1", planFile: path, planSource: "file", hns: "mem", listen: freeAddr(t), stateDir: state, resync: time.Minute}
	if err := runAgent(context.Background(), f, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "mode 0777") {
		t.Errorf("run: %v; want the state directory refused", err)
	}
}

// TestStaleTempFilesRemoved: an agent killed while writing its journal or
// network record leaves the write's temporary file (TestKillResume saw one
// in a third of its kills); nothing reads it, but every crash added
// another. apply --once and run remove them once they hold the directory,
// and leave alone what they do not write under the lock (the operator's
// confirmation) or at all.
func TestStaleTempFilesRemoved(t *testing.T) {
	dir := t.TempDir()
	path := writePlan(t, dir)
	state := filepath.Join(dir, "state")
	stale := []string{"." + statedir.JournalFile + ".tmp123", "." + statedir.NetworkFile + ".tmp9"}
	kept := []string{"." + statedir.ConfirmFile + ".tmp7", "notes.txt", "." + statedir.JournalFile + "x.tmp1"}
	seed := func() {
		t.Helper()
		if err := statedir.Prepare(state); err != nil {
			t.Fatal(err)
		}
		for _, f := range append(slices.Clone(stale), kept...) {
			if err := os.WriteFile(filepath.Join(state, f), []byte(`{"version": 1, "st`), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(who string) {
		t.Helper()
		for _, f := range stale {
			if _, err := os.Stat(filepath.Join(state, f)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: %s is still there (%v)", who, f, err)
			}
		}
		for _, f := range kept {
			if _, err := os.Stat(filepath.Join(state, f)); err != nil {
				t.Errorf("%s removed %s: %v", who, f, err)
			}
		}
	}

	seed()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"apply", "--once", "--plan", path, "--node", "win-1", "--hns", "mem", "--state-dir", state}, &stdout, &stderr); code != exitOK {
		t.Fatalf("apply: exit %d\n%s", code, stderr.String())
	}
	check("apply --once")

	seed()
	f := &runFlags{node: "win-1", planFile: path, planSource: "file", hns: "mem", listen: freeAddr(t), stateDir: state, resync: time.Minute, untilConverged: true}
	if err := runAgent(context.Background(), f, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	check("run")
}
