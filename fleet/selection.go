package fleet

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/compiler"
)

// A Selection is the subset of nodes a publish writes: all of them (the
// zero value), the nodes named by --nodes, or --canary N of them. The
// ConfigMaps of the other nodes are not sent anything.
type Selection struct {
	Nodes  []string // --nodes, deduplicated, in the order given (ParseNodes)
	Canary int      // --canary; 0 for none, less than 0 for a --canary below 1 (Check refuses it)
}

// Active says whether the selection is a subset: --nodes or --canary.
func (s Selection) Active() bool { return len(s.Nodes) > 0 || s.Canary > 0 }

// Flag names the flag that chose the subset, for messages.
func (s Selection) Flag() string {
	if s.Canary > 0 {
		return fmt.Sprintf("--canary %d", s.Canary)
	}
	return "--nodes " + strings.Join(s.Nodes, ",")
}

// Check validates the selection's flags among themselves and against the
// plans to publish: every node --nodes names must have a plan.
func (s Selection) Check(files []compiler.File, prune bool, dir string) error {
	if s.Canary < 0 {
		return fmt.Errorf("--canary: give the number of nodes to publish to first, 1 or more")
	}
	if !s.Active() {
		return nil
	}
	if prune {
		return fmt.Errorf("--prune with %s: --prune deletes the plan ConfigMaps of nodes that have no plan, which are never in the subset; publish to all nodes (without --nodes or --canary) to prune", s.Flag())
	}
	have := map[string]bool{}
	var all []string
	for _, f := range files {
		if !f.IsPlan() {
			continue
		}
		have[f.Node] = true
		all = append(all, f.Node)
	}
	slices.Sort(all)
	var unknown []string
	for _, n := range s.Nodes {
		if !have[n] {
			unknown = append(unknown, fmt.Sprintf("%q", n))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	const show = 10
	list := strings.Join(all[:min(len(all), show)], ", ")
	if len(all) > show {
		list += fmt.Sprintf(", … (%d in all)", len(all))
	}
	if len(all) == 0 {
		list = "none"
	}
	noun := "node"
	if len(unknown) > 1 {
		noun = "nodes"
	}
	return fmt.Errorf("--nodes: %s has no plan for %s %s; it has plans for the Windows nodes %s (hnsplan plan %s lists them): name nodes among these",
		dir, noun, strings.Join(unknown, ", "), list, dir)
}

// pick returns the nodes to publish to, among nodes (those with a plan,
// in order; publish adds the parts the picked plans name). changed says
// whether a node's plan differs from what its ConfigMap holds (every
// plan, without the cluster): --canary N takes the first N changed nodes
// by name.
func (s Selection) pick(nodes []string, changed func(node string) bool) map[string]bool {
	out := map[string]bool{}
	if !s.Active() {
		for _, n := range nodes {
			out[n] = true
		}
		return out
	}
	if len(s.Nodes) > 0 {
		for _, n := range s.Nodes {
			out[n] = true
		}
		return out
	}
	var cands []string
	for _, n := range nodes {
		if changed(n) {
			cands = append(cands, n)
		}
	}
	slices.Sort(cands)
	for _, n := range cands[:min(len(cands), s.Canary)] {
		out[n] = true
	}
	return out
}

// ParseNodes splits --nodes values (repeatable, comma-separated),
// rejecting empty names and dropping repeats.
func ParseNodes(vals []string) ([]string, error) {
	var out []string
	for _, v := range vals {
		for n := range strings.SplitSeq(v, ",") {
			n = strings.TrimSpace(n)
			if n == "" {
				return nil, fmt.Errorf("--nodes %q: an empty node name; give names separated by commas, such as --nodes win-1,win-2", v)
			}
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out, nil
}
