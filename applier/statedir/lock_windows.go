//go:build windows

package statedir

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

var errHeld = errors.New("held")

// The locked range lies far past the holder's line: LockFileEx locks are
// mandatory, and a lock over the line would keep the next agent from
// reading who holds it.
const lockOffsetHigh = 0x7fffffff

// lockFile takes an exclusive LockFileEx lock without waiting. The lock
// belongs to the handle: a second open of the file, in this process or
// another, cannot take it while the first holds it.
func lockFile(f *os.File) error {
	ol := &windows.Overlapped{OffsetHigh: lockOffsetHigh}
	err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING) {
		return errHeld
	}
	return err
}

func unlockFile(f *os.File) error {
	ol := &windows.Overlapped{OffsetHigh: lockOffsetHigh}
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, ol)
}
