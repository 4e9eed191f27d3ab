package compiler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/internal/crash"
)

// File is an encoded plan, or a shared part the plans name.
type File struct {
	Node      string // the plan's node; "" for a part
	Part      string // the part's name; "" for a plan
	Kind      string // plan.Kind, or the part's kind
	Name      string // plan.FileName(Node), or plan.PartFileName(Part)
	Digest    string
	Data      []byte
	Signature []byte // the detached signature of Data (plan.Sign), or nil
}

// partFiles encodes the parts plans share and the plans (plan.EncodeAll,
// which sets the plans' references to the parts and their digests). The
// parts come in the order they are written: shards and chunks, then the
// route tables' heads, so that a reader never finds a head, or a plan,
// before what it names; the plans' encodings in plans' order. With sign,
// heads are signed: a plan names its route table by key, not digest, so
// the head's own signature is what proves its shards (which it names by
// digest, and which record the plans compiled with it).
func partFiles(plans []*plan.NodePlan, sign Signer) (files []File, planData [][]byte, err error) {
	defer crash.Capture(&err)
	parts, planData, err := plan.EncodeAll(plans)
	if err != nil {
		return nil, nil, err
	}
	files = make([]File, 0, len(parts))
	for _, heads := range []bool{false, true} {
		for _, p := range parts {
			if (p.Kind == plan.KindRouteTable) != heads {
				continue
			}
			f := File{Part: p.Name, Kind: p.Kind, Name: plan.PartFileName(p.Name), Digest: p.Digest, Data: p.Data}
			if heads && sign != nil {
				f.Signature = sign(p.Data)
			}
			files = append(files, f)
		}
	}
	return files, planData, nil
}

// IsPlan reports whether f is a plan, not a part.
func (f File) IsPlan() bool { return f.Part == "" }

// A Signer returns the detached signature of a plan file's bytes
// (plan.Sign with the signing key).
type Signer func(data []byte) []byte

// EncodePlans encodes the parts plans share (first, in the order they are
// written) and the plans, keeping their order.
func EncodePlans(plans []*plan.NodePlan) ([]File, error) {
	parts, data, err := partFiles(plans, nil)
	if err != nil {
		return nil, err
	}
	files := make([]File, len(plans))
	for i, p := range plans {
		files[i] = File{Node: p.Node, Kind: plan.Kind, Name: plan.FileName(p.Node), Digest: p.Digest, Data: data[i]}
	}
	return append(parts, files...), nil
}

// Removals are the plans of a previous compile that a new one drops.
type Removals struct {
	Existing int               // plans the previous index lists
	Stale    []plan.IndexEntry // those whose node has no plan now, in index order
	// Parts are the parts the previous index lists (those that are part
	// files holding that part); WritePlans removes those the new plans do
	// not name.
	Parts []plan.IndexPart
	// Legacy is set when the previous index is plan.LegacyIndexFile, which
	// WritePlans replaces by plan.IndexFile.
	Legacy bool
}

// StalePlans reads the index in dir (if any) and returns which of the plans
// it lists are not among plans: the files WritePlans would remove. A
// missing or unreadable index, or one that is not a plan index, lists none:
// WritePlans then removes nothing. An entry counts only if it names a plan
// file as compile writes them (plan.IndexEntry.IsPlanFile: "<node>.json",
// directly in dir) and that file is a regular file holding the plan of
// that node: a stale or crafted index can make compile remove nothing
// else (not README.md, not go.mod, not "..").
func StalePlans(dir string, plans []*plan.NodePlan) (Removals, error) {
	prev, name, err := readIndex(dir)
	if err != nil || name == "" {
		return Removals{}, nil
	}
	keep := map[string]bool{}
	for _, p := range plans {
		keep[p.Node] = true
	}
	r := Removals{Existing: len(prev.Plans), Legacy: name == plan.LegacyIndexFile}
	for _, e := range prev.Plans {
		if !keep[e.Node] && e.IsPlanFile() && isPlanOf(filepath.Join(dir, e.File), e.Node) {
			r.Stale = append(r.Stale, e)
		}
	}
	for _, e := range prev.Parts {
		if e.IsPartFile() && isPartOf(filepath.Join(dir, e.File), e.Name) {
			r.Parts = append(r.Parts, e)
		}
	}
	return r, nil
}

// readIndex reads the index of dir: plan.IndexFile, else the legacy
// plan.LegacyIndexFile if it is a plan index (in a directory that has
// IndexFile, "index.json" is the plan of a node named "index"). name is
// "" when dir has neither. An IndexFile that is not a plan index is an
// error.
func readIndex(dir string) (idx plan.Index, name string, err error) {
	for _, name := range []string{plan.IndexFile, plan.LegacyIndexFile} {
		path := filepath.Join(dir, name)
		data, err := readRegular(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return idx, name, err
		}
		if json.Unmarshal(data, &idx) != nil || idx.Kind != plan.IndexKind {
			if name == plan.LegacyIndexFile {
				continue
			}
			return idx, name, fmt.Errorf("%s is not a plan index (kind %s)", path, plan.IndexKind)
		}
		return idx, name, nil
	}
	return plan.Index{}, "", nil
}

// readRegular reads path, a regular file directly in its directory (not a
// symlink, which could lead out of it), of at most plan.MaxSize bytes.
func readRegular(path string) ([]byte, error) {
	return plan.ReadRegularFile(path, plan.MaxSize)
}

// isPlanOf reports whether path is a regular file holding a NodePlan of
// node.
func isPartOf(path, name string) bool {
	data, err := readRegular(path)
	if err != nil {
		return false
	}
	var head struct{ Kind, Name string }
	return json.Unmarshal(data, &head) == nil && head.Name == name &&
		(head.Kind == plan.KindRouteTable || head.Kind == plan.KindRouteShard || head.Kind == plan.KindProgramChunk)
}

func isPlanOf(path, node string) bool {
	data, err := readRegular(path)
	if err != nil {
		return false
	}
	var head struct{ Kind, Node string }
	return json.Unmarshal(data, &head) == nil && head.Kind == plan.Kind && head.Node == node
}

// Temporary files of WritePlans are ".hnsplan-<digits>.tmp": a fixed
// length whatever the node's name, and starting with '.', which no node
// name (so no plan file) does. A compile removes those a killed one left.
const (
	tempPrefix = ".hnsplan-"
	tempSuffix = ".tmp"
)

func isTempName(name string) bool {
	mid, ok := strings.CutPrefix(name, tempPrefix)
	if mid, ok = strings.CutSuffix(mid, tempSuffix); !ok || mid == "" {
		return false
	}
	return strings.Trim(mid, "0123456789") == ""
}

// removeTemps removes the temporary files a killed WritePlans left in dir:
// regular files named by its own pattern, and nothing else. Concurrent
// compiles into one directory are not supported (their indexes race too).
func removeTemps(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Type().IsRegular() && isTempName(e.Name()) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// createTemp is os.CreateTemp; tests make it fail as a full disk does.
var createTemp = os.CreateTemp

// writeTemp writes data to a new temporary file in dir and returns its
// name.
func writeTemp(dir string, data []byte) (string, error) {
	f, err := createTemp(dir, tempPrefix+"*"+tempSuffix)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// writeChanged writes data to a temporary file in dir, to be renamed to
// name (renameChanged), and returns its name — or "" when name is already
// a regular file holding data, which is then left as it is, modification
// time and all: a recompile that adds one node rewrites only the files
// that change (its plan, its route shard, the route table's head and the
// index), and creating thousands of files is most of a large compile's
// system time.
func writeChanged(dir, name string, data []byte) (string, error) {
	if old, err := readRegular(name); err == nil && bytes.Equal(old, data) {
		return "", nil
	}
	return writeTemp(dir, data)
}

// renameChanged renames the temporary file tmp of writeChanged to name;
// "" (name already holds the data) is nothing to do.
func renameChanged(tmp, name string) error {
	if tmp == "" {
		return nil
	}
	return os.Rename(tmp, name)
}

// WritePlans encodes plans and writes them with their index into dir, all
// or nothing: every plan is first written to a temporary file, on all
// CPUs, and only when all are written are they renamed into place, each
// by atomic rename (an agent watching the directory never sees half a
// plan). A node name that cannot be a plan file (plan.CheckNodeName) or a
// failed write leaves dir as it was, but for the temporary files of a
// killed compile, which every WritePlans removes first. Then the plans
// that the previous index listed and this one does not (StalePlans) are
// removed, and the index written; no other file is touched. It returns the
// files it removed, which the caller should report. With sign, each plan's
// signature is written beside it (plan.SignatureFile), in the same all or
// nothing way and renamed into place before its plan; without, a signature
// left there by an earlier signed compile is removed, since it no longer
// signs the plan. A plan is dropped from memory once written, so a large
// cluster's plans are never all held encoded at once. A file (plan, part,
// signature or index) that already holds what would be written is left as
// it is (writeChanged): compiling twice touches nothing the second time.
func WritePlans(dir, cluster string, plans []*plan.NodePlan, sign Signer) (removed []string, err error) {
	for _, p := range plans {
		if err := plan.CheckNodeName(p.Node); err != nil {
			return nil, fmt.Errorf("no plan written to %s: %w", dir, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := removeTemps(dir); err != nil {
		return nil, err
	}
	stale, err := StalePlans(dir, plans)
	if err != nil {
		return nil, err
	}
	parts, planData, err := partFiles(plans, sign)
	if err != nil {
		return nil, fmt.Errorf("no plan written to %s: %w", dir, err)
	}
	// A temporary file "" is a file that is already in place (unchanged).
	partTemps, partSigTemps := make([]string, len(parts)), make([]string, len(parts))
	for i, f := range parts {
		name := filepath.Join(dir, f.Name)
		if f.Signature != nil {
			if partSigTemps[i], err = writeChanged(dir, plan.SignatureFile(name), f.Signature); err != nil {
				break
			}
		}
		if partTemps[i], err = writeChanged(dir, name, f.Data); err != nil {
			break
		}
	}
	dropPartTemps := func(from int) {
		for _, t := range append(partTemps[from:], partSigTemps[from:]...) {
			if t != "" {
				os.Remove(t)
			}
		}
	}
	if err != nil {
		dropPartTemps(0)
		return nil, fmt.Errorf("no plan written to %s: %w", dir, err)
	}
	entries := make([]plan.IndexEntry, len(plans))
	temps := make([]string, len(plans))
	sigTemps := make([]string, len(plans))
	errs := make([]error, len(plans))
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) + 2 { // +2: overlap the writes
		wg.Go(func() {
			for i := range next {
				func() {
					defer crash.Capture(&errs[i])
					p, data := plans[i], planData[i]
					name := filepath.Join(dir, plan.FileName(p.Node))
					var err error
					if sign != nil {
						sigTemps[i], err = writeChanged(dir, plan.SignatureFile(name), sign(data))
					}
					if err == nil {
						temps[i], err = writeChanged(dir, name, data)
					}
					entries[i], errs[i] = plan.IndexEntry{Node: p.Node, File: plan.FileName(p.Node)}, err
				}()
			}
		})
	}
	for i := range plans {
		next <- i
	}
	close(next)
	wg.Wait()
	dropTemps := func(from int) {
		for _, t := range append(temps[from:], sigTemps[from:]...) {
			if t != "" {
				os.Remove(t)
			}
		}
	}
	if err := joinByCause(errs); err != nil {
		dropTemps(0)
		dropPartTemps(0)
		return nil, fmt.Errorf("no plan written to %s: %w", dir, err)
	}
	// The parts first, in partFiles' order: a reader finds what a head or
	// a plan names before the head or the plan.
	for i, f := range parts {
		name := filepath.Join(dir, f.Name)
		if err := place(name, partTemps[i], partSigTemps[i], f.Signature != nil); err != nil {
			dropPartTemps(i)
			dropTemps(0)
			return nil, fmt.Errorf("write %s: %w", name, err)
		}
	}
	for i, e := range entries {
		name := filepath.Join(dir, e.File)
		if err := place(name, temps[i], sigTemps[i], sign != nil); err != nil {
			dropTemps(i)
			return nil, fmt.Errorf("write %s: %w", name, err)
		}
	}
	for _, e := range stale.Stale {
		if err := removeWithSignature(dir, e.File, &removed); err != nil {
			return removed, err
		}
	}
	// Parts no plan names any more: the plans that named them are gone.
	keep := map[string]bool{}
	idxParts := make([]plan.IndexPart, 0, len(parts))
	for _, f := range parts {
		keep[f.Part] = true
		idxParts = append(idxParts, plan.IndexPart{Name: f.Part, Kind: f.Kind, File: f.Name, Digest: f.Digest})
	}
	slices.SortFunc(idxParts, func(a, b plan.IndexPart) int { return strings.Compare(a.Name, b.Name) })
	for _, e := range stale.Parts {
		if keep[e.Name] {
			continue
		}
		if err := removeWithSignature(dir, e.File, &removed); err != nil {
			return removed, err
		}
	}
	idx := plan.Index{FormatVersion: plan.FormatVersion, Kind: plan.IndexKind, Cluster: cluster, Plans: entries, Parts: idxParts}
	data, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return removed, err
	}
	tmp, err := writeChanged(dir, filepath.Join(dir, plan.IndexFile), append(data, '\n'))
	if err == nil {
		if err = renameChanged(tmp, filepath.Join(dir, plan.IndexFile)); err != nil && tmp != "" {
			os.Remove(tmp)
		}
	}
	if err != nil {
		return removed, fmt.Errorf("write %s: %w", filepath.Join(dir, plan.IndexFile), err)
	}
	if stale.Legacy {
		// The legacy index, unless a node named "index" now has its plan there.
		if _, name, err := readIndex(dir); err == nil && name == plan.IndexFile {
			if data, err := readRegular(filepath.Join(dir, plan.LegacyIndexFile)); err == nil {
				var old plan.Index
				if json.Unmarshal(data, &old) == nil && old.Kind == plan.IndexKind {
					os.Remove(filepath.Join(dir, plan.LegacyIndexFile))
				}
			}
		}
	}
	return removed, nil
}

// place renames the written temp into name, its signature first (a
// reader of the new file finds its signature already there), or, unsigned,
// removes the signature an earlier signed compile left: it would not sign
// the new bytes.
func place(name, temp, sigTemp string, signed bool) error {
	var err error
	if signed {
		err = renameChanged(sigTemp, plan.SignatureFile(name))
	} else {
		err = removeSignature(name)
	}
	if err == nil {
		err = renameChanged(temp, name)
	}
	return err
}

// removeWithSignature removes file of dir and its signature, adding file
// to removed; a file already gone is no error.
func removeWithSignature(dir, file string, removed *[]string) error {
	err := removeSignature(filepath.Join(dir, file))
	if err == nil {
		err = os.Remove(filepath.Join(dir, file))
	}
	switch {
	case err == nil:
		*removed = append(*removed, file)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	return nil
}

// removeSignature removes the signature file of the plan file name, if any.
func removeSignature(name string) error {
	if err := os.Remove(plan.SignatureFile(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// WriteFileAtomic writes data to name through a temporary file in the same
// directory and a rename.
func WriteFileAtomic(name string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// ReadPlanDir reads the plan directory dir, as compile writes it: its
// index (plan.IndexFile, or the legacy plan.LegacyIndexFile) and every
// plan the index lists, each verified by plan.Decode and returned with its
// bytes. ok is false, with no error, when dir has no index. An entry that
// is not a plan file of dir ("<node>.json", no path, plan.CheckNodeName),
// a plan file that is a symlink or not a regular file, larger than
// plan.MaxSize, or that does not verify, and two entries for one node, are
// errors: the index never leads a reader out of dir. A plan's signature
// file (plan.SignatureFile), if there, is returned with it, read under the
// same rules; it is not verified here.
func ReadPlanDir(dir string) (files []File, plans []*plan.NodePlan, ok bool, err error) {
	idx, name, err := readIndex(dir)
	if err != nil {
		return nil, nil, true, err
	}
	if name == "" {
		return nil, nil, false, nil
	}
	var parts plan.Parts
	seenPart := map[string]bool{}
	for _, e := range idx.Parts {
		if !e.IsPartFile() {
			return nil, nil, true, fmt.Errorf("%s: the part entry %q names %q, which is not a part file of this directory (_<part>.json, for a part name compile gives)", filepath.Join(dir, name), e.Name, e.File)
		}
		if seenPart[e.Name] {
			return nil, nil, true, fmt.Errorf("%s: part %s is listed twice", filepath.Join(dir, name), e.Name)
		}
		seenPart[e.Name] = true
		path := filepath.Join(dir, e.File)
		data, err := plan.ReadRegularFile(path, plan.MaxPartSize)
		if err != nil {
			return nil, nil, true, err
		}
		var part any
		switch e.Kind {
		case plan.KindRouteTable:
			part, err = plan.DecodeRouteTable(data, e.Name)
		case plan.KindRouteShard:
			part, err = plan.DecodeRouteShard(data, e.Name)
		case plan.KindProgramChunk:
			part, err = plan.DecodeProgramChunk(data, e.Name)
		default:
			err = fmt.Errorf("unknown part kind %q", e.Kind)
		}
		if err != nil {
			return nil, nil, true, fmt.Errorf("%s: %w", path, err)
		}
		sig, err := readRegular(plan.SignatureFile(path))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, true, err
		}
		parts.Add(part)
		files = append(files, File{Part: e.Name, Kind: e.Kind, Name: e.File, Digest: e.Digest, Data: data, Signature: sig})
	}
	seen := map[string]bool{}
	for _, e := range idx.Plans {
		if !e.IsPlanFile() {
			return nil, nil, true, fmt.Errorf("%s: the entry of node %q names %q, which is not a plan file of this directory (<node>.json, for a Kubernetes node name)", filepath.Join(dir, name), e.Node, e.File)
		}
		if seen[e.Node] {
			return nil, nil, true, fmt.Errorf("%s: node %s is listed twice", filepath.Join(dir, name), e.Node)
		}
		seen[e.Node] = true
		data, err := readRegular(filepath.Join(dir, e.File))
		if err != nil {
			return nil, nil, true, err
		}
		p, err := plan.Decode(data, e.Node)
		if errors.Is(err, plan.ErrMajorVersion) {
			return nil, nil, true, fmt.Errorf("%s: %w: compile its intent again with this hnsplan", filepath.Join(dir, e.File), err)
		}
		if err != nil {
			return nil, nil, true, fmt.Errorf("%s: %w", filepath.Join(dir, e.File), err)
		}
		sig, err := readRegular(plan.SignatureFile(filepath.Join(dir, e.File)))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, true, err
		}
		if err := parts.Assemble(p); err != nil {
			return nil, nil, true, fmt.Errorf("%s: %w", filepath.Join(dir, e.File), err)
		}
		files = append(files, File{Node: p.Node, Kind: plan.Kind, Name: e.File, Digest: p.Digest, Data: data, Signature: sig})
		plans = append(plans, p)
	}
	return files, plans, true, nil
}
