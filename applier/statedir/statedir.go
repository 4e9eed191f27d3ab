// Package statedir is the agent's state directory (--state-dir): the
// replace journal, replace confirmations, the record of the network the
// agent owns, the baseline of what HNS echoes of the agent's writes, and
// the lock that keeps a second agent out.
//
// The directory decides what the agent does to the node's network (a
// journal there makes it delete and recreate the network), so only the
// agent's own account and administrators may write it: Prepare creates it
// so (on Windows with an explicit ACL, SYSTEM and Administrators only; on
// Unix mode 0700) and refuses one that others can write.
package statedir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/internal/atomicfile"
)

// Files of the state directory.
const (
	JournalFile = "replace-journal.json" // the replace in progress (applier/replace)
	ConfirmFile = "replace-confirm"      // an operator's confirmation of a replace
	SlotFile    = "rollout-slot.json"    // the rollout slot held, or given up (applier)
	RetryFile   = "replace-retry"        // an operator's --retry of a halted replace
	AbortFile   = "replace-abort"        // an operator's --abort of a replace
	NetworkFile = "network.json"         // the network the agent owns
	EchoFile    = "echo.json"            // the baseline of what HNS echoes (hns.Echo)
	SeenFile    = "audit-seen.json"      // when the audit first saw each orphan endpoint (applier/audit)
	LockFile    = "lock"                 // held by the running agent
)

// Prepare makes sure dir is a directory only the agent and administrators
// can write: it creates it so if it does not exist (its parents as usual),
// and otherwise checks it. A directory others can write is refused, with
// what to do: whoever can write it can make the agent drain the node and
// recreate its network.
func Prepare(dir string) error {
	if dir == "" {
		return errors.New("no state directory given (--state-dir)")
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(dir)), 0o755); err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	switch err := createPrivate(dir); {
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrExist):
		return fmt.Errorf("state directory %s: create: %w", dir, err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("state directory %s is not a directory: remove it or choose another --state-dir", dir)
	}
	if err := checkPrivate(dir, st); err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	return nil
}

// RemoveStale removes the temporary files that the agent's writes of the
// journal and the network record left in dir when it was killed between
// creating one and renaming it into place: nothing reads them, but every
// such crash leaves another. Call it only while holding dir's Lock, which
// keeps every other writer of those files out. The operator's
// confirmation (ConfirmFile) is written without the lock, so its
// temporary files are left alone.
func RemoveStale(dir string) error {
	return errors.Join(
		atomicfile.RemoveStale(filepath.Join(dir, JournalFile)),
		atomicfile.RemoveStale(filepath.Join(dir, NetworkFile)),
		atomicfile.RemoveStale(filepath.Join(dir, EchoFile)),
		atomicfile.RemoveStale(filepath.Join(dir, SlotFile)))
}

// record is NetworkFile.
type record struct {
	Version int `json:"version"`
	hns.Owned
	PlanDigest string    `json:"planDigest,omitempty"`
	UpdatedAt  time.Time `json:"updatedAt"`
}

const recordVersion = 1

// LoadOwned returns the network the agent recorded as its own in dir, or
// nil if there is no record. An unreadable record is an error: guessing
// could adopt a network that is not the agent's.
func LoadOwned(dir string) (*hns.Owned, error) {
	path := filepath.Join(dir, NetworkFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w (remove it: the agent then recognises its network by subnet and VNI)", path, err)
	}
	if r.Version != recordVersion || r.Network == "" {
		return nil, fmt.Errorf("%s: version %d, network %q: not a record this agent reads (remove it: the agent then recognises its network by subnet and VNI)", path, r.Version, r.Network)
	}
	return &r.Owned, nil
}

// SaveOwned records o as the network the agent owns (crash-safe: the old
// record or the new one, never half of one).
func SaveOwned(dir string, o hns.Owned, planDigest string) error {
	b, err := json.MarshalIndent(record{Version: recordVersion, Owned: o, PlanDigest: planDigest, UpdatedAt: time.Now().UTC()}, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, NetworkFile), append(b, '\n'))
}

// Record is the network record of a state directory, as the reconciler
// keeps it (applier.OwnedStore).
type Record string

// Load is LoadOwned of the directory.
func (r Record) Load() (*hns.Owned, error) { return LoadOwned(string(r)) }

// Save is SaveOwned to the directory.
func (r Record) Save(o hns.Owned, planDigest string) error {
	return SaveOwned(string(r), o, planDigest)
}

// LoadEcho returns the baseline of what HNS echoes kept in dir, or an
// empty one if there is none. A baseline that cannot be read is returned
// empty with the error, for the caller to report: losing it costs at most
// one more write per object, never a replace (hns.Echo).
func LoadEcho(dir string) (*hns.Echo, error) {
	path := filepath.Join(dir, EchoFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return hns.NewEcho(), nil
	}
	if err != nil {
		return hns.NewEcho(), err
	}
	e := hns.NewEcho()
	if err := json.Unmarshal(b, e); err != nil {
		return hns.NewEcho(), fmt.Errorf("%s: %w (starting without it: objects HNS echoes otherwise are written once more; remove the file to stop this message)", path, err)
	}
	if e.Version != hns.EchoVersion {
		return hns.NewEcho(), fmt.Errorf("%s: version %d, this agent reads %d (starting without it; remove the file to stop this message)", path, e.Version, hns.EchoVersion)
	}
	return e, nil
}

// SaveEcho keeps the baseline in dir, crash-safe.
func SaveEcho(dir string, e *hns.Echo) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, EchoFile), append(b, '\n'))
}

// Baseline is the echo baseline of a state directory, as the reconciler
// keeps it (applier.EchoStore).
type Baseline string

// Load is LoadEcho of the directory.
func (d Baseline) Load() (*hns.Echo, error) { return LoadEcho(string(d)) }

// Save is SaveEcho to the directory.
func (d Baseline) Save(e *hns.Echo) error { return SaveEcho(string(d), e) }

// WriteRequest writes an operator's request for the running agent
// (RetryFile, AbortFile) into dir, naming the plan (digest) it is about.
// Like a confirmation it is written without the lock, which the running
// agent holds; the agent takes it at its next pass.
func WriteRequest(dir, name, digest string) error {
	return atomicfile.Write(filepath.Join(dir, name), []byte(digest+"\n"))
}
