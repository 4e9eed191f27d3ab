//go:build unix

package statedir

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// createPrivate creates dir with mode 0700 (a umask only takes bits
// away).
func createPrivate(dir string) error { return os.Mkdir(dir, 0o700) }

// checkPrivate refuses a directory that its group or others can write, or
// that belongs to another user than the agent's (who could make it so).
func checkPrivate(dir string, st fs.FileInfo) error {
	if m := st.Mode().Perm(); m&0o022 != 0 {
		return fmt.Errorf("its group or others can write it (mode %04o), and whoever writes it can make the agent drain the node and recreate its network: run chmod go-w %s, or choose another --state-dir", m, dir)
	}
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		if euid := os.Geteuid(); int(s.Uid) != euid && s.Uid != 0 {
			return fmt.Errorf("it belongs to uid %d, neither this agent's (%d) nor root, and its owner can make it writable: chown it, or choose another --state-dir", s.Uid, euid)
		}
	}
	return nil
}
