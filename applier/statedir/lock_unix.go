//go:build unix

package statedir

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

var errHeld = errors.New("held")

// lockFile takes an exclusive flock without waiting. flock locks belong
// to the open file description: a second open of the file, in this
// process or another, cannot take it while the first holds it.
func lockFile(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return errHeld
		}
		return err
	}
}

func unlockFile(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_UN) }
