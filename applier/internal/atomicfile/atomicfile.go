// Package atomicfile writes files that survive a crash whole or not at
// all: the agent's state (the replace journal, the in-memory HNS's file)
// must never be read half-written after a restart.
package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Write replaces path with b: a temporary file in the same directory,
// synced, renamed over path, and the directory synced so the rename lasts.
// On error path is as it was and no temporary file is left.
func Write(path string, b []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tempPrefix(path)+"*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(b); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// SyncDir makes a rename or removal in dir durable. Windows cannot open a
// directory for syncing, and NTFS journals the rename itself.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// tempPrefix is how the names of Write's temporary files for path begin;
// os.CreateTemp ends them with a random decimal number.
func tempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp" }

// RemoveStale removes the temporary files Write left beside path when its
// process died between creating one and renaming it over path. Nothing
// reads them, but each such crash leaves another. The caller must know no
// Write of path is under way (the agent: it holds the state directory's
// lock), or that Write would fail.
func RemoveStale(path string) error {
	dir, prefix := filepath.Dir(path), tempPrefix(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || rest == "" || strings.Trim(rest, "0123456789") != "" || !e.Type().IsRegular() {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
