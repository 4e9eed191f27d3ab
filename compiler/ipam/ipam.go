// Package ipam assigns each Windows node its pod address block.
//
// Calico IPAM on Windows gives a node exactly one block (strict affinity,
// no borrowing). A node's block comes from, in order: the intent
// (nodes.X.blocks), the inventory's Calico BlockAffinities, the lock file
// (hnsplan.lock.json), and otherwise the compiler allocates one: the first
// free block, in address order, of the first Windows pool (by name) that
// selects the node, nodes taken in name order. The lock records those
// allocations so that adding or removing a node never moves another node's
// block — a moved block is a network recreate.
//
// With host-local IPAM (and flannel, static routes, calico-bgp on the
// kubernetes datastore) a node's block is its podCIDR.
//
// Every Windows block reserves four addresses: .0 (network), .1 (gateway
// and VXLAN tunnel address), .2 (the host endpoint) and the last
// (broadcast).
package ipam

import (
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/topology"
)

// Source says where a node's block came from.
type Source string

const (
	FromIntent    Source = "intent"    // nodes.X.blocks
	FromInventory Source = "inventory" // a Calico BlockAffinity
	FromLock      Source = "lock"      // hnsplan.lock.json
	Allocated     Source = "allocated" // chosen by the compiler
	FromPodCIDR   Source = "podCIDR"   // nodes.X.podCIDR (host-local IPAM)
)

// Block is a node's pod address block.
type Block struct {
	Node   string
	Prefix netip.Prefix
	Pool   string // "" for a podCIDR
	Source Source
}

// Gateway returns the block's .1: the network gateway and VXLAN tunnel
// address.
func (b Block) Gateway() netip.Addr { return b.Prefix.Addr().Next() }

// HostEndpoint returns the block's .2: the host endpoint (Calico_ep).
func (b Block) HostEndpoint() netip.Addr { return b.Prefix.Addr().Next().Next() }

// Reserved reports whether a is one of the block's four reserved
// addresses on Windows.
func (b Block) Reserved(a netip.Addr) bool {
	first := b.Prefix.Addr()
	return a == first || a == first.Next() || a == first.Next().Next() || a == Last(b.Prefix)
}

// Last returns the last address of p.
func Last(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().AsSlice()
	bits := p.Bits()
	for i := range a {
		for j := 7; j >= 0; j-- {
			if i*8+(7-j) >= bits {
				a[i] |= 1 << j
			}
		}
	}
	out, _ := netip.AddrFromSlice(a)
	return out.Unmap()
}

// Problem is an assignment that cannot stand.
type Problem struct {
	Node    string
	Kind    string // "invalid" (a given block is no block of a pool) or "none" (no block for the node)
	Message string
}

// Result is the block of every node whose block is known.
type Result struct {
	Blocks   map[string]Block // by node name: every Windows node, and Linux nodes whose block is known
	Problems []Problem
	// Lock is the lock with every existing entry and the compiler's
	// allocations: what `compile --update-lock` writes.
	Lock *intent.Lock
}

// Assign computes every node's block.
func Assign(t *topology.Topology, inv intent.Inventory, lock *intent.Lock, podCIDRs bool) *Result {
	r := &Result{Blocks: map[string]Block{}}
	if podCIDRs {
		for _, n := range t.Cluster.Nodes {
			if n.PodCIDR.IsValid() {
				r.Blocks[n.Name] = Block{Node: n.Name, Prefix: n.PodCIDR, Source: FromPodCIDR}
			} else if n.IsWindows() {
				r.Problems = append(r.Problems, Problem{Node: n.Name, Kind: "none", Message: fmt.Sprintf("Windows node %s has no podCIDR", n.Name)})
			}
		}
		r.Lock = lock
		return r
	}
	a := &assigner{t: t, r: r, taken: map[netip.Prefix]string{}}
	affinities := map[string][]netip.Prefix{}
	for _, ba := range inv.BlockAffinities {
		if !ba.Deleted && ba.State != "pendingDeletion" {
			affinities[ba.Node] = append(affinities[ba.Node], ba.CIDR)
		}
	}
	for _, ps := range affinities {
		slices.SortFunc(ps, comparePrefix)
	}
	// Known blocks first, for every node, so that allocation avoids them.
	for i := range t.Cluster.Nodes {
		n := &t.Cluster.Nodes[i]
		switch {
		case len(n.Blocks) > 0:
			a.claim(n, n.Blocks[0], FromIntent)
		case len(affinities[n.Name]) > 0:
			a.claim(n, affinities[n.Name][0], FromInventory)
		case lock != nil && len(lock.Blocks[n.Name]) > 0:
			a.claim(n, lock.Blocks[n.Name][0], FromLock)
		}
	}
	// Lock entries of nodes no longer in the intent still hold their block:
	// it must not go to another node while the old one may be draining.
	if lock != nil {
		for _, node := range sortedKeys(lock.Blocks) {
			if _, ok := t.NodeByName[node]; !ok {
				for _, b := range lock.Blocks[node] {
					a.taken[b] = node
				}
			}
		}
	}
	// A node whose given block failed gets none: the pin (or affinity, or
	// lock entry) is the user's word, and another block would be a guess.
	failed := map[string]bool{}
	for _, p := range r.Problems {
		failed[p.Node] = true
	}
	for _, n := range t.Windows {
		if _, ok := r.Blocks[n.Name]; !ok && !failed[n.Name] {
			a.allocate(n)
		}
	}
	r.Lock = updatedLock(lock, r, t)
	return r
}

type assigner struct {
	t      *topology.Topology
	r      *Result
	taken  map[netip.Prefix]string // block -> node
	cursor map[string]*big.Int     // next block index to try, by pool
}

// claim records a block the intent, inventory or lock gives node n, if it
// is a block of an enabled pool that selects the node and no other node
// holds it.
func (a *assigner) claim(n *intent.Node, b netip.Prefix, src Source) {
	pool := a.poolOf(n, b)
	switch {
	case pool == nil:
		a.r.Problems = append(a.r.Problems, Problem{Node: n.Name, Kind: "invalid",
			Message: fmt.Sprintf("block %s of node %s (from the %s) is not a block of an enabled pool that selects the node", b, n.Name, src)})
		return
	case a.taken[b] != "" && a.taken[b] != n.Name:
		a.r.Problems = append(a.r.Problems, Problem{Node: n.Name, Kind: "invalid",
			Message: fmt.Sprintf("block %s of node %s (from the %s) is also node %s's", b, n.Name, src, a.taken[b])})
		return
	}
	a.taken[b] = n.Name
	a.r.Blocks[n.Name] = Block{Node: n.Name, Prefix: b, Pool: pool.Name, Source: src}
}

// poolOf returns the pool that b is a block of, among those selecting n.
func (a *assigner) poolOf(n *intent.Node, b netip.Prefix) *topology.Pool {
	for _, p := range a.t.PoolsOf[n.Name] {
		if p.CIDR.Addr().Is4() == b.Addr().Is4() && p.BlockSize == b.Bits() && p.CIDR.Contains(b.Addr()) {
			return p
		}
	}
	return nil
}

// allocate gives n the first free block of the first pool selecting it.
func (a *assigner) allocate(n *intent.Node) {
	pools := a.t.PoolsOf[n.Name]
	if a.cursor == nil {
		a.cursor = map[string]*big.Int{}
	}
	for _, p := range pools {
		if p.BlockSize < p.CIDR.Bits() || p.BlockSize > p.CIDR.Addr().BitLen() {
			continue
		}
		count := new(big.Int).Lsh(big.NewInt(1), uint(p.BlockSize-p.CIDR.Bits()))
		i, ok := a.cursor[p.Name]
		if !ok {
			i = new(big.Int)
			a.cursor[p.Name] = i
		}
		for ; i.Cmp(count) < 0; i.Add(i, big.NewInt(1)) {
			b := nthBlock(p.CIDR, p.BlockSize, i)
			if a.taken[b] != "" {
				continue
			}
			a.taken[b] = n.Name
			a.r.Blocks[n.Name] = Block{Node: n.Name, Prefix: b, Pool: p.Name, Source: Allocated}
			i.Add(i, big.NewInt(1))
			return
		}
	}
	names := make([]string, len(pools))
	for i, p := range pools {
		names[i] = p.Name
	}
	msg := fmt.Sprintf("no enabled pool selects Windows node %s", n.Name)
	if len(pools) > 0 {
		msg = fmt.Sprintf("the pools that select Windows node %s (%s) have no free block left", n.Name, strings.Join(names, ", "))
	}
	a.r.Problems = append(a.r.Problems, Problem{Node: n.Name, Kind: "none", Message: msg})
}

// nthBlock returns the i-th block of size bits in pool.
func nthBlock(pool netip.Prefix, bits int, i *big.Int) netip.Prefix {
	base := new(big.Int).SetBytes(pool.Addr().AsSlice())
	off := new(big.Int).Lsh(i, uint(pool.Addr().BitLen()-bits))
	sum := base.Add(base, off).Bytes()
	buf := make([]byte, pool.Addr().BitLen()/8)
	copy(buf[len(buf)-len(sum):], sum)
	addr, _ := netip.AddrFromSlice(buf)
	return netip.PrefixFrom(addr, bits)
}

// updatedLock returns lock (or a new one) with an entry for every block
// the compiler allocated. Existing entries are kept — those of removed
// nodes too, so their blocks are not reused while the nodes may still be
// draining — except blocks that are no block of an enabled pool.
func updatedLock(lock *intent.Lock, r *Result, t *topology.Topology) *intent.Lock {
	out := &intent.Lock{FormatVersion: intent.LockFormatVersion, Blocks: map[string][]netip.Prefix{}}
	if lock != nil {
		for k, v := range lock.Blocks {
			var keep []netip.Prefix
			for _, b := range v {
				if slices.ContainsFunc(t.Pools, func(p *topology.Pool) bool {
					return p.BlockSize == b.Bits() && p.CIDR.Contains(b.Addr())
				}) {
					keep = append(keep, b)
				}
			}
			if len(keep) > 0 {
				out.Blocks[k] = keep
			}
		}
	}
	for node, b := range r.Blocks {
		if b.Source == Allocated {
			out.Blocks[node] = []netip.Prefix{b.Prefix}
		}
	}
	return out
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
