// Package atomicfile writes files that survive a crash whole or not at
// all: the agent's state (the replace journal, the in-memory HNS's file)
// must never be read half-written after a restart.
package atomicfile

import (
	"os"
	"path/filepath"
	"runtime"
)

// Write replaces path with b: a temporary file in the same directory,
// synced, renamed over path, and the directory synced so the rename lasts.
// On error path is as it was and no temporary file is left.
func Write(path string, b []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
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
