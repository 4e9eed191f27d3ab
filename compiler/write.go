package compiler

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// File is an encoded plan.
type File struct {
	Node      string
	Name      string // "<node>.json"
	Digest    string
	Data      []byte
	Signature []byte // the detached signature of Data (plan.Sign), or nil
}

// A Signer returns the detached signature of a plan file's bytes
// (plan.Sign with the signing key).
type Signer func(data []byte) []byte

// EncodePlans encodes plans on all CPUs, keeping their order.
func EncodePlans(plans []*plan.NodePlan) ([]File, error) {
	files := make([]File, len(plans))
	errs := make([]error, len(plans))
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range next {
				data, err := plan.Encode(plans[i])
				files[i], errs[i] = File{Node: plans[i].Node, Name: plans[i].Node + ".json", Digest: plans[i].Digest, Data: data}, err
			}
		})
	}
	for i := range plans {
		next <- i
	}
	close(next)
	wg.Wait()
	return files, errors.Join(errs...)
}

// Removals are the plans of a previous compile that a new one drops.
type Removals struct {
	Existing int               // plans the previous index lists
	Stale    []plan.IndexEntry // those whose node has no plan now, in index order
}

// StalePlans reads the index in dir (if any) and returns which of the plans
// it lists are not among plans: the files WritePlans would remove. A
// missing or unreadable index, or one that is not a plan index, lists none:
// WritePlans then removes nothing. Only entries that name a file directly
// in dir count; WritePlans never removes anything else.
func StalePlans(dir string, plans []*plan.NodePlan) (Removals, error) {
	old, err := os.ReadFile(filepath.Join(dir, plan.IndexFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Removals{}, nil
	} else if err != nil {
		return Removals{}, err
	}
	var prev plan.Index
	if json.Unmarshal(old, &prev) != nil || prev.Kind != plan.IndexKind {
		return Removals{}, nil
	}
	keep := map[string]bool{}
	for _, p := range plans {
		keep[p.Node+".json"] = true
	}
	r := Removals{Existing: len(prev.Plans)}
	for _, e := range prev.Plans {
		if name := filepath.Base(e.File); !keep[name] && name == e.File {
			r.Stale = append(r.Stale, e)
		}
	}
	return r, nil
}

// WritePlans encodes plans and writes them with their index into dir, on
// all CPUs, each file by atomic rename (an agent watching the directory
// never sees half a plan). Plans that the previous index listed and this
// one does not (StalePlans) are removed; no other file is touched. It
// returns the files it removed, which the caller should report. With
// sign, each plan's signature is written beside it (plan.SignatureFile);
// without, a signature left there by an earlier signed compile is
// removed, since it no longer signs the plan. A plan is
// dropped from memory once written, so a large cluster's plans are never
// all held encoded at once.
func WritePlans(dir, cluster string, plans []*plan.NodePlan, sign Signer) (removed []string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	stale, err := StalePlans(dir, plans)
	if err != nil {
		return nil, err
	}
	entries := make([]plan.IndexEntry, len(plans))
	errs := make([]error, len(plans))
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) + 2 { // +2: overlap encoding with I/O
		wg.Go(func() {
			for i := range next {
				p := plans[i]
				data, err := plan.Encode(p)
				if err == nil {
					err = writeSignature(filepath.Join(dir, p.Node+".json"), data, sign)
				}
				if err == nil {
					err = WriteFileAtomic(filepath.Join(dir, p.Node+".json"), data)
				}
				entries[i], errs[i] = plan.IndexEntry{Node: p.Node, File: p.Node + ".json", Digest: p.Digest}, err
			}
		})
	}
	for i := range plans {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, e := range stale.Stale {
		err := removeSignature(filepath.Join(dir, e.File))
		if err == nil {
			err = os.Remove(filepath.Join(dir, e.File))
		}
		switch {
		case err == nil:
			removed = append(removed, e.File)
		case !errors.Is(err, fs.ErrNotExist):
			return removed, err
		}
	}
	idx := plan.Index{FormatVersion: plan.FormatVersion, Kind: plan.IndexKind, Cluster: cluster, Plans: entries}
	data, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return removed, err
	}
	return removed, WriteFileAtomic(filepath.Join(dir, plan.IndexFile), append(data, '\n'))
}

// writeSignature writes the signature of the plan file name, with data,
// or removes a stale one when sign is nil. It runs before the plan is
// renamed into place: an agent that reads the pair in between sees a
// mismatch, refuses it, and reads the pair again once the directory is
// quiet.
func writeSignature(name string, data []byte, sign Signer) error {
	if sign == nil {
		return removeSignature(name)
	}
	return WriteFileAtomic(plan.SignatureFile(name), sign(data))
}

// removeSignature removes the signature of the plan file name, if any.
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
