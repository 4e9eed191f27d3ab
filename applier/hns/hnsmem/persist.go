package hnsmem

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/internal/atomicfile"
)

// fileFormat is the version of the JSON file Open reads and writes.
const fileFormat = 1

// file is what Open keeps on disk: the state and the ID counter, so IDs
// stay unique across restarts.
type file struct {
	Format int       `json:"format"`
	NextID uint64    `json:"nextID"`
	State  hns.State `json:"state"`
}

// Open returns an HNS whose state lives in the JSON file at path, so a
// demo survives restarts, as real HNS keeps persistent networks: it loads
// the file if it exists (else starts empty) and saves after every
// successful change (Apply, Reboot, the seeding helpers), atomically
// (a temporary file in the same directory, renamed over path). A change
// that cannot be saved fails and is not made.
func Open(path string, opts ...Option) (*HNS, error) {
	m := New(opts...)
	m.path = path
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hnsmem: %w", err)
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("hnsmem: %s: %w", path, err)
	}
	if f.Format != fileFormat {
		return nil, fmt.Errorf("hnsmem: %s: format %d, want %d", path, f.Format, fileFormat)
	}
	f.State.Canonical()
	m.st, m.seq = f.State, f.NextID
	return m, nil
}

func save(path string, s *hns.State, seq uint64) error {
	b, err := json.MarshalIndent(file{Format: fileFormat, NextID: seq, State: *s}, "", "  ")
	if err != nil {
		return fmt.Errorf("hnsmem: saving state: %w", err)
	}
	b = append(b, '\n')
	if err := atomicfile.Write(path, b); err != nil {
		return fmt.Errorf("hnsmem: saving state: %w", err)
	}
	return nil
}
