package replace

import (
	"context"
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

// JournalVersion is the journal's format version. A journal of another
// version is refused, not guessed at: a replace half done by another
// agent version needs an operator.
const JournalVersion = 1

// Journal is the record of a replace in progress. It is written before
// each step runs, so after a crash it names the step to run again; every
// step is idempotent, so running it again converges. It is the runner's
// only memory: everything else is re-read from HNS and the host.
type Journal struct {
	Version int `json:"version"`
	// PlanDigest is the digest of the plan being applied; Reason why the
	// network is replaced ("vni-changed").
	PlanDigest string `json:"planDigest"`
	Reason     string `json:"reason"`
	// Step is the step that runs, or ran last; Attempts counts how many
	// times it was started.
	Step     Step `json:"step"`
	Attempts int  `json:"attempts"`
	// Have is the network's identity when the replace began; Want the
	// identity it is replaced with (routes left out). Their names differ
	// when the plan renamed the network.
	Have hns.Network `json:"have"`
	Want hns.Network `json:"want"`
	// HaveHostEndpoint is the host endpoint's name on the network being
	// replaced, when a rename gives it another than the plan's.
	HaveHostEndpoint string `json:"haveHostEndpoint,omitempty"`
	// HostRoutes is the host's routing table before the network was
	// deleted, once HostRoutesTaken.
	HostRoutes      []Route   `json:"hostRoutes,omitempty"`
	HostRoutesTaken bool      `json:"hostRoutesTaken,omitempty"`
	StartedAt       time.Time `json:"startedAt"`
	StepStartedAt   time.Time `json:"stepStartedAt"`
	// DrainSince is when the drain began to be waited for (wait-drained
	// first ran): its timeout runs from there, across passes and agent
	// restarts, so a blocked drain stays blocked instead of waiting a new
	// timeout at every pass. Zero until then, and again once an operator
	// retries (Config.RestartDrain) or a pod comes back before the delete.
	DrainSince time.Time `json:"drainSince,omitzero"`
}

// LoadJournal returns the replace in progress recorded at path, or nil if
// there is none.
func LoadJournal(path string) (*Journal, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load replace journal: %w", err)
	}
	var j Journal
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("load replace journal %s: %w", path, err)
	}
	if j.Version != JournalVersion {
		return nil, fmt.Errorf("load replace journal %s: version %d, this agent reads version %d", path, j.Version, JournalVersion)
	}
	if stepIndex(j.Step) < 0 {
		return nil, fmt.Errorf("load replace journal %s: unknown step %q", path, j.Step)
	}
	return &j, nil
}

// save writes j to path atomically: a temporary file in the same
// directory, synced, then renamed over path, so a crash leaves either the
// old journal or the new one, never a torn one.
func (j *Journal) save(path string) error {
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(b, '\n'))
}

func removeJournal(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(path))
}

// Confirm records an operator's confirmation (hnsplan-agent replace
// --confirm) of the replace that the plan with digest planDigest asks, for
// a Config in ModeManual whose ConfirmPath is path. A confirmation is for
// that plan only: a later plan asks again.
func Confirm(path, planDigest string) error {
	return atomicfile.Write(path, []byte(planDigest+"\n"))
}

// confirmed reports whether path holds a confirmation of planDigest.
func confirmed(path, planDigest string) (bool, error) {
	if path == "" {
		return false, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	got := string(b)
	for len(got) > 0 && (got[len(got)-1] == '\n' || got[len(got)-1] == '\r') {
		got = got[:len(got)-1]
	}
	return got == planDigest, nil
}

// ErrTooLate says a replace cannot be aborted: its network was deleted
// (or may have been), so only finishing the replace gives the node a
// network again.
var ErrTooLate = errors.New("the replace has deleted the network (or begun to): it can only be finished")

// Abortable reports whether the replace journalled at step has deleted
// nothing yet: the steps before delete-endpoints only cordon, evict and
// read.
func Abortable(step Step) bool {
	return stepIndex(step) >= 0 && stepIndex(step) < stepIndex(StepDeleteEndpoints)
}

// Abort gives up the replace journalled at journalPath, if it has deleted
// nothing yet (hnsplan-agent replace --abort): it uncordons the node
// (the Drainer lifts only a cordon the agent made) and removes the
// journal. It returns the journal given up, nil if there was none. A
// replace past snapshot-routes is refused with ErrTooLate and left as it
// is.
func Abort(ctx context.Context, journalPath string, d Drainer) (*Journal, error) {
	j, err := LoadJournal(journalPath)
	if err != nil || j == nil {
		return nil, err
	}
	if !Abortable(j.Step) {
		return j, fmt.Errorf("abort the replace of network %s (%s) at step %s: %w; the node has no network until it is (hnsplan-agent replace --retry)", j.Want.Name, j.Reason, j.Step, ErrTooLate)
	}
	if err := d.Uncordon(ctx); err != nil {
		return j, fmt.Errorf("abort the replace of network %s: uncordon the node: %w (the journal stays; try again)", j.Want.Name, err)
	}
	if err := removeJournal(journalPath); err != nil {
		return j, fmt.Errorf("abort the replace of network %s: remove the journal %s: %w", j.Want.Name, journalPath, err)
	}
	return j, nil
}
