// Package topology derives, from a loaded intent, which nodes are Windows,
// which labels each node carries, and which pools serve which nodes — the
// facts the constraint rules and the plan compiler share.
package topology

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/selector"
)

// Topology is what the intent says about nodes and pools.
type Topology struct {
	Cluster        *intent.Cluster
	Windows, Linux []*intent.Node // in name order
	NodeByName     map[string]*intent.Node
	// Labels are each node's effective labels (see NodeLabels).
	Labels map[string]map[string]string
	// Pools are the enabled pools with a valid nodeSelector, in name order.
	Pools []*Pool
	// WindowsPools are the Pools that select at least one Windows node.
	WindowsPools []*Pool
	// PoolsOf lists, by node name, the Pools that select the node.
	PoolsOf map[string][]*Pool
	// BadSelectors are the pools whose nodeSelector does not parse.
	BadSelectors []SelectorError
}

// Pool is an enabled pool with the nodes it selects.
type Pool struct {
	*intent.Pool
	Selector       selector.Selector
	Windows, Linux []*intent.Node // selected nodes, in name order
}

// SelectorError is a pool whose nodeSelector is not a Calico selector.
type SelectorError struct {
	Pool string
	Err  error
}

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

// New derives the topology of c.
func New(c *intent.Cluster) *Topology {
	t := &Topology{Cluster: c, NodeByName: map[string]*intent.Node{}, Labels: map[string]map[string]string{}, PoolsOf: map[string][]*Pool{}}
	for i := range c.Nodes {
		n := &c.Nodes[i]
		t.NodeByName[n.Name] = n
		if n.IsWindows() {
			t.Windows = append(t.Windows, n)
		} else {
			t.Linux = append(t.Linux, n)
		}
		t.Labels[n.Name] = NodeLabels(n)
	}
	for i := range c.Pools {
		p := &c.Pools[i]
		sel, err := selector.Parse(p.NodeSelector)
		if err != nil {
			t.BadSelectors = append(t.BadSelectors, SelectorError{Pool: p.Name, Err: err})
			continue
		}
		if !p.Disabled {
			t.Pools = append(t.Pools, &Pool{Pool: p, Selector: sel})
		}
	}
	t.match()
	return t
}

// match evaluates each pool's selector once per group of nodes that agree
// on every label the selectors name — a selector's verdict depends on
// nothing else — rather than once per node.
func (t *Topology) match() {
	keySet := map[string]bool{}
	for _, p := range t.Pools {
		for _, k := range p.Selector.LabelKeys() {
			keySet[k] = true
		}
	}
	keys := slices.Sorted(maps.Keys(keySet))
	groups := map[string][]*intent.Node{}
	var order []string
	var sig strings.Builder
	for i := range t.Cluster.Nodes {
		n := &t.Cluster.Nodes[i]
		sig.Reset()
		l := t.Labels[n.Name]
		for _, k := range keys {
			if v, ok := l[k]; ok {
				fmt.Fprintf(&sig, "%d:%s=%d:%s;", len(k), k, len(v), v)
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
	for _, p := range t.Pools {
		for _, g := range order {
			members := groups[g]
			if !p.Selector.Evaluate(t.Labels[members[0].Name]) {
				continue
			}
			for _, n := range members {
				t.PoolsOf[n.Name] = append(t.PoolsOf[n.Name], p)
				if n.IsWindows() {
					p.Windows = append(p.Windows, n)
				} else {
					p.Linux = append(p.Linux, n)
				}
			}
		}
		slices.SortFunc(p.Windows, byName)
		slices.SortFunc(p.Linux, byName)
		if len(p.Windows) > 0 {
			t.WindowsPools = append(t.WindowsPools, p)
		}
	}
}

func byName(a, b *intent.Node) int { return strings.Compare(a.Name, b.Name) }
