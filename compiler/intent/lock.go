package intent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

// LockFile is the name of the IPAM lock beside the intent: the blocks the
// compiler allocated, pinned so that adding or removing a node never moves
// another node's block (a moved block is a network recreate).
const LockFile = "hnsplan.lock.json"

// LockFormatVersion is the lock file's format.
const LockFormatVersion = "1"

// Lock is the content of hnsplan.lock.json.
type Lock struct {
	FormatVersion string `json:"formatVersion"`
	// Blocks maps a node name to its IPAM blocks.
	Blocks map[string][]netip.Prefix `json:"blocks"`

	// Pos is where the lock was read from (line 1 of the file); entry
	// positions are in entryPos.
	Pos      diag.Pos `json:"-"`
	entryPos map[string]diag.Pos
}

// PosOf returns where node's entry is written, or the file's position.
func (l *Lock) PosOf(node string) diag.Pos {
	if p, ok := l.entryPos[node]; ok {
		return p
	}
	return l.Pos
}

// readLock reads dir/hnsplan.lock.json. It returns nil without a finding
// when there is no lock; a lock that cannot be read is an ipam-lock-stale
// finding, since the fix is the same: rewrite it.
func readLock(dir string, files *inputFiles, errs *diag.List) *Lock {
	name := filepath.Join(dir, LockFile)
	if _, err := os.Lstat(name); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	pos := diag.Pos{File: files.rel(name), Line: 1, Col: 1}
	data, err := files.read(name)
	var ie *InputError
	if errors.As(err, &ie) {
		errs.Errorf("ipam-lock-stale", pos, "", "%s", ie.Why)
		return nil
	} else if err != nil {
		errs.Errorf("ipam-lock-stale", pos, "", "%v", cause(err))
		return nil
	}
	l := &Lock{Pos: pos, entryPos: map[string]diag.Pos{}}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(l); err != nil {
		errs.Errorf("ipam-lock-stale", pos, "", "%s is not a valid lock file (%v); rewrite it with `hnsplan compile --update-lock`", LockFile, err)
		return nil
	}
	if l.FormatVersion != LockFormatVersion {
		errs.Errorf("ipam-lock-stale", pos, "formatVersion", "lock format %q is not %q; rewrite it with `hnsplan compile --update-lock`", l.FormatVersion, LockFormatVersion)
		return nil
	}
	// Entry positions: the line of each "node": key.
	for node := range l.Blocks {
		key, _ := json.Marshal(node)
		if i := bytes.Index(data, append(key, ':')); i >= 0 {
			line := bytes.Count(data[:i], []byte("\n")) + 1
			col := i - bytes.LastIndexByte(data[:i], '\n')
			l.entryPos[node] = diag.Pos{File: pos.File, Line: line, Col: col}
		}
	}
	for node, blocks := range l.Blocks {
		for _, b := range blocks {
			if b != b.Masked() {
				errs.Errorf("ipam-lock-stale", l.PosOf(node), fmt.Sprintf("blocks.%s", node), "block %s has host bits set; rewrite the lock with `hnsplan compile --update-lock`", b)
			}
		}
	}
	return l
}

// Encode returns the lock file's content: stable JSON, nodes and blocks
// sorted, with a trailing newline.
func (l *Lock) Encode() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\n  \"formatVersion\": %q,\n  \"blocks\": {", LockFormatVersion)
	nodes := make([]string, 0, len(l.Blocks))
	for n := range l.Blocks {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for i, n := range nodes {
		if i > 0 {
			b.WriteByte(',')
		}
		blocks := slices.Clone(l.Blocks[n])
		slices.SortFunc(blocks, func(x, y netip.Prefix) int { return x.Addr().Compare(y.Addr()) })
		key, _ := json.Marshal(n)
		fmt.Fprintf(&b, "\n    %s: [", key)
		for j, p := range blocks {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", p.String())
		}
		b.WriteByte(']')
	}
	if len(nodes) > 0 {
		b.WriteString("\n  ")
	}
	b.WriteString("}\n}\n")
	return b.Bytes()
}
