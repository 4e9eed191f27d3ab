package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/applier/statedir"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// The checks of TestKillResume. A node's directory holds the in-memory
// HNS (hns.json) and the agent's state directory beside it (hns.json.d).

const killHNSFile = "hns.json"

func stateDirOf(dir string) string { return filepath.Join(dir, killHNSFile+".d") }

// drainNode deletes the pods' endpoints as the CNI does when the pods
// leave a drained node, and returns how many it deleted.
func drainNode(t *testing.T, dir string) int {
	t.Helper()
	h, err := hnsmem.Open(filepath.Join(dir, killHNSFile))
	if err != nil {
		t.Fatal(err)
	}
	s, err := h.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range s.Endpoints {
		if strings.HasPrefix(e.Name, "cni-") { // simulatePods' names
			if err := h.RemoveEndpoint(e.Name); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	return n
}

// observe reads everything the agent keeps on dir's node as the agent
// would and checks the invariants that hold at every moment: each file
// parses, HNS holds at most one network, and no two endpoints share an
// address (two host endpoints at .2 was issue 13's doubled network).
func observe(dir string) error {
	h, err := hnsmem.Open(filepath.Join(dir, killHNSFile))
	if err != nil {
		return fmt.Errorf("the in-memory HNS's file: %w", err)
	}
	s, err := h.Snapshot(context.Background())
	if err != nil {
		return err
	}
	if len(s.Networks) > 1 {
		return fmt.Errorf("%d networks at once:\n%s", len(s.Networks), h)
	}
	seen := map[netip.Addr]string{}
	for _, e := range s.Endpoints {
		if other, ok := seen[e.IP.Addr()]; ok {
			return fmt.Errorf("endpoints %s and %s both at %s:\n%s", other, e.Name, e.IP.Addr(), h)
		}
		seen[e.IP.Addr()] = e.Name
	}
	sd := stateDirOf(dir)
	if _, err := replace.LoadJournal(filepath.Join(sd, statedir.JournalFile)); err != nil {
		return err
	}
	if _, err := statedir.LoadOwned(sd); err != nil {
		return err
	}
	return nil
}

// watch runs observe whenever one of the files it reads changes, until
// stop is closed, and returns the first violation it saw, if any. The
// agent writes those files by atomic rename, so a read sees an old
// version or a new one, never a mix; the lock file, written in place, is
// checked only at rest. Between changes it only stats the files, so as
// not to take the CPU from the agent it watches.
func watch(dir string, stop <-chan struct{}) error {
	sd := stateDirOf(dir)
	paths := []string{filepath.Join(dir, killHNSFile), filepath.Join(sd, statedir.JournalFile), filepath.Join(sd, statedir.NetworkFile)}
	last := map[string]os.FileInfo{}
	changed := func() bool {
		c := false
		for _, p := range paths {
			fi, err := os.Stat(p)
			old, had := last[p]
			switch {
			case err != nil:
				if had {
					delete(last, p)
					c = true
				}
			case !had || !os.SameFile(old, fi) || !old.ModTime().Equal(fi.ModTime()) || old.Size() != fi.Size():
				last[p], c = fi, true
			}
		}
		return c
	}
	for {
		select {
		case <-stop:
			return observe(dir) // and once more at the end
		default:
		}
		if changed() {
			if err := observe(dir); err != nil {
				return err
			}
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// lockLine is what statedir.Acquire writes into the lock file; a kill
// between its truncate and its write leaves the file empty, which the
// next agent reports as "it wrote no details yet".
var lockLine = regexp.MustCompile(`^(pid [0-9]+ on host [^\n]*, started [0-9TZ:-]+, running "(apply --once|run)"\n)?$`)

// checkAtRest checks dir's node while no agent runs (after a kill or an
// exit): what observe checks, the lock file, and that nothing but the
// agent's own files is there. Temporary files of a write the kill cut
// short are allowed (nothing reads them). It returns the journal's step,
// "-" if there is none, and how many temporary files there are.
func (w *killWorld) checkAtRest(t *testing.T, dir, scenario, when string) (step string, temps int) {
	t.Helper()
	if err := observe(dir); err != nil {
		t.Errorf("%s: %v", when, err)
	}
	sd := stateDirOf(dir)
	if b, err := os.ReadFile(filepath.Join(sd, statedir.LockFile)); err != nil && !errors.Is(err, fs.ErrNotExist) || !lockLine.Match(b) {
		t.Errorf("%s: the lock file: %q, %v", when, b, err)
	}
	known := func(dir string, names ...string) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Errorf("%s: %v", when, err)
			return
		}
		for _, e := range entries {
			if slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(e.Name(), "."+n+".tmp") }) {
				temps++
			} else if !slices.Contains(names, e.Name()) {
				t.Errorf("%s: %s is not a file the agent writes", when, filepath.Join(dir, e.Name()))
			}
		}
	}
	known(dir, killHNSFile, killHNSFile+".d")
	known(sd, statedir.JournalFile, statedir.NetworkFile, statedir.EchoFile, statedir.LockFile)
	// The echo baseline is written whole or not at all: a damaged one
	// would cost a rewrite of every object on the next start.
	if _, err := statedir.LoadEcho(sd); err != nil {
		t.Errorf("%s: %v", when, err)
	}

	j, err := replace.LoadJournal(filepath.Join(sd, statedir.JournalFile))
	if err != nil || j == nil {
		return "-", temps
	}
	if want := w.plan(t, scenario).Network.Name; j.Want.Name != want {
		t.Errorf("%s: the journal replaces towards network %s, the plan's is %s", when, j.Want.Name, want)
	}
	return string(j.Step), temps
}

// plan is the scenario's plan.
func (w *killWorld) plan(t *testing.T, scenario string) *plan.NodePlan {
	t.Helper()
	b, err := os.ReadFile(w.plans[scenario])
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(b, killNode)
	if err == nil {
		err = planwatch.AssembleFromDir(p, filepath.Dir(w.plans[scenario]), nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkConverged checks that dir's node is exactly the scenario's plan
// and the agent left nothing behind: a dry run finds nothing to do; one
// network, the plan's; one host endpoint; every pod of the plan back on
// it; no journal, nor a temporary file in the state directory; the record
// names the plan's network; the lock is free.
func (w *killWorld) checkConverged(t *testing.T, dir, scenario string) {
	t.Helper()
	p := w.plan(t, scenario)
	want, _, err := hns.WantFromPlan(p, hns.LiveValues{})
	if err != nil {
		t.Fatal(err)
	}

	dry := []string{"apply", "--once", "--dry-run", "--plan", w.plans[scenario], "--node", killNode, "--hns", "mem:" + filepath.Join(dir, killHNSFile)}
	cmd := exec.Command(w.agent, dry...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), ": 0 ops\n") || !strings.Contains(string(out), "HNS matches the plan.") || strings.Contains(string(out), "unfinished") {
		t.Errorf("converged, but a dry run finds work: %v\n%s", err, out)
	}

	h, err := hnsmem.Open(filepath.Join(dir, killHNSFile))
	if err != nil {
		t.Fatal(err)
	}
	s, err := h.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Networks) != 1 {
		t.Fatalf("converged with %d networks, want 1:\n%s", len(s.Networks), h)
	}
	n := s.Networks[0]
	route := func(r hns.RemoteRoute) string { return r.Prefix.String() }
	wn := want.Network
	slices.SortFunc(wn.RemoteRoutes, func(a, b hns.RemoteRoute) int { return strings.Compare(route(a), route(b)) })
	slices.SortFunc(n.RemoteRoutes, func(a, b hns.RemoteRoute) int { return strings.Compare(route(a), route(b)) })
	got := hns.Network{Name: n.Name, Type: n.Type, Subnets: n.Subnets, VXLANPort: n.VXLANPort, HostRoute: n.HostRoute, RemoteRoutes: n.RemoteRoutes}
	if d := cmp.Diff(hns.Network{Name: wn.Name, Type: wn.Type, Subnets: wn.Subnets, VXLANPort: wn.VXLANPort, HostRoute: wn.HostRoute, RemoteRoutes: wn.RemoteRoutes}, got, cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})); d != "" {
		t.Errorf("the network is not the plan's (-plan +HNS):\n%s", d)
	}

	at := func(a netip.Addr) []hns.Endpoint {
		return slices.DeleteFunc(slices.Clone(s.Endpoints), func(e hns.Endpoint) bool { return e.IP.Addr() != a })
	}
	host := at(want.HostEndpoint.IP.Addr())
	if len(host) != 1 || host[0].Name != want.HostEndpoint.Name || host[0].Network != n.Name {
		t.Errorf("host endpoints at %s: %v; want one, %s on %s", want.HostEndpoint.IP.Addr(), host, want.HostEndpoint.Name, n.Name)
	}
	pods := 0
	for _, e := range p.Endpoints {
		if len(e.IpConfigurations) == 0 {
			continue
		}
		pods++
		a := e.IpConfigurations[0].IpAddress
		if got := at(a); len(got) != 1 || got[0].Network != n.Name || got[0].Remote {
			t.Errorf("the pod at %s: endpoints %v; want one, on %s", a, got, n.Name)
		}
	}
	if pods == 0 || len(s.Endpoints) != 1+pods {
		t.Errorf("%d endpoints, want the host's and %d pods':\n%s", len(s.Endpoints), pods, h)
	}

	sd := stateDirOf(dir)
	for _, f := range []string{statedir.JournalFile, statedir.ConfirmFile} {
		if _, err := os.Stat(filepath.Join(sd, f)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("converged, but %s is there (%v)", f, err)
		}
	}
	// The kills' leftover temporary files: the agent removes them from its
	// state directory (the in-memory HNS's are the test double's).
	entries, err := os.ReadDir(sd)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("converged, but a temporary file a kill left is still in the state directory: %s", e.Name())
		}
	}
	if o, err := statedir.LoadOwned(sd); err != nil || o == nil || *o != (hns.Owned{Network: wn.Name, HostEndpoint: want.HostEndpoint.Name}) {
		t.Errorf("the network record: %+v, %v; want %s and %s", o, err, wn.Name, want.HostEndpoint.Name)
	}
	l, err := statedir.Acquire(sd, "TestKillResume")
	if err != nil {
		t.Errorf("the agent is gone, but its state directory is still locked: %v", err)
	} else {
		l.Release()
	}
}
