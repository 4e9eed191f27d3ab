package statedir

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/applier/hns"
)

func TestPrepareCreatesPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "hnsplan")
	if err := Prepare(dir); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		t.Fatalf("not created: %v", err)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm() != 0o700 {
		t.Errorf("mode %04o, want 0700", st.Mode().Perm())
	}
	// Prepared again: the same directory, accepted.
	if err := Prepare(dir); err != nil {
		t.Errorf("second Prepare: %v", err)
	}
}

// TestPrepareRefusesWritable: a state directory others may write is
// refused, with what to do (issue 13).
func TestPrepareRefusesWritable(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("modes: the Windows ACL decision is TestJudgeACL")
	}
	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o700, true}, {0o755, true}, {0o750, true}, {0o775, false}, {0o757, false}, {0o777, false}, {0o720, false}} {
		t.Run(fmt.Sprintf("%04o", tc.mode), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, tc.mode); err != nil {
				t.Fatal(err)
			}
			err := Prepare(dir)
			if tc.ok != (err == nil) {
				t.Fatalf("Prepare = %v, want ok %v", err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("its group or others can write it (mode %04o)", tc.mode)) ||
				err != nil && !strings.Contains(err.Error(), "chmod go-w "+dir) {
				t.Errorf("Prepare = %v: want the mode and what to do", err)
			}
		})
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	if err := Prepare(file); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("Prepare(file) = %v", err)
	}
}

// TestAcquireTwice: a second Lock of the directory, by another open file
// (flock and LockFileEx locks belong to the open file, not the process),
// fails and names the holder; once released, it can be taken again.
func TestAcquireTwice(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir, "run")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(dir, "apply --once")
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Acquire = %v, want ErrLocked", err)
	}
	host, _ := os.Hostname()
	for _, want := range []string{fmt.Sprintf("is held by pid %d on host %s, started ", os.Getpid(), host), `running "run"`, "stop that agent first"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := Acquire(dir, "apply --once")
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l2.Release()
}

// TestAcquireOtherProcess: another process holds the lock (a helper: this
// test binary, re-run as TestHelperHoldLock); this one is refused and
// told the helper's pid. When the helper ends, even killed, the OS drops
// its lock and the directory can be taken.
func TestAcquireOtherProcess(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill=%v", kill), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldLock$")
			cmd.Env = append(os.Environ(), "STATEDIR_HELPER_DIR="+dir)
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil || line != "held\n" {
				cmd.Process.Kill()
				t.Fatalf("helper said %q, %v", line, err)
			}
			_, err = Acquire(dir, "run")
			if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("held by pid %d ", cmd.Process.Pid)) {
				t.Errorf("Acquire while the helper holds it = %v, want ErrLocked naming pid %d", err, cmd.Process.Pid)
			}
			if kill {
				cmd.Process.Kill()
			} else {
				stdin.Close()
			}
			cmd.Wait()
			l, err := Acquire(dir, "run")
			if err != nil {
				t.Fatalf("Acquire after the helper ended: %v", err)
			}
			l.Release()
		})
	}
}

// TestHelperHoldLock is TestAcquireOtherProcess's other process.
func TestHelperHoldLock(t *testing.T) {
	dir := os.Getenv("STATEDIR_HELPER_DIR")
	if dir == "" {
		t.Skip("a helper process of TestAcquireOtherProcess")
	}
	l, err := Acquire(dir, "run")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("held")
	io.Copy(io.Discard, os.Stdin) // until the parent closes it
	l.Release()
	os.Exit(0)
}

func TestOwnedRecord(t *testing.T) {
	dir := t.TempDir()
	if o, err := LoadOwned(dir); o != nil || err != nil {
		t.Fatalf("no record: %v, %v", o, err)
	}
	want := hns.Owned{Network: "Calico", HostEndpoint: "Calico_ep"}
	if err := SaveOwned(dir, want, "sha256:1"); err != nil {
		t.Fatal(err)
	}
	if o, err := LoadOwned(dir); err != nil || o == nil || *o != want {
		t.Fatalf("LoadOwned = %v, %v; want %v", o, err, want)
	}
	for _, bad := range []string{"{", `{"version": 2, "network": "Calico"}`, `{"version": 1}`} {
		os.WriteFile(filepath.Join(dir, NetworkFile), []byte(bad), 0o600)
		if o, err := LoadOwned(dir); err == nil || !strings.Contains(err.Error(), "remove it") {
			t.Errorf("LoadOwned(%s) = %v, %v; want an error saying what to do", bad, o, err)
		}
	}
}

// TestJudgeACL: the Windows state directory's ACL decision. Only SYSTEM,
// Administrators and the agent's own account may write it; ProgramData's
// inherited ACL (Users may create files) is refused.
func TestJudgeACL(t *testing.T) {
	const self = "S-1-5-21-1-2-3-1001"
	const fa = 0x1f01ff // FILE_ALL_ACCESS
	ours := []ace{{aceAccessAllowed, fa, sidSystem}, {aceAccessAllowed, fa, sidAdministrators}}
	programData := append(ours[:2:2],
		ace{aceAccessAllowed, 0x10000000, sidCreatorOwner},
		ace{aceAccessAllowed, 0x1200a9, "S-1-5-32-545"}, // Users: read and execute
		ace{aceAccessAllowed, 0x6, "S-1-5-32-545"},      // Users: create files, create folders
	)
	tests := []struct {
		name    string
		owner   string
		hasDACL bool
		aces    []ace
		want    string // "" accepted
	}{
		{"the agent's own ACL", sidAdministrators, true, ours, ""},
		{"owned by SYSTEM", sidSystem, true, ours, ""},
		{"the agent's account may write", self, true, append(ours[:2:2], ace{aceAccessAllowed, fa, self}), ""},
		{"others may read", sidSystem, true, append(ours[:2:2], ace{aceAccessAllowed, 0x1200a9, "S-1-5-32-545"}), ""},
		{"a deny entry", sidSystem, true, append(ours[:2:2], ace{aceAccessDenied, fa, "S-1-1-0"}), ""},
		{"ProgramData's inherited ACL", sidSystem, true, programData, `BUILTIN\Users (S-1-5-32-545) may write it`},
		{"Everyone full control", sidSystem, true, append(ours[:2:2], ace{aceAccessAllowed, 0x10000000, "S-1-1-0"}), "Everyone (S-1-1-0) may write it"},
		{"Users may change the ACL", sidSystem, true, append(ours[:2:2], ace{aceAccessAllowed, 0x40000, "S-1-5-32-545"}), `BUILTIN\Users (S-1-5-32-545) may write it`},
		{"NULL DACL", sidSystem, false, nil, "it has no DACL, so everyone may write it"},
		{"owned by a user", "S-1-5-21-9-9-9-1002", true, ours, "it is owned by S-1-5-21-9-9-9-1002, who can change its ACL"},
		{"an object ACE", sidSystem, true, append(ours[:2:2], ace{Type: 5, Mask: fa}), "an access-allowed entry of type 5 may write it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := judgeACL(`C:\ProgramData\hnsplan`, tt.owner, tt.hasDACL, tt.aces, self)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && err == nil:
				t.Errorf("accepted; want %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Errorf("error %q does not say %q", err, tt.want)
			case err != nil && !strings.Contains(err.Error(), `icacls "C:\ProgramData\hnsplan" /inheritance:r`):
				t.Errorf("error %q does not say how to fix it", err)
			}
		})
	}
}

// TestRemoveStale: the journal's and the record's leftover temporary
// files go; the operator's confirmation's (written without the lock) and
// the files themselves stay.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	files := map[string]bool{ // name -> removed
		"." + JournalFile + ".tmp1": true,
		"." + NetworkFile + ".tmp2": true,
		"." + EchoFile + ".tmp4":    true,
		"." + ConfirmFile + ".tmp3": false,
		JournalFile:                 false,
		NetworkFile:                 false,
		EchoFile:                    false,
		LockFile:                    false,
	}
	for name := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := RemoveStale(dir); err != nil {
		t.Fatal(err)
	}
	for name, removed := range files {
		if _, err := os.Stat(filepath.Join(dir, name)); os.IsNotExist(err) != removed {
			t.Errorf("%s: removed %v, want %v", name, os.IsNotExist(err), removed)
		}
	}
}

// TestEchoRoundTrip: the baseline survives a save and a load; a missing
// one is empty; a damaged one is empty with an error that says so.
func TestEchoRoundTrip(t *testing.T) {
	dir := t.TempDir()
	e, err := LoadEcho(dir)
	if err != nil || len(e.Networks)+len(e.Endpoints)+len(e.Replaces) != 0 {
		t.Fatalf("missing baseline: %+v, %v", e, err)
	}
	e.NoteReplace("sha256:1", "vni-changed")
	e.Networks = map[string]*hns.NetworkEcho{"Calico": {Sent: hns.Network{Name: "Calico", Type: "Overlay", VXLANPort: 4789}, Read: hns.Network{Name: "Calico", Type: "Overlay"}}}
	if err := SaveEcho(dir, e); err != nil {
		t.Fatal(err)
	}
	got, err := LoadEcho(dir)
	if err != nil || !got.Replaced("sha256:1", "vni-changed") || got.Networks["Calico"].Sent.VXLANPort != 4789 {
		t.Fatalf("loaded %+v, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, EchoFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err = LoadEcho(dir)
	if err == nil || !strings.Contains(err.Error(), "starting without it") || got == nil || got.Replaced("sha256:1", "vni-changed") {
		t.Fatalf("damaged baseline: %+v, %v", got, err)
	}
}
