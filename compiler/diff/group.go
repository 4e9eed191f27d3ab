package diff

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

// Group is a set of nodes whose changes are the same, node names, pods and
// counts aside: a policy edit reprograms every node alike, and a reader
// needs it once, with the nodes it touches.
type Group struct {
	Nodes []string
	// Changes are the nodes' changes merged: Node is empty (one node: its
	// name), Endpoints and Drained are those of every node, Impact and
	// Reasons count all of them.
	Changes []Change
}

// Groups groups the result's nodes by their changes, in the order of their
// first node. It takes time linear in the changes: each node's key is a
// digest, and the details that nodes share (a route table's change, a
// policy program's) are digested once.
func (r *Result) Groups() []Group {
	var groups []Group
	byKey := map[[sha256.Size]byte]int{}
	var members [][][]Change // per group, per node, its changes
	k := keyer{memo: map[memoKey][sha256.Size]byte{}}
	for _, cs := range r.byNode() {
		key := k.key(cs)
		i, ok := byKey[key]
		if !ok {
			i = len(groups)
			byKey[key] = i
			groups = append(groups, Group{})
			members = append(members, nil)
		}
		groups[i].Nodes = append(groups[i].Nodes, cs[0].Node)
		members[i] = append(members[i], cs)
	}
	for i := range groups {
		groups[i].Changes = merge(members[i])
	}
	return groups
}

// byNode splits the changes by node, in the order of each node's first.
// Plans orders them by node, so each node's are one run.
func (r *Result) byNode() [][]Change {
	var out [][]Change
	at := map[string]int{}
	for i := 0; i < len(r.Changes); {
		j := i + 1
		for j < len(r.Changes) && r.Changes[j].Node == r.Changes[i].Node {
			j++
		}
		run := r.Changes[i:j:j]
		if k, ok := at[run[0].Node]; ok {
			out[k] = append(slices.Clip(out[k]), run...) // not one run: built by hand
		} else {
			at[run[0].Node] = len(out)
			out = append(out, run)
		}
		i = j
	}
	return out
}

// keyer computes group keys, digesting each shared list of details or
// policies once.
type keyer struct {
	memo map[memoKey][sha256.Size]byte
}

// memoKey names a list by its first element and length: slices that share
// them have the same contents.
type memoKey struct {
	detail *Detail
	policy *PolicyChange
	n      int
}

func (k *keyer) digest(m memoKey, v any) [sha256.Size]byte {
	if d, ok := k.memo[m]; ok {
		return d
	}
	b, _ := json.Marshal(v)
	d := sha256.Sum256(b)
	k.memo[m] = d
	return d
}

// key is a node's changes without what is the node's own.
func (k *keyer) key(cs []Change) [sha256.Size]byte {
	h := sha256.New()
	for _, c := range cs {
		var details, policies [sha256.Size]byte
		if len(c.Details) > 0 {
			details = k.digest(memoKey{detail: &c.Details[0], n: len(c.Details)}, c.Details)
		}
		if len(c.Policies) > 0 {
			policies = k.digest(memoKey{policy: &c.Policies[0], n: len(c.Policies)}, c.Policies)
		}
		c.Node, c.Impact, c.Endpoints, c.Drained, c.Details, c.Policies = "", nil, nil, nil, nil, nil
		if c.Kind == "node" {
			c.Name = ""
		}
		c.Reasons = slices.Clone(c.Reasons)
		for j, r := range c.Reasons {
			c.Reasons[j], _, _ = strings.Cut(r, ":")
		}
		b, _ := json.Marshal(c)
		h.Write(b)
		h.Write(details[:])
		h.Write(policies[:])
		fmt.Fprintf(h, "%q\x00", c.whole)
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// merge merges the changes of the nodes of one group (each node's list has
// the same kinds in the same order).
func merge(nodes [][]Change) []Change {
	if len(nodes) == 1 {
		return nodes[0]
	}
	out := make([]Change, len(nodes[0]))
	for i := range nodes[0] {
		all := make([]Change, len(nodes))
		for n := range nodes {
			all[n] = nodes[n][i]
		}
		c := all[0]
		c.Node = ""
		if c.Kind == "node" {
			c.Name = "" // the group's title names them
		}
		c.Endpoints, c.Drained = nil, nil
		for _, x := range all {
			c.Endpoints = append(c.Endpoints, x.Endpoints...)
			c.Drained = append(c.Drained, x.Drained...)
		}
		slices.Sort(c.Endpoints)
		slices.Sort(c.Drained)
		c.Endpoints, c.Drained = slices.Compact(c.Endpoints), slices.Compact(c.Drained)
		counted := c.Kind == "policy" && slices.ContainsFunc(c.Reasons, func(r string) bool { return strings.Contains(r, ":") })
		if counted || !allEqual(all, func(x Change) string {
			return strings.Join(x.Impact, "\x00") + "\x01" + strings.Join(x.Reasons, "\x00")
		}) {
			c.Impact, c.Reasons = mergedImpact(all, c)
		}
		out[i] = c
	}
	return out
}

func allEqual(cs []Change, f func(Change) string) bool {
	for _, c := range cs[1:] {
		if f(c) != f(cs[0]) {
			return false
		}
	}
	return true
}

// mergedImpact says what the change costs on all the group's nodes.
func mergedImpact(all []Change, merged Change) (impact, reasons []string) {
	n := len(all)
	counted := slices.ContainsFunc(merged.Reasons, func(r string) bool { return strings.Contains(r, ":") })
	switch {
	case merged.Kind == "policy" && counted:
		total := 0
		for _, c := range all {
			total += len(c.Endpoints)
		}
		return []string{fmt.Sprintf("%s reprogrammed on %s nodes (each update can reset TCP connections)", plural(total, "endpoint"), diag.Thousands(n))},
			[]string{fmt.Sprintf("%s:%d endpoints", ReasonACLReprogram, total)}
	case merged.Kind == "network" && merged.Action == Replace:
		what := fmt.Sprintf("drain of each of the %s nodes", diag.Thousands(n))
		if slices.ContainsFunc(all[0].Impact, func(s string) bool { return strings.Contains(s, "--inventory") }) {
			what += " (their pods: run with --inventory to count them)"
		} else {
			what += fmt.Sprintf(" (%s in all)", plural(len(merged.Drained), "pod"))
		}
		return []string{what}, merged.Reasons
	}
	seen := map[string]bool{}
	for _, c := range all {
		for _, s := range c.Impact {
			if !seen[s] {
				seen[s] = true
				impact = append(impact, s)
			}
		}
	}
	return impact, merged.Reasons
}

// groupTitle names a group's nodes: "node win-1", "the same change on 3
// nodes: win-1, win-2, win-3", or past ten "the same change on 1,000
// nodes: win-0000 … win-0999".
func groupTitle(nodes []string) string {
	switch n := len(nodes); {
	case n == 1:
		return "node " + nodes[0]
	case n <= 10:
		return fmt.Sprintf("the same change on %d nodes: %s", n, strings.Join(nodes, ", "))
	default:
		return fmt.Sprintf("the same change on %s nodes: %s … %s", diag.Thousands(n), nodes[0], nodes[n-1])
	}
}
