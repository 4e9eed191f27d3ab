package plan

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"
)

// MaxSize bounds every plan file and index a reader accepts. The largest
// plan of the 1,000-node benchmark intent is far below it; a ConfigMap
// holds 1 MiB. It keeps a crafted or runaway file (a symlink to
// /dev/zero) from taking the reader's memory.
const MaxSize = 64 << 20

// MaxNodeNameLen is the longest name of a node that gets a plan: its
// files "<node>.json" and "<node>.json.sig" (SignatureFile) must be file
// names (255 bytes), the tighter bound, and its ConfigMap "plan-<node>" a
// DNS-1123 subdomain (253 characters).
const MaxNodeNameLen = 255 - len(".json.sig")

var dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// windowsDevices are the names Windows reserves in every directory, with
// any extension: "con.json" is the console, not a file.
var windowsDevices = regexp.MustCompile(`^(con|prn|aux|nul|com[0-9]|lpt[0-9])(\.|$)`)

// CheckNodeName says why node cannot have a plan file and ConfigMap, or
// returns nil: it must be a Kubernetes node name (a DNS-1123 subdomain:
// lower-case letters, digits, '-' and '.'), at most MaxNodeNameLen
// characters, and not one of the device names Windows reserves (con,
// nul, com1, ...), since the agent reads its plan on Windows.
func CheckNodeName(node string) error {
	switch {
	case len(node) > MaxNodeNameLen:
		return fmt.Errorf("node name of %d characters is too long for a plan: its files <node>.json and <node>.json.sig and its ConfigMap plan-<node> allow at most %d", len(node), MaxNodeNameLen)
	case !dns1123Subdomain.MatchString(node):
		return fmt.Errorf("node name %q is not a Kubernetes node name (DNS-1123: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit)", node)
	case windowsDevices.MatchString(node):
		return fmt.Errorf("node name %q starts with a device name Windows reserves (%s): its plan file cannot be created on Windows", node, strings.TrimSuffix(windowsDevices.FindString(node), "."))
	}
	return nil
}

// FileName is the name of node's plan file in a plan directory.
func FileName(node string) string { return node + ".json" }

// IsPlanFile reports whether e names a plan file as compile writes them:
// FileName(e.Node), for a node name CheckNodeName accepts. Such a name is
// directly in the index's directory: it has no separator, and is neither
// "." nor "..".
func (e IndexEntry) IsPlanFile() bool {
	return CheckNodeName(e.Node) == nil && e.File == FileName(e.Node)
}

// ErrTooLarge is returned by ReadFile for a file larger than its limit.
var ErrTooLarge = errors.New("file too large")

// ReadFile reads the regular file name (following symlinks), at most
// limit bytes: a device, a FIFO or a directory is an error, before it is
// opened, and so is a file that holds more than limit bytes.
func ReadFile(name string, limit int64) ([]byte, error) {
	st, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", name, st.Mode().Type())
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: %w: more than %d bytes", name, ErrTooLarge, limit)
	}
	return data, nil
}

// ReadRegularFile reads name, at most limit bytes, only if it is a regular
// file itself, not a symlink: readers of a plan directory, or of the parts
// beside a plan, never follow a link out of it. A file swapped between the
// check and the read is refused as absent (fs.ErrNotExist), to be read
// again.
func ReadRegularFile(name string, limit int64) ([]byte, error) {
	st, err := os.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", name, st.Mode().Type())
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s: %w: %d bytes, more than %d", name, ErrTooLarge, st.Size(), limit)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fst, err := f.Stat(); err != nil || !os.SameFile(st, fst) {
		return nil, fmt.Errorf("%s was replaced while it was read: %w", name, fs.ErrNotExist)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: %w: more than %d bytes", name, ErrTooLarge, limit)
	}
	return data, nil
}
