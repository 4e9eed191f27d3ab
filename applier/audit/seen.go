package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"time"

	"github.com/hnsplan/hnsplan/applier/internal/atomicfile"
)

// Seen is the record of when each orphan endpoint was first seen
// orphaned, kept in the agent's state directory (statedir.SeenFile): HNS
// keeps no creation time, and an orphan's age must survive an agent
// restart for the clean-up's age guard to mean anything.
type Seen struct {
	Path string
	// First is when each endpoint (by Key) was first seen orphaned.
	First map[string]time.Time
}

// seenFile is the record on disk.
type seenFile struct {
	Version   int                  `json:"version"`
	Endpoints map[string]time.Time `json:"endpoints"`
}

const seenVersion = 1

// MaxSeen bounds the record: a node holds a few hundred endpoints; past
// this many orphans the newest are not recorded (their age starts again).
const MaxSeen = 4096

// maxSeenSize bounds the file read.
const maxSeenSize = 1 << 20

// LoadSeen reads the record at path; none is an empty one. A damaged
// record is an error, with an empty record to go on with: ages start
// again, which only delays a clean-up.
func LoadSeen(path string) (*Seen, error) {
	s := &Seen{Path: path, First: map[string]time.Time{}}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("audit record %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSeenSize+1))
	if err != nil {
		return s, fmt.Errorf("audit record %s: %w", path, err)
	}
	var sf seenFile
	if len(b) > maxSeenSize {
		return s, fmt.Errorf("audit record %s is over %d bytes: remove it (orphan ages start again)", path, maxSeenSize)
	}
	if err := json.Unmarshal(b, &sf); err != nil || sf.Version != seenVersion {
		return s, fmt.Errorf("audit record %s is damaged or of another version (%v): remove it (orphan ages start again)", path, err)
	}
	for k, t := range sf.Endpoints {
		if len(s.First) < MaxSeen {
			s.First[k] = t
		}
	}
	return s, nil
}

// Observe makes the record the orphans of r: each one keeps its first
// sighting, a new one is first seen at r.At, one no longer orphaned is
// forgotten (its pod came, or it is gone). It says whether the record
// changed.
func (s *Seen) Observe(r *Report) bool {
	next := make(map[string]time.Time, len(r.Orphans))
	for _, o := range r.Orphans {
		if len(next) == MaxSeen {
			break
		}
		if t, ok := s.First[o.Key]; ok {
			next[o.Key] = t
		} else {
			next[o.Key] = r.At
		}
	}
	if maps.Equal(next, s.First) {
		return false
	}
	s.First = next
	return true
}

// Save writes the record atomically.
func (s *Seen) Save() error {
	b, err := json.MarshalIndent(seenFile{Version: seenVersion, Endpoints: s.First}, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(s.Path, append(b, '\n')); err != nil {
		return fmt.Errorf("audit record: %w", err)
	}
	return nil
}
