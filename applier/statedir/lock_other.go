//go:build !unix && !windows

package statedir

import (
	"errors"
	"os"
)

var errHeld = errors.New("held")

// lockFile fails closed where the OS offers no lock the agent knows.
func lockFile(*os.File) error   { return errors.New("file locks are not supported on this OS") }
func unlockFile(*os.File) error { return nil }
