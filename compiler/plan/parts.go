package plan

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"
)

// A plan holds what is its node's own. What every node shares — the
// cluster's route table and the policy program — is written once, as
// parts, and a plan names the parts it needs:
//
//   - the route table by name and key (RouteTableRef). The table's head
//     (RouteTable) names its shards (RouteShard) by digest; a node joining
//     the cluster changes one shard and the head, and no plan. The key is
//     what routes and plans must agree on (cluster, networking, VNI,
//     pools): a change of it is a new table, of another name, so the old
//     one stays whole for the nodes that have not yet taken their new plan.
//   - the policy program by the digests of its chunks (ProgramChunk),
//     named after their content.
//
// A reader applies a plan only with every part it names, at the digests
// it names (Parts.Assemble): never new routes with an old plan, or the
// reverse. Naming the table by key is not enough for that: two compiles
// of one cluster with the same key (a rollback, an edit of a policy) have
// tables of one name. So a table records the digest of every plan
// compiled with it, each in the shard of its node (RouteShard.Plans), and
// a plan is applied only with a table that records it: a plan and a
// table are of one compile, or the plan is byte for byte the one that
// compile made. An interrupted publish, or one of a subset of nodes
// (--nodes, --canary), leaves the nodes whose plans differ on their last
// good plan and table until both are published.

// Part kinds, each a JSON object with formatVersion, kind, cluster, name
// and digest like a plan's.
const (
	KindRouteTable   = "RouteTable"
	KindRouteShard   = "RouteShard"
	KindProgramChunk = "ProgramChunk"
)

// MaxPartSize bounds every part and, in the compiler, every plan: a
// quarter of a ConfigMap's 1 MiB, so that an object stays cheap for the
// API server to store and to send to every watching agent.
const MaxPartSize = 256 << 10

// RouteShards is how many shards a route table spreads its nodes over, by
// a hash of the node name. Fixed, so that a node joining or leaving
// changes exactly one shard; 64 keep a shard of a 5,000-node cluster near
// 20 KB and allow some 80,000 nodes before a shard reaches MaxPartSize.
const RouteShards = 64

// Route table types: what a node makes of another node's entry.
const (
	RoutesRemoteSubnet = "RemoteSubnet" // an HNS RemoteSubnetRoute per block (Overlay networks)
	RoutesHost         = "Host"         // a route in the host's routing table per block (static-routes)
)

// PartRef names a part at one digest.
type PartRef struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// RouteTableRef is a plan's reference to its route table: the name and
// the key the table must have. Not a digest, or every node joining the
// cluster would rewrite every plan.
type RouteTableRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// RouteTable is the head of a route table: its cluster-wide values and
// its shards. Nodes is the assembled table (every shard's entries, by
// name), filled by Parts.Assemble and by the compiler; it is not part of
// the head's encoding.
type RouteTable struct {
	FormatVersion string `json:"formatVersion"`
	Kind          string `json:"kind"`
	Name          string `json:"name"`
	Digest        string `json:"digest"`
	Cluster       string `json:"cluster"`
	Key           string `json:"key"`
	// Type is RoutesRemoteSubnet or RoutesHost.
	Type string `json:"type"`
	// IsolationId is the VNI of every RemoteSubnetRoute.
	IsolationId uint32 `json:"isolationId,omitempty"`
	// Shards in name order; only shards with entries or plans exist.
	Shards []PartRef `json:"shards"`

	Nodes []RouteNode `json:"-"`
	// plans are the shards' Plans, by node, when assembled.
	plans map[string]string
}

// PlanDigest is the digest of node's plan that the assembled table t was
// compiled with; "" when it records none for node.
func (t *RouteTable) PlanDigest(node string) string { return t.plans[node] }

// RouteShard holds the entries of the nodes whose names hash to it.
type RouteShard struct {
	FormatVersion string      `json:"formatVersion"`
	Kind          string      `json:"kind"`
	Name          string      `json:"name"`
	Digest        string      `json:"digest"`
	Cluster       string      `json:"cluster"`
	Nodes         []RouteNode `json:"nodes"` // by node name
	// Plans are the digests of the plans compiled with the table, of the
	// nodes that hash to the shard (Name: the node), by node name: a
	// plan is applied only with a table that records it.
	Plans []PartRef `json:"plans,omitempty"`
}

// RouteNode is one node's entry in a route table: where its pods are.
type RouteNode struct {
	Node string `json:"node"`
	// Address is the node's address: the ProviderAddress of its routes,
	// or their NextHop.
	Address netip.Addr `json:"address"`
	// TunnelMAC is the node's VXLAN tunnel MAC, as HNS writes MACs; ""
	// when only the live cluster knows it (the agent reads the node's
	// annotation, and the route waits until it does).
	TunnelMAC string `json:"tunnelMAC,omitempty"`
	// Blocks are the node's pod blocks.
	Blocks []netip.Prefix `json:"blocks,omitempty"`
	// LiveBlocks says the node's blocks are claimed at run time (a Linux
	// node under Calico IPAM): the agent takes them from the cluster's
	// BlockAffinities.
	LiveBlocks bool `json:"liveBlocks,omitempty"`
}

// ProgramChunk is a run of the policy program's policies, in evaluation
// order. The chunks a plan names, concatenated, are the program: a tier
// that spans chunks appears in each, with the same defaultAction.
type ProgramChunk struct {
	FormatVersion string `json:"formatVersion"`
	Kind          string `json:"kind"`
	Name          string `json:"name"`
	Digest        string `json:"digest"`
	Cluster       string `json:"cluster"`
	Tiers         []Tier `json:"tiers"`
}

// PartFileName is the file a part is written to beside the plans. No node
// name starts with "_", so no plan file can take a part's name.
func PartFileName(name string) string { return "_" + name + ".json" }

// CheckPartName reports whether name is a part's name as compile gives
// them: routes-<12 hex>, routes-<12 hex>-<2 hex> and program-<12 hex>;
// only such names become files and ConfigMaps.
func CheckPartName(name string) error {
	kind, rest, _ := strings.Cut(name, "-")
	hexOK := func(s string, n int) bool {
		if len(s) != n {
			return false
		}
		for _, c := range s {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
		return true
	}
	switch {
	case kind == "program" && hexOK(rest, 12):
	case kind == "routes" && hexOK(rest, 12):
	case kind == "routes" && len(rest) == 15 && rest[12] == '-' && hexOK(rest[:12], 12) && hexOK(rest[13:], 2):
	default:
		return fmt.Errorf("%q is not a part name (routes-<12 hex>, routes-<12 hex>-<2 hex> or program-<12 hex>)", name)
	}
	return nil
}

// RouteKey is the key of a route table: the digest of what a node's
// routes and its plan must agree on.
func RouteKey(cluster, networking, typ string, vni uint32, port uint16, pools []netip.Prefix) string {
	h := sha256.New()
	fmt.Fprintf(h, "cluster=%s\nnetworking=%s\ntype=%s\nvni=%d\nport=%d\n", cluster, networking, typ, vni, port)
	for _, p := range pools {
		fmt.Fprintf(h, "pool=%s\n", p)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// NewRouteTable makes the head of a route table over nodes, which it
// sorts by name; its name comes from key. Shards are filled when it is
// encoded (EncodeParts).
func NewRouteTable(cluster, key, typ string, vni uint32, nodes []RouteNode) *RouteTable {
	sortRouteNodes(nodes)
	return &RouteTable{
		FormatVersion: FormatVersion, Kind: KindRouteTable, Cluster: cluster,
		Name: "routes-" + short(key), Key: key, Type: typ, IsolationId: vni, Nodes: nodes,
	}
}

// Ref is a plan's reference to t.
func (t *RouteTable) Ref() *RouteTableRef { return &RouteTableRef{Name: t.Name, Key: t.Key} }

// ShardOf is the index of the shard that holds node's entry.
func ShardOf(node string) int {
	h := fnv.New32a()
	h.Write([]byte(node))
	return int(h.Sum32() % RouteShards)
}

// ShardName is the name of table's shard i.
func ShardName(table string, i int) string { return fmt.Sprintf("%s-%02x", table, i) }

// short is the 12 hex digits after "sha256:" that name a part.
func short(digest string) string {
	s := strings.TrimPrefix(digest, "sha256:")
	if len(s) > 12 {
		s = s[:12]
	}
	return s
}

// RemoteSubnetRoutes are the routes p's node takes from its route table:
// one per block of every other node, in block address order. Entries
// whose blocks only the live cluster knows give none (the agent adds
// them); a route whose tunnel MAC is unknown has DistributedRouterMacAddress "".
func (p *NodePlan) RemoteSubnetRoutes() []RemoteSubnetRoute {
	t := p.Routes
	if t == nil || t.Type != RoutesRemoteSubnet {
		return nil
	}
	var out []RemoteSubnetRoute
	for _, n := range t.Nodes {
		if n.Node == p.Node {
			continue
		}
		for _, b := range n.Blocks {
			out = append(out, RemoteSubnetRoute{DestinationPrefix: b, IsolationId: t.IsolationId,
				ProviderAddress: n.Address, DistributedRouterMacAddress: n.TunnelMAC, Node: n.Node})
		}
	}
	slices.SortFunc(out, func(a, b RemoteSubnetRoute) int { return ComparePrefix(a.DestinationPrefix, b.DestinationPrefix) })
	return out
}

// HostRoutes are the host routes p's node takes from its route table
// (static-routes), in block address order.
func (p *NodePlan) HostRoutes() []HostRoute {
	t := p.Routes
	if t == nil || t.Type != RoutesHost {
		return nil
	}
	var out []HostRoute
	for _, n := range t.Nodes {
		if n.Node == p.Node {
			continue
		}
		for _, b := range n.Blocks {
			out = append(out, HostRoute{DestinationPrefix: b, NextHop: n.Address, Node: n.Node})
		}
	}
	slices.SortFunc(out, func(a, b HostRoute) int { return ComparePrefix(a.DestinationPrefix, b.DestinationPrefix) })
	return out
}

// LiveBlockNodes are the nodes of p's route table whose blocks only the
// live cluster knows, by name, p's own node left out.
func (p *NodePlan) LiveBlockNodes() []RouteNode {
	if p.Routes == nil {
		return nil
	}
	var out []RouteNode
	for _, n := range p.Routes.Nodes {
		if n.LiveBlocks && n.Node != p.Node {
			out = append(out, n)
		}
	}
	return out
}

// ComparePrefix orders prefixes by address, then length.
func ComparePrefix(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
}

func sortRouteNodes(nodes []RouteNode) {
	slices.SortFunc(nodes, func(a, b RouteNode) int { return cmp.Compare(a.Node, b.Node) })
}

// SetRoutes gives p the route table t, and names it.
func (p *NodePlan) SetRoutes(t *RouteTable) {
	p.Routes, p.RouteTable = t, nil
	if t != nil {
		p.RouteTable = t.Ref()
	}
}

// RemoteSubnetTable is a RemoteSubnet route table holding routes (one
// entry per node, all with the VNI of the first), for a plan built by
// hand (tests, tools).
func RemoteSubnetTable(cluster string, routes []RemoteSubnetRoute) *RouteTable {
	var vni uint32
	byNode := map[string]int{}
	var nodes []RouteNode
	for _, r := range routes {
		if vni == 0 {
			vni = r.IsolationId
		}
		i, ok := byNode[r.Node]
		if !ok {
			i = len(nodes)
			byNode[r.Node] = i
			nodes = append(nodes, RouteNode{Node: r.Node, Address: r.ProviderAddress, TunnelMAC: r.DistributedRouterMacAddress})
		}
		nodes[i].Blocks = append(nodes[i].Blocks, r.DestinationPrefix)
	}
	return NewRouteTable(cluster, RouteKey(cluster, "", RoutesRemoteSubnet, vni, 0, nil), RoutesRemoteSubnet, vni, nodes)
}
