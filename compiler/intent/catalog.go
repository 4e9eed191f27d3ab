package intent

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/load"

	"github.com/hnsplan/hnsplan/policies"
)

var catalog struct {
	once  sync.Once
	rules []policies.Rule
	err   error
}

// Catalog returns the rule catalog of policies/, sorted by id. It is
// evaluated once per process: it is embedded, so it cannot change.
func Catalog() ([]policies.Rule, error) {
	catalog.once.Do(func() { catalog.rules, catalog.err = loadCatalog() })
	return catalog.rules, catalog.err
}

func loadCatalog() ([]policies.Rule, error) {
	ctx := newContext()
	insts := load.Instances([]string{"."}, &load.Config{
		FS:         policies.FS,
		Dir:        "/",
		FromFSPath: func(p string) string { return "hnsplan:policies/" + strings.TrimPrefix(p, "/") },
	})
	if err := insts[0].Err; err != nil {
		return nil, fmt.Errorf("policies: %s", cueerrors.Details(err, nil))
	}
	v := ctx.BuildInstance(insts[0])
	if err := v.Validate(cue.Concrete(true)); err != nil {
		return nil, fmt.Errorf("policies: %s", cueerrors.Details(err, nil))
	}
	data, err := v.LookupPath(cue.ParsePath("rules")).MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("policies: %v", err)
	}
	var byID map[string]policies.Rule
	if err := json.Unmarshal(data, &byID); err != nil {
		return nil, fmt.Errorf("policies: %v", err)
	}
	rules := make([]policies.Rule, 0, len(byID))
	for _, r := range byID {
		rules = append(rules, r)
	}
	slices.SortFunc(rules, func(a, b policies.Rule) int { return strings.Compare(a.ID, b.ID) })
	return rules, nil
}
