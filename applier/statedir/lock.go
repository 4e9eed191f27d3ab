package statedir

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrLocked is wrapped by the error of Lock when another agent holds the
// directory.
var ErrLocked = errors.New("the state directory is in use by another hnsplan-agent")

// A Lock is the state directory held by this process. Two agents on one
// directory would both run a replace (both drain, both delete and
// recreate the network); the lock makes the second one stop instead.
//
// It is an OS lock on LockFile (flock on Unix, LockFileEx on Windows):
// the OS releases it when the process ends, however it ends, so a killed
// agent leaves no stale lock. The file holds who holds it (pid, host,
// start time, command), for the message the next agent prints.
type Lock struct {
	f *os.File
}

// Acquire takes the state directory dir for this process, which runs
// command ("run", "apply --once"). If another process (or another Lock of
// this one) holds it, it returns an error wrapping ErrLocked that names
// the holder.
func Acquire(dir, command string) (*Lock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the state directory: %w", err)
	}
	if err := lockFile(f); err != nil {
		holder := readHolder(f)
		f.Close()
		if errors.Is(err, errHeld) {
			return nil, fmt.Errorf("%w: %s is held by %s; stop that agent first (two agents on one node would both drain it and recreate its network), or give this one another --state-dir", ErrLocked, path, holder)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	host, _ := os.Hostname()
	info := fmt.Sprintf("pid %d on host %s, started %s, running %q\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339), command)
	if err := writeHolder(f, info); err != nil {
		unlockFile(f)
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Release gives the directory up. The holder's line stays in the file:
// the next agent overwrites it.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := unlockFile(l.f)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

// readHolder is the holder's line, short and printable, or a note that it
// wrote none (yet).
func readHolder(f *os.File) string {
	b := make([]byte, 512)
	n, _ := f.ReadAt(b, 0)
	line, _, _ := bytes.Cut(b[:n], []byte("\n"))
	s := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, string(line))
	if s == "" {
		return "another process (it wrote no details yet)"
	}
	return s
}

func writeHolder(f *os.File, info string) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := f.WriteString(info); err != nil {
		return err
	}
	return f.Sync()
}
