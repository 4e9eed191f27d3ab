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
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/policy"
	"github.com/hnsplan/hnsplan/compiler/topology"
	"github.com/hnsplan/hnsplan/policies"
)

// RuleUnknownRule is reported for an id in cluster.constraints that the
// catalog does not have.
const RuleUnknownRule = "constraints-unknown-rule"

// Catalog indexes the rules of policies/ by id.
type Catalog map[string]policies.Rule

// Severity returns a rule's default severity (Error for an unknown id).
func (c Catalog) Severity(rule string) diag.Severity {
	if r, ok := c[rule]; ok {
		if s, err := diag.ParseSeverity(r.Severity); err == nil {
			return s
		}
	}
	return diag.Error
}

// Services are the intent's Services and the inventory's that the intent
// does not have.
func Services(in *intent.Intent) []intent.Service {
	out := slices.Clone(in.Manifests.Services)
	seen := map[string]bool{}
	for _, s := range out {
		seen[s.Namespace+"/"+s.Name] = true
	}
	for _, s := range in.Inventory.Services {
		if !seen[s.Namespace+"/"+s.Name] {
			out = append(out, s)
		}
	}
	return out
}

// NewCatalog indexes rules.
func NewCatalog(rules []policies.Rule) Catalog {
	c := make(Catalog, len(rules))
	for _, r := range rules {
		c[r.ID] = r
	}
	return c
}

// checker holds what every rule needs: the intent, the catalog and the
// topology derived once (which nodes are Windows, which pools serve them).
type checker struct {
	in       *intent.Intent
	c        *intent.Cluster
	cat      Catalog
	findings diag.List

	*topology.Topology
}

// Run evaluates every vet-phase rule and returns the findings, unsorted.
// It needs a cluster that loaded without error.
func Run(in *intent.Intent, cat Catalog) diag.List {
	return run(in, cat, topology.New(in.Cluster))
}

// run is Run with the cluster's topology t.
func run(in *intent.Intent, cat Catalog, t *topology.Topology) diag.List {
	x := &checker{in: in, c: in.Cluster, cat: cat, Topology: t}
	for _, e := range x.BadSelectors {
		x.findings.Add(diag.Finding{Rule: "schema", Severity: diag.Error, Path: path("pools", e.Pool, "nodeSelector"),
			Pos: x.c.Pos("pools", e.Pool, "nodeSelector"), Message: fmt.Sprintf("nodeSelector is not a Calico selector: %v", e.Err)})
	}
	fams := families
	if in.Cluster.PolicyOnly() {
		// The CNI's network: its encapsulation, IPAM and NAT are not the
		// intent's to check.
		fams = policyOnlyFamilies
	}
	for _, family := range fams {
		family(x)
	}
	networkOwner(x)
	return x.findings
}

// families are the rule families in catalog order.
var families = []func(*checker){encapsulation, ipam, bgp, nat, platform, buildRegression, services, calico, vxlanChange}

// policyOnlyFamilies are those of a cluster whose Windows network another
// program owns (windows.networkOwner cni): what the plans hold there is the
// policy, and what the nodes, pods and Services must meet.
var policyOnlyFamilies = []func(*checker){bgp, platform, buildRegression, services, calico, vxlanChange}

// hasWindows reports whether the cluster has Windows nodes: most rules
// are about them only.
func (x *checker) hasWindows() bool { return len(x.Windows) > 0 }

// report adds a finding of rule id about node (may be ""), at the CUE path
// below `cluster`.
func (x *checker) report(id string, node string, at []any, format string, args ...any) {
	x.reportAt(id, node, x.c.Pos(at...), path(at...), format, args...)
}

// reportRel is report for a rule that compares two things: related are
// the other side's positions (see rel).
func (x *checker) reportRel(id string, node string, at []any, related []diag.Related, format string, args ...any) {
	x.add(id, node, x.c.Pos(at...), path(at...), related, format, args...)
}

// rel is a related position at a CUE path below `cluster`.
func (x *checker) rel(at []any, format string, args ...any) diag.Related {
	return diag.At(x.c.Pos(at...), format, args...)
}

// reportAt adds a finding at a position outside the CUE intent (a manifest,
// the inventory, the lock file).
func (x *checker) reportAt(id, node string, pos diag.Pos, dataPath, format string, args ...any) {
	x.add(id, node, pos, dataPath, nil, format, args...)
}

func (x *checker) add(id, node string, pos diag.Pos, dataPath string, related []diag.Related, format string, args ...any) {
	r, ok := x.cat[id]
	if !ok {
		panic("check: rule " + id + " is not in the catalog")
	}
	sev, err := diag.ParseSeverity(r.Severity)
	if err != nil {
		panic("check: rule " + id + ": " + err.Error())
	}
	x.findings.Add(diag.Finding{Rule: id, Severity: sev, Node: node, Path: dataPath,
		Pos: pos, Message: fmt.Sprintf(format, args...)}.Relate(related...))
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

// VetProgram runs the constraint rules and the policy compiler on a
// loaded intent, adds their findings to the loader's, applies
// cluster.constraints and sorts the result. Without a cluster (the CUE did
// not load) only the loader's and the policy compiler's findings stay. It
// also returns the policy program it compiled, so that the plan compiler
// (compiler.Build) uses it rather than compiling the manifests a second
// time. The program is nil when a manifest did not decode cleanly.
func VetProgram(in *intent.Intent, loaded diag.List, cat Catalog) (*plan.Program, diag.List) {
	var t *topology.Topology
	if in != nil && in.Cluster != nil {
		t = topology.New(in.Cluster)
	}
	return VetProgramOf(in, loaded, cat, t)
}

// VetProgramOf is VetProgram with the cluster's topology t (topology.New
// of in.Cluster, nil without a cluster), which the caller derives once
// for this and the compile: at 1,000 nodes its pool selectors are a
// noticeable part of vet.
func VetProgramOf(in *intent.Intent, loaded diag.List, cat Catalog, t *topology.Topology) (*plan.Program, diag.List) {
	all := slices.Clone(loaded)
	var prog *plan.Program
	// The policy rules (policy-*) are the policy compiler's; it needs
	// manifests that decoded cleanly.
	if in != nil && !slices.ContainsFunc(loaded, func(f diag.Finding) bool { return f.Rule == "manifest" && f.Severity == diag.Error }) {
		var pf diag.List
		prog, pf = policy.Compile(&in.Manifests, Services(in), cat.Severity)
		all = append(all, pf...)
		ctx := policy.Context{World: policy.World(in, nil)}
		if in.Cluster != nil {
			for _, p := range in.Cluster.Pools {
				ctx.ClusterCIDRs = append(ctx.ClusterCIDRs, p.CIDR)
			}
			ctx.ClusterCIDRs = append(ctx.ClusterCIDRs, in.Cluster.ServiceCIDRs...)
		}
		all = append(all, policy.Analyse(prog, ctx, cat.Severity)...)
	}
	if in != nil && in.Cluster != nil {
		all = append(all, run(in, cat, t)...)
		all = Override(all, in.Cluster, cat)
	}
	all.Sort()
	return prog, all
}
