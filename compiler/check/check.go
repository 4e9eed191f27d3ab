// Package check evaluates the Windows constraint rules of the catalog
// (policies/, CONSTRAINTS.md) against a loaded intent. Every finding names
// its rule id, the node it is about, the CUE path and the file:line:col of
// the value that causes it — for a default, of the node or pool that
// inherits it. Severities come from the catalog and cluster.constraints.
//
// No check is quadratic in nodes: nodes are grouped (by network, by pool)
// before they are compared.
package check

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/selector"
	"github.com/hnsplan/hnsplan/policies"
)

// RuleUnknownRule is reported for an id in cluster.constraints that the
// catalog does not have.
const RuleUnknownRule = "constraints-unknown-rule"

// Catalog indexes the rules of policies/ by id.
type Catalog map[string]policies.Rule

// NewCatalog indexes rules.
func NewCatalog(rules []policies.Rule) Catalog {
	c := make(Catalog, len(rules))
	for _, r := range rules {
		c[r.ID] = r
	}
	return c
}

// checker holds what every rule needs: the intent, the catalog and facts
// derived once (which nodes are Windows, which pools serve them).
type checker struct {
	in       *intent.Intent
	c        *intent.Cluster
	cat      Catalog
	findings diag.List

	windows, linux []*intent.Node
	nodeByName     map[string]*intent.Node
	labels         map[string]map[string]string // effective node labels
	pools          []poolInfo                   // enabled pools with a valid selector
	winPools       []*poolInfo                  // pools matching at least one Windows node
	poolsOf        map[string][]*poolInfo       // enabled pools matching a node
}

type poolInfo struct {
	*intent.Pool
	sel      selector.Selector
	windows  []*intent.Node // matched Windows nodes
	linux    []*intent.Node // matched Linux nodes
	isWindow bool
}

// Run evaluates every vet-phase rule and returns the findings, unsorted.
// It needs a cluster that loaded without error.
func Run(in *intent.Intent, cat Catalog) diag.List {
	x := &checker{in: in, c: in.Cluster, cat: cat, nodeByName: map[string]*intent.Node{},
		labels: map[string]map[string]string{}, poolsOf: map[string][]*poolInfo{}}
	x.derive()
	for _, family := range families {
		family(x)
	}
	return x.findings
}

// families are the rule families in catalog order.
var families = []func(*checker){encapsulation, ipam, bgp, nat, platform, services}

// derive computes the facts shared by the rules.
func (x *checker) derive() {
	for i := range x.c.Nodes {
		n := &x.c.Nodes[i]
		x.nodeByName[n.Name] = n
		if n.IsWindows() {
			x.windows = append(x.windows, n)
		} else {
			x.linux = append(x.linux, n)
		}
		x.labels[n.Name] = NodeLabels(n)
	}
	for i := range x.c.Pools {
		p := &x.c.Pools[i]
		sel, err := selector.Parse(p.NodeSelector)
		if err != nil {
			x.findings.Add(diag.Finding{Rule: "schema", Severity: diag.Error, Path: path("pools", p.Name, "nodeSelector"),
				Pos: x.c.Pos("pools", p.Name, "nodeSelector"), Message: fmt.Sprintf("nodeSelector is not a Calico selector: %v", err)})
			continue
		}
		if p.Disabled {
			continue
		}
		x.pools = append(x.pools, poolInfo{Pool: p, sel: sel})
	}
	// A selector's verdict depends only on the labels it names: group the
	// nodes by their values of those labels and evaluate each pool once per
	// group, not once per node.
	keySet := map[string]bool{}
	for _, p := range x.pools {
		for _, k := range p.sel.LabelKeys() {
			keySet[k] = true
		}
	}
	keys := sortedKeys(keySet)
	groups := map[string][]*intent.Node{}
	var order []string
	var sig strings.Builder
	for i := range x.c.Nodes {
		n := &x.c.Nodes[i]
		sig.Reset()
		l := x.labels[n.Name]
		for _, k := range keys {
			if v, ok := l[k]; ok {
				fmt.Fprintf(&sig, "%d:%s=%s;", len(k), k, v)
			} else {
				fmt.Fprintf(&sig, "%d:%s!;", len(k), k)
			}
		}
		g := sig.String()
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], n)
	}
	for i := range x.pools {
		p := &x.pools[i]
		for _, g := range order {
			members := groups[g]
			if !p.sel.Evaluate(x.labels[members[0].Name]) {
				continue
			}
			for _, n := range members {
				x.poolsOf[n.Name] = append(x.poolsOf[n.Name], p)
				if n.IsWindows() {
					p.windows = append(p.windows, n)
				} else {
					p.linux = append(p.linux, n)
				}
			}
		}
		if len(p.windows) > 0 {
			p.isWindow = true
			x.winPools = append(x.winPools, p)
		}
	}
	// Nodes in name order within each pool, as in the intent.
	for i := range x.pools {
		slices.SortFunc(x.pools[i].windows, byName)
		slices.SortFunc(x.pools[i].linux, byName)
	}
}

func byName(a, b *intent.Node) int { return strings.Compare(a.Name, b.Name) }

// NodeLabels returns the labels a node carries in Kubernetes: its own plus
// those the kubelet sets (kubernetes.io/os, kubernetes.io/hostname), which
// pool node selectors commonly use.
func NodeLabels(n *intent.Node) map[string]string {
	l := make(map[string]string, len(n.Labels)+2)
	l["kubernetes.io/os"] = n.OS
	l["kubernetes.io/hostname"] = n.Name
	maps.Copy(l, n.Labels)
	return l
}

// hasWindows reports whether the cluster has Windows nodes: most rules
// are about them only.
func (x *checker) hasWindows() bool { return len(x.windows) > 0 }

// report adds a finding of rule id about node (may be ""), at the CUE path
// below `cluster`.
func (x *checker) report(id string, node string, at []any, format string, args ...any) {
	x.reportAt(id, node, x.c.Pos(at...), path(at...), format, args...)
}

// reportAt adds a finding at a position outside the CUE intent (a manifest,
// the inventory, the lock file).
func (x *checker) reportAt(id, node string, pos diag.Pos, dataPath, format string, args ...any) {
	r, ok := x.cat[id]
	if !ok {
		panic("check: rule " + id + " is not in the catalog")
	}
	sev, err := diag.ParseSeverity(r.Severity)
	if err != nil {
		panic("check: rule " + id + ": " + err.Error())
	}
	x.findings.Add(diag.Finding{Rule: id, Severity: sev, Node: node, Path: dataPath,
		Pos: pos, Message: fmt.Sprintf(format, args...)})
}

// path formats a path below `cluster` as the loader does.
func path(at ...any) string { return intent.Path(at...) }

// Override applies cluster.constraints to findings: a rule set to "off"
// is dropped, any other value replaces the severity. An id the catalog does
// not know, or a loader rule (which cannot be relaxed), is itself an error.
func Override(findings diag.List, c *intent.Cluster, cat Catalog) diag.List {
	if c == nil || len(c.Constraints) == 0 {
		return findings
	}
	var out diag.List
	set := map[string]string{}
	for _, id := range slices.Sorted(maps.Keys(c.Constraints)) {
		sev := c.Constraints[id]
		r, ok := cat[id]
		switch {
		case !ok:
			out.Add(diag.Finding{Rule: RuleUnknownRule, Severity: diag.Error, Path: path("constraints", id), Pos: c.Pos("constraints", id),
				Message: fmt.Sprintf("no rule has the id %q%s; `hnsplan rules` lists them", id, suggest(id, cat))})
		case !r.Overridable():
			out.Add(diag.Finding{Rule: RuleUnknownRule, Severity: diag.Error, Path: path("constraints", id), Pos: c.Pos("constraints", id),
				Message: fmt.Sprintf("rule %q reports input that cannot be read; its severity cannot be changed", id)})
		default:
			set[id] = sev
		}
	}
	for _, f := range findings {
		switch sev, ok := set[f.Rule]; {
		case !ok:
		case sev == "off":
			continue
		default:
			f.Severity, _ = diag.ParseSeverity(sev)
		}
		out = append(out, f)
	}
	return out
}

// suggest names the catalog id closest to id.
func suggest(id string, cat Catalog) string {
	if best := diag.Closest(id, slices.Sorted(maps.Keys(cat)), len(id)/2); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}

// names lists node names, shortened past five.
func names(nodes []*intent.Node) string {
	return shortList(nodes, 5, func(n *intent.Node) string { return n.Name })
}

// shortList joins the names of items, the first max of them and a count
// of the rest.
func shortList[T any](items []T, max int, name func(T) string) string {
	var s []string
	for i, it := range items {
		if i == max {
			s = append(s, fmt.Sprintf("and %d more", len(items)-max))
			break
		}
		s = append(s, name(it))
	}
	return strings.Join(s, ", ")
}

// count formats "1 node", "2 nodes".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// prefixes formats a list of prefixes.
func prefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// Vet runs the constraint rules on a loaded intent, adds them to the
// loader's findings, applies cluster.constraints and sorts the result.
// Without a cluster (the CUE did not load) only the loader's findings stay.
func Vet(in *intent.Intent, loaded diag.List, cat Catalog) diag.List {
	all := slices.Clone(loaded)
	if in != nil && in.Cluster != nil {
		all = append(all, Run(in, cat)...)
		all = Override(all, in.Cluster, cat)
	}
	all.Sort()
	return all
}
