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
	Node string
	Name string // "<node>.json"
	Data []byte
}

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
				files[i], errs[i] = File{Node: plans[i].Node, Name: plans[i].Node + ".json", Data: data}, err
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

// WriteDir writes files and their index into dir, each by atomic rename
// (an agent watching the directory never sees half a plan). Plans that the
// previous index listed and this one does not are removed; no other file
// is touched.
func WriteDir(dir, cluster string, files []File) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	idx := plan.Index{FormatVersion: plan.FormatVersion, Kind: plan.IndexKind, Cluster: cluster, Plans: []plan.IndexEntry{}}
	keep := map[string]bool{}
	for _, f := range files {
		if err := WriteFileAtomic(filepath.Join(dir, f.Name), f.Data); err != nil {
			return err
		}
		var p struct {
			Digest string `json:"digest"`
		}
		_ = json.Unmarshal(f.Data, &p)
		idx.Plans = append(idx.Plans, plan.IndexEntry{Node: f.Node, File: f.Name, Digest: p.Digest})
		keep[f.Name] = true
	}
	if old, err := os.ReadFile(filepath.Join(dir, plan.IndexFile)); err == nil {
		var prev plan.Index
		if json.Unmarshal(old, &prev) == nil && prev.Kind == plan.IndexKind {
			for _, e := range prev.Plans {
				if name := filepath.Base(e.File); !keep[name] && name == e.File {
					if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
						return err
					}
				}
			}
		}
	}
	data, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(dir, plan.IndexFile), append(data, '\n'))
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
