package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/hnsplan/hnsplan/applier/statedir"
)

const stateDirHelp = "the agent's state directory: the replace journal and confirmations, the record of the network it owns; locked while in use, and refused if others may write it " +
	"(default: the host's; with --hns mem:FILE, FILE.d; with --hns mem, a temporary one)"

// heldStateDir is a state directory prepared and locked for this process.
type heldStateDir struct {
	dir  string
	lock *statedir.Lock
	tmp  bool // made for an in-memory HNS that ends with the process
}

// openStateDir resolves --state-dir (flag) for --hns hnsFlag, makes sure
// only the agent may write it, and locks it for command. Without flag:
// the in-memory host of mem:FILE keeps its state directory beside its
// file (FILE.d), that of mem none beyond the process (a temporary one),
// and the host's HNS uses the host's (defaultStateDir).
func openStateDir(flag, hnsFlag, command string) (*heldStateDir, error) {
	h := &heldStateDir{dir: flag}
	switch {
	case flag != "":
	case hnsFlag == "mem":
		d, err := os.MkdirTemp("", "hnsplan-agent-state-*")
		if err != nil {
			return nil, &exitError{code: exitFailed, err: err}
		}
		h.dir, h.tmp = d, true
	case strings.HasPrefix(hnsFlag, "mem:"):
		h.dir = strings.TrimPrefix(hnsFlag, "mem:") + ".d"
	default:
		h.dir = defaultStateDir()
	}
	if err := statedir.Prepare(h.dir); err != nil {
		h.close()
		return nil, &exitError{code: exitFailed, err: fmt.Errorf("%w; nothing was changed", err)}
	}
	l, err := statedir.Acquire(h.dir, command)
	if err != nil {
		h.close()
		return nil, &exitError{code: exitFailed, err: fmt.Errorf("%w; nothing was changed", err)}
	}
	h.lock = l
	// A write a kill cut short left a temporary file; held, the directory
	// is ours to tidy. One that cannot be removed is only untidy: the next
	// start tries again.
	_ = statedir.RemoveStale(h.dir)
	return h, nil
}

func (h *heldStateDir) close() {
	h.lock.Release()
	if h.tmp {
		os.RemoveAll(h.dir)
	}
}
