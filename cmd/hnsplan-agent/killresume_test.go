package main

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/txtar"
)

// Flags of TestKillResume: go test ./cmd/hnsplan-agent -run TestKillResume -killtrials 200 -killseed 42.
var (
	killTrials = flag.Int("killtrials", 50, "TestKillResume: how many trials (-short: 10)")
	killSeed   = flag.Uint64("killseed", 0, "TestKillResume: the seed of the trials (0: a new one, logged)")
	killLog    = flag.Bool("killlog", false, "TestKillResume: log what every agent run printed")
	killSpans  = flag.String("killspans", "", "TestKillResume: the spans the kills are drawn over, as a run logged them (apply=63.2ms,run=110.7ms; default: measured)")
)

const (
	killNode        = "win-1"
	killMaxKills    = 3                // SIGKILLs per trial, at most
	killMaxRestarts = 3                // unkilled runs a trial may take to converge after its kills
	killRunTimeout  = 30 * time.Second // an agent run that takes longer has hung
	killCalibrate   = 5                // unkilled runs per mode that measure how long a replace takes
	killMaxFresh    = 5                // times a trial starts again when its replace outran its first kill
)

// The agent's two ways of applying a plan, each with the in-memory HNS of
// the trial (mem:hns.json, its state directory hns.json.d) and the CNI
// simulated: the pods come back once the network is there.
var killModes = map[string][]string{
	"apply": {"apply", "--once", "--simulate-cni"},
	"run":   {"run", "--simulate-cni", "--listen", "127.0.0.1:0", "--until-converged"},
}

// The plans a trial replaces the base network for.
var killScenarios = []string{"vni", "rename"}

// TestKillResume is the probe of issue 13 made a test: the real agent
// binary, converged on plan base with pods on the node, the node drained
// (without a cluster the agent cannot drain: the operator does, and
// --simulate-cni brings the pods back after the replace), is started on a
// plan that forces a network replace (its VNI changes, or its name) and
// SIGKILLed at a random moment, up to three times, by
// apply --once or run --until-converged (chosen at random for every
// start, so a journal one leaves is resumed by the other); then it is
// restarted until it converges. It fails if ever
//
//   - the in-memory HNS's file or a file of the state directory (the
//     replace journal, the network record; the lock at rest) does not
//     parse, after a kill or while the agent runs (a watcher reads them
//     whenever they change), or a file the agent does not write appears;
//   - two networks exist at once, or two endpoints at the host
//     endpoint's address, at any point the watcher sees;
//   - the agent does not converge within three unkilled restarts, or an
//     unkilled run exits non-zero;
//   - once converged, HNS differs from the plan (a dry run finds an op,
//     or the network, host endpoint and pod endpoints are not exactly
//     the plan's), a journal is left, or a temporary file in the state
//     directory, the record names another network, or the lock is still
//     held.
//
// The kill moments are real wall-clock delays, drawn uniformly over the
// time an uninterrupted replace takes on this machine (measured first;
// a trial whose replace outran its first kill starts again, its kills
// drawn over the time that run took). Each trial draws its plan, modes
// and delays from its own generator, seeded by the test's seed and its
// number: a failure logs the seed and the measured spans, and
// -run 'TestKillResume/trial-007$' -killseed N -killspans S draws the
// same again (where the kills land still depends on the machine's
// speed). The default 50 trials take about 15 s on an idle 2-core
// machine, under a minute on a loaded one, building included; -short
// runs 10, -killtrials any number.
func TestKillResume(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skipf("SIGKILL, and a lock the kernel drops with the killed process, are what this test exercises; %s has no SIGKILL", runtime.GOOS)
	}
	seed := *killSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	trials := *killTrials
	if testing.Short() && !flagSet("killtrials") {
		trials = 10
	}
	start := time.Now()
	w := newKillWorld(t)
	spans := formatSpans(w.calib)
	t.Logf("seed %d, %d trials, set up in %v; rerun: go test ./cmd/hnsplan-agent -run 'TestKillResume' -killseed %d -killtrials %d -killspans %s (one trial: -run 'TestKillResume/trial-007$')",
		seed, trials, time.Since(start).Round(time.Millisecond), seed, trials, spans)

	st := &killStats{killed: map[string]int{}, early: map[string]int{}, steps: map[string]int{}, restartsNeeded: map[int]int{}}
	t.Cleanup(func() { // after the trials, which run in parallel
		t.Logf("%d trials in %v: %s", trials, time.Since(start).Round(time.Millisecond), st)
	})
	for i := range trials {
		t.Run(fmt.Sprintf("trial-%03d", i), func(t *testing.T) {
			// In parallel (go test -parallel, GOMAXPROCS by default): an
			// agent run waits on fsync as much as on the CPU.
			t.Parallel()
			w.trial(t, seed, i, st)
			if t.Failed() {
				t.Logf("seed %d trial %d failed; rerun it: go test ./cmd/hnsplan-agent -run 'TestKillResume/trial-%03d$' -killseed %d -killtrials %d -killspans %s -v", seed, i, i, seed, trials, spans)
			}
		})
	}
}

// killWorld is what every trial starts from.
type killWorld struct {
	agent    string                   // the built hnsplan-agent
	plans    map[string]string        // scenario ("base", "vni", "rename") -> plan file
	template string                   // hns.json and hns.json.d: converged on base, then drained
	calib    map[string]time.Duration // mode -> how long an uninterrupted replace takes
}

// newKillWorld builds both binaries, compiles the plans of
// testdata/killresume.txtar, converges an in-memory HNS on plan base with
// its pods, drains the node (the CNI deletes the pods' endpoints, as
// kubectl drain would make it) and measures an uninterrupted replace.
func newKillWorld(t *testing.T) *killWorld {
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator), ".", "../hnsplan")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building hnsplan-agent and hnsplan: %v\n%s", err, out)
	}
	w := &killWorld{agent: filepath.Join(bin, "hnsplan-agent"), plans: map[string]string{}, calib: map[string]time.Duration{}}

	ar, err := txtar.ParseFile("testdata/killresume.txtar")
	if err != nil {
		t.Fatal(err)
	}
	intent := filepath.Join(root, "intent")
	for _, f := range ar.Files {
		path := filepath.Join(intent, f.Name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range append([]string{"base"}, killScenarios...) {
		out := filepath.Join(root, "plans-"+s)
		c := exec.Command(filepath.Join(bin, "hnsplan"), "compile", s, "--inventory", "inventory.yaml", "-o", out)
		c.Dir = intent
		if b, err := c.CombinedOutput(); err != nil {
			t.Fatalf("hnsplan compile %s: %v\n%s", s, err, b)
		}
		w.plans[s] = filepath.Join(out, killNode+".json")
	}

	w.template = filepath.Join(root, "template")
	if err := os.Mkdir(w.template, 0o700); err != nil {
		t.Fatal(err)
	}
	if p := w.exec(t, w.template, "apply", "base", 0); p.code != 0 {
		t.Fatalf("converging on plan base: exit %d\n%s", p.code, p.out)
	}
	if n := drainNode(t, w.template); n == 0 {
		t.Fatal("plan base networked no pod: the trials would replace an empty network")
	}

	// How long a replace takes, from start to exit, unkilled: the kills
	// are drawn over this span. A rerun may give the spans a run logged.
	if *killSpans != "" {
		if w.calib, err = parseSpans(*killSpans); err != nil {
			t.Fatalf("-killspans: %v", err)
		}
		return w
	}
	for mode := range killModes {
		var ds []time.Duration
		for i := range killCalibrate + 1 { // the first warms the caches up
			dir := filepath.Join(t.TempDir(), "node")
			copyTree(t, w.template, dir)
			p := w.exec(t, dir, mode, "vni", 0)
			if p.code != 0 {
				t.Fatalf("an uninterrupted replace by %s: exit %d\n%s", mode, p.code, p.out)
			}
			w.checkConverged(t, dir, "vni")
			if i > 0 {
				ds = append(ds, p.took)
			}
		}
		slices.Sort(ds)
		w.calib[mode] = ds[len(ds)/2]
	}
	return w
}

// trial copies the drained node, kills the agent on its way to the
// scenario's plan up to killMaxKills times, restarts it until it
// converges, and checks the result.
func (w *killWorld) trial(t *testing.T, seed uint64, i int, st *killStats) {
	rng := rand.New(rand.NewPCG(seed, uint64(i)))
	scenario := killScenarios[rng.IntN(len(killScenarios))]
	dir := filepath.Join(t.TempDir(), "node")
	copyTree(t, w.template, dir)
	modes := slices.Sorted(maps.Keys(killModes))

	kills := 1 + rng.IntN(killMaxKills)
	t.Logf("seed %d trial %d: plan %s, %d kills", seed, i, scenario, kills)
	span := maps.Clone(w.calib) // what the kills are drawn over
	temps, landed, fresh := 0, 0, 0
	for k := 0; k < kills; k++ {
		mode := modes[rng.IntN(len(modes))]
		// 1.2: some kills land after the replace, while the pods come back.
		delay := time.Duration(rng.Float64()*1.2*float64(span[mode])) + time.Microsecond
		p := w.exec(t, dir, mode, scenario, delay)
		step, n := w.checkAtRest(t, dir, scenario, fmt.Sprintf("after start %d (%s)", k+1, mode))
		st.add(mode, p.killed, step, n > temps)
		temps = n
		if p.killed {
			landed++
			t.Logf("start %d: %s SIGKILLed after %v; journal step: %s", k+1, mode, delay.Round(time.Microsecond), step)
			continue
		}
		t.Logf("start %d: %s exited %d after %v, before its SIGKILL at %v", k+1, mode, p.code, p.took.Round(time.Microsecond), delay.Round(time.Microsecond))
		if p.code != 0 {
			t.Fatalf("%s exited %d without being killed:\n%s", mode, p.code, p.out)
		}
		if landed > 0 || fresh == killMaxFresh {
			break // converged: nothing left to interrupt
		}
		// No kill landed yet: the trial starts again from the drained node,
		// its kills drawn over the time this replace took.
		fresh++
		span[mode] = p.took
		t.Logf("no kill landed: starting again from the drained node, kills drawn over %v for %s", p.took.Round(time.Microsecond), mode)
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		copyTree(t, w.template, dir)
		k, temps = -1, 0
	}
	if landed == 0 {
		t.Errorf("no kill landed in %d tries: the replace outran every SIGKILL", killMaxFresh+1)
	}

	for r := range killMaxRestarts {
		mode := modes[rng.IntN(len(modes))]
		p := w.exec(t, dir, mode, scenario, 0)
		w.checkAtRest(t, dir, scenario, fmt.Sprintf("after restart %d (%s)", r+1, mode))
		if p.code == 0 {
			t.Logf("restart %d: %s converged in %v", r+1, mode, p.took.Round(time.Microsecond))
			st.restarts(r + 1)
			w.checkConverged(t, dir, scenario)
			return
		}
		t.Errorf("restart %d: %s exited %d:\n%s", r+1, mode, p.code, p.out)
	}
	t.Fatalf("no convergence after %d restarts", killMaxRestarts)
}

// killRun is one start of the agent.
type killRun struct {
	code   int // exit code; -1 if killed
	killed bool
	took   time.Duration
	out    string
}

// exec runs the agent in mode on dir's in-memory HNS towards the
// scenario's plan, and SIGKILLs it after delay unless it is 0 or the
// agent is done first. Throughout, a watcher checks what the agent
// writes (observe); the test fails with what it saw first.
func (w *killWorld) exec(t *testing.T, dir, mode, scenario string, delay time.Duration) killRun {
	t.Helper()
	args := append(slices.Clone(killModes[mode]), "--plan", w.plans[scenario], "--node", killNode, "--hns", "mem:"+filepath.Join(dir, "hns.json"))
	cmd := exec.Command(w.agent, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out

	stop, watched := make(chan struct{}), make(chan error, 1)
	go func() { watched <- watch(dir, stop) }()
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var kill <-chan time.Time
	if delay > 0 {
		kill = time.After(delay)
	}
	var err error
	select {
	case err = <-done:
	case <-kill:
		cmd.Process.Kill() // SIGKILL on Unix
		err = <-done
	case <-time.After(killRunTimeout):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s %s: still running after %v:\n%s", mode, scenario, killRunTimeout, out.String())
	}
	r := killRun{took: time.Since(begin), out: out.String(), code: cmd.ProcessState.ExitCode()}
	close(stop)
	if werr := <-watched; werr != nil {
		t.Errorf("while %s ran: %v", mode, werr)
	}
	if _, isExit := err.(*exec.ExitError); err != nil && !isExit {
		t.Fatalf("%s: %v", mode, err)
	}
	r.killed = r.code == -1
	if *killLog || !r.killed && r.took > time.Second {
		t.Logf("%s %s (SIGKILL after %v: %v) printed:\n%s", mode, scenario, delay, r.killed, r.out)
	}
	return r
}

// copyTree copies the node's files (the in-memory HNS and its state
// directory) keeping their modes: the agent refuses a state directory
// others may write.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		target := filepath.Join(to, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.Mkdir(target, info.Mode().Perm())
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// killStats counts where the kills landed, for the log.
type killStats struct {
	mu             sync.Mutex
	killed, early  map[string]int // mode -> runs killed, runs done before their kill
	steps          map[string]int // journal step after a kill ("-": none)
	restartsNeeded map[int]int
	cut            int // kills that cut a write short: a temporary file left
}

func (s *killStats) add(mode string, killed bool, step string, cut bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if killed {
		s.killed[mode]++
		s.steps[step]++
		if cut {
			s.cut++
		}
	} else {
		s.early[mode]++
	}
}

func (s *killStats) restarts(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restartsNeeded[n]++
}

func (s *killStats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, m := range []string{"apply", "run"} {
		fmt.Fprintf(&b, "%s: %d kills landed, %d exited first; ", m, s.killed[m], s.early[m])
	}
	b.WriteString("journal step after a kill:")
	for _, k := range slices.Sorted(maps.Keys(s.steps)) {
		fmt.Fprintf(&b, " %s %d", k, s.steps[k])
	}
	fmt.Fprintf(&b, "; %d kills cut a write short (a temporary file left); converged at restart: %v", s.cut, s.restartsNeeded)
	return b.String()
}

// formatSpans is what parseSpans reads: apply=63.2ms,run=110.7ms.
func formatSpans(spans map[string]time.Duration) string {
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(spans)) {
		parts = append(parts, fmt.Sprintf("%s=%v", m, spans[m].Round(time.Microsecond)))
	}
	return strings.Join(parts, ",")
}

// parseSpans reads -killspans: a positive duration for every mode.
func parseSpans(s string) (map[string]time.Duration, error) {
	spans := map[string]time.Duration{}
	for part := range strings.SplitSeq(s, ",") {
		mode, d, ok := strings.Cut(part, "=")
		if _, known := killModes[mode]; !ok || !known {
			return nil, fmt.Errorf("%q: want MODE=DURATION, MODE one of %v", part, slices.Sorted(maps.Keys(killModes)))
		}
		v, err := time.ParseDuration(d)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%q: want a positive duration (%v)", part, err)
		}
		spans[mode] = v
	}
	for mode := range killModes {
		if spans[mode] == 0 {
			return nil, fmt.Errorf("%q: no span for %s", s, mode)
		}
	}
	return spans, nil
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
