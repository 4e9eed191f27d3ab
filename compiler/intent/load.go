package intent

import (
	"fmt"
	"os"

	"cuelang.org/go/cue"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

// Options tune Load.
type Options struct {
	// Inventory lists live-state files (--inventory).
	Inventory []string
	// MaxFileSize bounds every file read, in bytes; 0 means
	// DefaultMaxFileSize.
	MaxFileSize int64
}

// A PathError is returned when the intent directory or an inventory file
// cannot be read at all: a usage error, unlike findings about their content.
type PathError struct{ Err error }

func (e *PathError) Error() string { return e.Err.Error() }
func (e *PathError) Unwrap() error { return e.Err }

// Load reads the intent directory dir: its one CUE package, validated
// against the schema, and every Kubernetes manifest below it. It returns
// the intent and every finding, sorted; the intent is usable only if the
// findings hold no error. The error is a *PathError when dir or an
// inventory file cannot be read.
func Load(dir string, opts Options) (*Intent, diag.List, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, nil, &PathError{fmt.Errorf("intent directory: %w", err)}
	}
	if !st.IsDir() {
		return nil, nil, &PathError{fmt.Errorf("intent directory: %s is not a directory", dir)}
	}
	var errs diag.List
	rel := relativeTo()
	in := &Intent{Dir: dir}
	files, err := newInputFiles(dir, opts.MaxFileSize, rel)
	if err != nil {
		return nil, nil, &PathError{fmt.Errorf("intent directory: %w", err)}
	}

	res := loadCUE(newContext(), dir, files, &errs)
	if res.ok {
		data, err := exportJSON(res.checked)
		if err != nil {
			addCUEErrors(err, RuleSchema, rel, &source{user: res.user, rel: rel}, &errs, dir)
		} else {
			in.Cluster = decodeCluster(data, &source{user: res.user, rel: rel}, &errs, false)
			checkNodes(in.Cluster, rel(dir), &errs)
		}
	}
	loadManifests(dir, files, &in.Manifests, &errs)
	in.Lock = readLock(dir, files, &errs)
	if len(opts.Inventory) > 0 {
		inv, err := loadInventory(opts.Inventory, files.max, &errs)
		if err != nil {
			return nil, nil, &PathError{err}
		}
		in.Inventory = inv
	}
	errs.Sort()
	return in, errs, nil
}

// checkNodes makes an intent without nodes an error: it compiles to no
// plan, and compile would then remove every plan it wrote before. Such an
// intent is far more often a file gone missing from the package than a
// cluster without nodes.
func checkNodes(c *Cluster, dir string, errs *diag.List) {
	if len(c.Nodes) > 0 {
		return
	}
	// Where the user wrote nodes: {}; without it, the directory, not the
	// nearest enclosing value (one arbitrary file of many that set cluster).
	pos := diag.Pos{File: dir}
	if c.src != nil {
		if v := c.src.user.LookupPath(cue.ParsePath("cluster.nodes")); v.Exists() && v.Pos().IsValid() {
			pos = c.src.tokenPos(v.Pos())
		}
	}
	errs.Errorf(RuleNoNodes, pos, "cluster.nodes", "the intent lists no node: it would compile to no plan; list the cluster's nodes under cluster.nodes (if a file sets them, check that it is in %s and has the package clause of the others)", dir)
}
