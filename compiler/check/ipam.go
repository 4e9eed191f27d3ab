package check

import (
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/topology"
)

// WindowsReserved is how many addresses of every Windows block are
// reserved: the network (.0), the gateway (.1), the host endpoint (.2) and
// the last (broadcast) address (testvectors/calico/ipam-windows.json).
const WindowsReserved = 4

// maxWindowsBlockSize is the longest block prefix that leaves a usable
// address after the reservations: 32 − bits.Len(4) = /29 (/125 for IPv6).
func maxWindowsBlockSize(p netip.Prefix) int { return p.Addr().BitLen() - 3 }

// UsableAddrs returns the pod addresses of one Windows block of the given
// size: 2^(bits−blockSize) − 4, or 0. It saturates for huge IPv6 blocks.
// A blockSize longer than the address (the loader reports it; the rules
// still run, to report everything at once) has no address.
func UsableAddrs(bitLen, blockSize int) int64 {
	host := bitLen - blockSize
	if host < 0 {
		return 0
	}
	if host >= 62 {
		return 1 << 62
	}
	return max(int64(1)<<host-WindowsReserved, 0)
}

// kubeletDefaultMaxPods is the kubelet's --max-pods default.
const kubeletDefaultMaxPods = 110

// usesPodCIDR reports whether Windows nodes take their pod range from a
// per-node podCIDR rather than from Calico IPAM (reference 000, 004).
func (x *checker) usesPodCIDR() bool {
	switch x.c.Networking {
	case intent.FlannelHostGW, intent.FlannelVXLAN, intent.StaticRoutes:
		return true
	case intent.CalicoBGP:
		return x.c.IPAM.Type == "host-local" || x.c.Datastore == "kubernetes"
	}
	return x.c.IPAM.Type == "host-local"
}

func (x *checker) calicoIPAM() bool { return x.c.IPAM.Type == "calico" && !x.usesPodCIDR() }

func ipam(x *checker) {
	x.poolOverlap()
	if !x.hasWindows() {
		return
	}
	if x.c.IPAM.Type == "calico" && !x.c.IPAM.StrictAffinity {
		x.report("strict-affinity-required", "", []any{"ipam", "strictAffinity"},
			"Calico IPAM with Windows nodes needs strictAffinity true: Windows nodes can neither borrow addresses from nor lend them to other nodes' blocks")
	}
	for _, p := range x.WindowsPools {
		if p.BlockSize > p.CIDR.Addr().BitLen() {
			continue // not a prefix length of the pool's family: the loader's schema error says so
		}
		if lim := maxWindowsBlockSize(p.CIDR); p.BlockSize > lim {
			x.report("block-size-windows", "", []any{"pools", p.Name, "blockSize"},
				"pool %q: blockSize %d leaves no usable address on Windows nodes (%s): 4 addresses of every block are reserved; use a blockSize of at most %d",
				p.Name, p.BlockSize, names(p.Windows), lim)
		}
	}
	// maxBlocksPerHost 1 (IPAMConfiguration) keeps a node to one block
	// whatever the CNI would take.
	if !x.c.Windows.UseSingleNetwork && x.c.IPAM.MaxBlocksPerHost != 1 {
		x.report("multi-block-kube-proxy", "", []any{"windows", "useSingleNetwork"},
			"useSingleNetwork false lets a Windows node hold several blocks, which kube-proxy does not support (one block per host)")
	}
	switch x.c.Networking {
	case intent.FlannelHostGW, intent.FlannelVXLAN, intent.StaticRoutes, intent.CloudProvider:
		if x.c.Datastore == "etcd" {
			x.report("datastore-support", "", []any{"datastore"},
				"%s networking needs the kubernetes datastore (Calico runs policy-only and reads podCIDRs from the Kubernetes API), not etcd", x.c.Networking)
		}
	default:
		if x.c.Datastore == "etcd" && x.c.OperatorManaged {
			x.reportRel("datastore-support", "", []any{"datastore"}, x.operatorManaged(),
				"the operator install of Calico for Windows supports only the kubernetes datastore, not etcd (operatorManaged is true)")
		}
	}
	if x.usesPodCIDR() {
		for _, n := range x.Windows {
			if !n.PodCIDR.IsValid() {
				x.report("host-local-podcidr", n.Name, []any{"nodes", n.Name},
					"node %s has no podCIDR, which %s needs (host-local IPAM takes the node's pod range from it); set nodes.%s.podCIDR", n.Name, x.podCIDRReason(), n.Name)
			}
		}
		return
	}
	if !x.calicoIPAM() {
		return
	}
	for _, n := range x.Windows {
		pools := x.PoolsOf[n.Name]
		if len(pools) == 0 {
			x.report("no-ip-borrowing", n.Name, []any{"nodes", n.Name},
				"no enabled pool selects Windows node %s (labels %s), and Windows nodes never borrow addresses: its pods get none", n.Name, labelString(x.Labels[n.Name]))
			continue
		}
		// The smallest block among the node's pools bounds its pods.
		small := slices.MaxFunc(pools, func(a, b *topology.Pool) int { return a.BlockSize - b.BlockSize })
		if small.BlockSize > small.CIDR.Addr().BitLen() {
			continue // no block size at all: the loader's schema error says so
		}
		usable := UsableAddrs(small.CIDR.Addr().BitLen(), small.BlockSize)
		if x.c.Windows.UseSingleNetwork {
			maxPods, at, how := n.MaxPods, []any{"nodes", n.Name, "maxPods"}, ""
			if maxPods == 0 {
				maxPods, at, how = kubeletDefaultMaxPods, []any{"nodes", n.Name}, " (unset: the kubelet default)"
			}
			if int64(maxPods) > usable {
				x.reportRel("single-block-capacity", n.Name, at, []diag.Related{blockFrom(x, small)},
					"node %s: maxPods %d%s exceeds the %d usable addresses of its one /%d block from pool %q (2^%d − 4 reserved); set maxPods to at most %d or use a larger block",
					n.Name, maxPods, how, usable, small.BlockSize, small.Name, small.CIDR.Addr().BitLen()-small.BlockSize, usable)
			}
		}
		x.reportRel("block-capacity-hint", n.Name, []any{"nodes", n.Name}, []diag.Related{blockFrom(x, small)},
			"node %s: %d usable pod addresses of %d in its /%d block from pool %q (4 reserved on Windows)",
			n.Name, usable, usable+WindowsReserved, small.BlockSize, small.Name)
	}
	x.blockSupply()
	x.lockChecks()
}

// blockFrom is the related position of the block size a node's pods get
// their addresses from.
func blockFrom(x *checker, p *topology.Pool) diag.Related {
	return x.rel([]any{"pools", p.Name, "blockSize"}, "pool %q: blockSize %d", p.Name, p.BlockSize)
}

func (x *checker) podCIDRReason() string {
	switch {
	case x.c.IPAM.Type == "host-local":
		return "host-local IPAM"
	case x.c.Networking == intent.CalicoBGP:
		return "calico-bgp on the kubernetes datastore"
	}
	return string(x.c.Networking) + " networking"
}

// blockSupply checks that the Windows pools hold a block for every node
// that takes one from them: each Windows node needs its own block, and each
// Linux node in the same pools claims at least one.
func (x *checker) blockSupply() {
	if len(x.WindowsPools) == 0 {
		return
	}
	supply := new(big.Int)
	var poolNames []string
	demand := map[string]bool{}
	for _, p := range x.WindowsPools {
		supply.Add(supply, new(big.Int).Lsh(big.NewInt(1), uint(max(p.BlockSize-p.CIDR.Bits(), 0))))
		poolNames = append(poolNames, p.Name)
		for _, n := range p.Windows {
			demand[n.Name] = true
		}
		for _, n := range p.Linux {
			demand[n.Name] = true
		}
	}
	if supply.Cmp(big.NewInt(int64(len(demand)))) < 0 {
		p := x.WindowsPools[0]
		var others []diag.Related // the other pools of the supply
		for _, o := range x.WindowsPools[1:] {
			others = append(others, x.rel([]any{"pools", o.Name, "cidr"}, "pool %q (%s, /%d blocks)", o.Name, o.CIDR, o.BlockSize))
		}
		x.reportRel("no-ip-borrowing", "", []any{"pools", p.Name, "cidr"}, others,
			"the Windows pools (%s) hold %s blocks, but %d nodes take blocks from them and Windows nodes never borrow: some Windows node will get no addresses; enlarge the pools or use smaller blocks",
			strings.Join(poolNames, ", "), supply, len(demand))
	}
}

// poolOverlap reports pools that overlap each other, a service CIDR, or a
// node subnet. Node subnets are deduplicated first, so the work grows with
// the number of distinct networks, not of nodes.
func (x *checker) poolOverlap() {
	type span struct {
		p    netip.Prefix
		what string
		at   []any
	}
	var others []span
	for i, s := range x.c.ServiceCIDRs {
		others = append(others, span{s, "service CIDR " + s.String(), []any{"serviceCIDRs", i}})
	}
	seen := map[netip.Prefix]bool{}
	for _, n := range x.c.Nodes {
		if n.Subnet.IsValid() && !seen[n.Subnet] {
			seen[n.Subnet] = true
			others = append(others, span{n.Subnet, fmt.Sprintf("node %s's subnet %s", n.Name, n.Subnet), []any{"nodes", n.Name, "address"}})
		}
	}
	pools := x.c.Pools
	for i := range pools {
		a := pools[i]
		if !a.CIDR.IsValid() {
			continue
		}
		for j := i + 1; j < len(pools); j++ {
			if b := pools[j]; b.CIDR.IsValid() && a.CIDR.Overlaps(b.CIDR) {
				x.reportRel("pool-overlap", "", []any{"pools", b.Name, "cidr"}, []diag.Related{x.rel([]any{"pools", a.Name, "cidr"}, "pool %q (%s)", a.Name, a.CIDR)},
					"pool %q (%s) overlaps pool %q (%s)", b.Name, b.CIDR, a.Name, a.CIDR)
			}
		}
		for _, o := range others {
			if a.CIDR.Overlaps(o.p) {
				x.reportRel("pool-overlap", "", []any{"pools", a.Name, "cidr"}, []diag.Related{x.rel(o.at, "%s", o.what)},
					"pool %q (%s) overlaps %s", a.Name, a.CIDR, o.what)
			}
		}
	}
}

// lockChecks compares the IPAM lock with the Windows nodes: each needs a
// block that is pinned in the intent, claimed in the inventory, or locked.
func (x *checker) lockChecks() {
	claimed := map[string]bool{}
	for _, ba := range x.in.Inventory.BlockAffinities {
		if !ba.Deleted {
			claimed[ba.Node] = true
		}
	}
	lock := x.in.Lock
	var unlocked []*intent.Node
	for _, n := range x.Windows {
		if len(n.Blocks) > 0 || claimed[n.Name] {
			continue
		}
		if lock == nil {
			unlocked = append(unlocked, n)
		} else if len(lock.Blocks[n.Name]) == 0 {
			x.add("ipam-lock-stale", n.Name, lock.Pos, "blocks", []diag.Related{x.rel([]any{"nodes", n.Name}, "Windows node %s", n.Name)},
				"%s has no block for Windows node %s; run `hnsplan compile --update-lock` (existing entries are kept)", intent.LockFile, n.Name)
		}
	}
	if lock != nil {
		for _, node := range sortedKeys(lock.Blocks) {
			for _, b := range lock.Blocks[node] {
				if !slices.ContainsFunc(x.c.Pools, func(p intent.Pool) bool {
					return !p.Disabled && p.CIDR.IsValid() && p.CIDR.Contains(b.Addr()) && p.BlockSize == b.Bits()
				}) {
					x.reportAt("ipam-lock-stale", node, lock.PosOf(node), "blocks."+node, "%s gives node %s the block %s, which is not a block of any enabled pool; run `hnsplan compile --update-lock`", intent.LockFile, node, b)
				}
			}
		}
	}
	if len(unlocked) > 0 {
		x.report("ipam-unlocked", "", []any{"pools"},
			"the compiler allocates the blocks of %s (%s) and no %s pins them: they may move as nodes come and go; run `hnsplan compile --update-lock` and commit the lock",
			count(len(unlocked), "Windows node"), names(unlocked), intent.LockFile)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func labelString(l map[string]string) string {
	var parts []string
	for _, k := range sortedKeys(l) {
		parts = append(parts, k+"="+l[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
