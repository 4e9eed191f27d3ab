package intent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

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
	// CUETimeout and CUEMemory bound the evaluation of the CUE package,
	// in time and in bytes of heap; 0 means DefaultCUETimeout and
	// DefaultCUEMemory. Over either, Load returns a *BudgetError, after
	// which the process must end (see BudgetError).
	CUETimeout time.Duration
	CUEMemory  int64
}

// cueFinding is where a CUE evaluation over its budget is reported: the
// package's one file, or the directory, with the files as the message.
func cueFinding(dir string, rel func(string) string) diag.Finding {
	names, _ := filepath.Glob(filepath.Join(dir, "*.cue"))
	f := diag.Finding{Rule: RuleBudget, Severity: diag.Error, Pos: diag.Pos{File: rel(dir)}, Message: rel(dir)}
	if len(names) == 1 {
		f.Pos.File, f.Message = rel(names[0]), rel(names[0])
	} else if len(names) > 1 {
		for i, n := range names {
			names[i] = rel(n)
		}
		f.Message = strings.Join(names, ", ")
	}
	return f
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
// inventory file cannot be read, and a *BudgetError when the CUE
// evaluation exceeded its budget (the caller must then exit).
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

	// CUE is evaluated under a budget of time and memory: a hostile
	// intent (a pull request) must not take the CI runner with it.
	var res cueResult
	err = evaluate(opts.budget(), func() diag.Finding { return cueFinding(dir, rel) }, func() {
		res = loadCUE(newContext(), dir, files, &errs)
		if res.ok {
			data, err := exportJSON(res.checked)
			if err != nil {
				addCUEErrors(err, RuleSchema, rel, &source{user: res.user, rel: rel}, &errs, dir)
			} else {
				in.Cluster = decodeCluster(data, &source{user: res.user, rel: rel}, &errs, false)
				checkNodes(in.Cluster, rel(dir), &errs)
			}
		}
	})
	if err != nil {
		return nil, nil, err
	}
	loadManifests(dir, files, &in.Manifests, &errs)
	// The Calico resources of the intent set the cluster's settings too.
	if in.Cluster != nil {
		mergeCalico(in.Cluster, &in.Manifests.Calico, &errs)
	}
	requireStrictAffinity(res.user, &source{user: res.user, rel: rel}, &in.Manifests.Calico, in.Cluster, &errs)
	requirePoolCIDRs(res.user, &source{user: res.user, rel: rel}, &in.Manifests.Calico, in.Cluster, &errs)
	requireServiceCIDRs(in.Cluster, &errs)
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
