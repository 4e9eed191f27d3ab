package diff_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/compiler/diff"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// cluster is a hand-built compilation: n nodes sharing one route table.
type cluster struct {
	n      int
	vni    uint32
	typ    string      // plan.RoutesRemoteSubnet, plan.RoutesHost, or "" for no table
	blocks map[int]int // node index -> number of blocks (default 1)
	moved  int         // a node whose block moves (-1: none)
}

func nodeName(i int) string { return fmt.Sprintf("win-%04d", i) }

func (c cluster) plans() []*plan.NodePlan {
	var nodes []plan.RouteNode
	for i := range c.n {
		nb := 1
		if k, ok := c.blocks[i]; ok {
			nb = k
		}
		rn := plan.RouteNode{Node: nodeName(i), Address: netip.AddrFrom4([4]byte{10, 240, byte(i / 250), byte(i%250 + 2)})}
		for j := range nb {
			k := i*4 + j // room for 4 blocks a node
			if i == c.moved {
				k += 2
			}
			rn.Blocks = append(rn.Blocks, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(k >> 10), byte(k >> 2), byte(k%4) * 64}), 26))
		}
		nodes = append(nodes, rn)
	}
	var t *plan.RouteTable
	if c.typ != "" {
		t = plan.NewRouteTable("c", plan.RouteKey("c", "", c.typ, c.vni, 0, nil), c.typ, c.vni, nodes)
	}
	var out []*plan.NodePlan
	for i := range c.n {
		p := &plan.NodePlan{Node: nodeName(i), Cluster: "c", Network: plan.Network{Name: "Calico", Type: "Overlay"}}
		p.SetRoutes(t)
		out = append(out, p)
	}
	return out
}

// TestRouteChanges: a node's route change is its table's change less its
// own routes. Small changes are listed node by node; large ones once for
// all the nodes the tables serve, so that they group.
func TestRouteChanges(t *testing.T) {
	rs, host := plan.RoutesRemoteSubnet, plan.RoutesHost
	for _, tt := range []struct {
		name       string
		base, head cluster
		// groups are the sizes of the groups, in order.
		groups []int
		// want and notWant are in the text diff.
		want, notWant []string
		// details bounds the details of every route change.
		details int
	}{
		{
			name: "node joins", base: cluster{n: 100, vni: 4096, typ: rs, moved: -1}, head: cluster{n: 101, vni: 4096, typ: rs, moved: -1},
			groups: []int{100, 1},
			want: []string{"# the same change on 100 nodes: win-0000 … win-0099", "# 1 to add, 0 to remove, in place\n",
				"+ 10.0.100.0/26 -> win-0100 (PA 10.240.0.102, VSID 4096, DR MAC live)"},
			notWant: []string{"listed:"},
			details: 1,
		},
		{
			name: "block moves", base: cluster{n: 5, vni: 4096, typ: rs, moved: -1}, head: cluster{n: 5, vni: 4096, typ: rs, moved: 3},
			groups: []int{4}, // win-0003's own route is not its change
			want: []string{"the same change on 4 nodes: win-0000, win-0001, win-0002, win-0004",
				"- 10.0.3.0/26 -> win-0003", "+ 10.0.3.128/26 -> win-0003"},
			notWant: []string{"# node win-0003"},
			details: 2,
		},
		{
			name: "vni changes", base: cluster{n: 200, vni: 4096, typ: rs, moved: -1}, head: cluster{n: 200, vni: 4097, typ: rs, moved: -1},
			groups: []int{200},
			want: []string{"# the same change on 200 nodes: win-0000 … win-0199",
				"# 199 to add, 199 to remove, in place; listed: the route table's changes, each node's own routes aside",
				"~ VSID 4096 -> 4097 on every route both route tables hold"},
			notWant: []string{"VSID 4096, DR MAC"},
			details: 1,
		},
		{
			name: "vni changes, a node joins", base: cluster{n: 200, vni: 4096, typ: rs, moved: -1}, head: cluster{n: 201, vni: 4097, typ: rs, moved: -1},
			groups: []int{200, 1},
			want: []string{"~ VSID 4096 -> 4097 on every route both route tables hold", "# 200 to add, 199 to remove, in place; listed",
				"+ 10.0.200.0/26 -> win-0200 (PA 10.240.0.202, VSID 4097, DR MAC live)"},
			details: 2,
		},
		{
			name: "vni changes, nodes own different numbers of blocks", base: cluster{n: 200, vni: 4096, typ: rs, moved: -1, blocks: map[int]int{7: 3}},
			head:    cluster{n: 200, vni: 4097, typ: rs, moved: -1, blocks: map[int]int{7: 3}},
			groups:  []int{200},
			want:    []string{"# 201 to add, 201 to remove, in place; listed: the route table's changes, each node's own routes aside; 199 to add, 199 to remove"},
			details: 1,
		},
		{
			name: "many nodes join", base: cluster{n: 100, vni: 4096, typ: rs, moved: -1}, head: cluster{n: 300, vni: 4096, typ: rs, moved: -1},
			groups:  []int{100, 200}, // the created nodes group too
			want:    []string{"# 200 to add, 0 to remove, in place; listed", "+ … and 150 more", "# the same change on 200 nodes: win-0100 … win-0299"},
			details: 51,
		},
		{
			name: "networking mode changes", base: cluster{n: 100, vni: 4096, typ: rs, moved: -1}, head: cluster{n: 100, typ: host, moved: -1},
			groups: []int{100},
			want: []string{"~ remote subnet routes  # 0 to add, 99 to remove, in place; listed", "- … and 50 more",
				"~ host routes  # 99 to add, 0 to remove, in place; listed", "+ 10.0.0.0/26 via 10.240.0.2 (win-0000)", "+ … and 50 more"},
			details: 51,
		},
		{
			name: "route table disappears", base: cluster{n: 60, vni: 4096, typ: rs, moved: -1}, head: cluster{n: 60, moved: -1},
			groups:  []int{60},
			want:    []string{"~ remote subnet routes  # 0 to add, 59 to remove, in place; listed", "- … and 10 more"},
			notWant: []string{"host routes"},
			details: 51,
		},
		{
			name: "route table appears", base: cluster{n: 3, moved: -1}, head: cluster{n: 3, typ: host, moved: -1},
			groups:  []int{1, 1, 1}, // listed, each node without its own
			want:    []string{"# node win-0001\n  ~ host routes  # 2 to add, 0 to remove, in place\n      reasons: routes-changed\n      + 10.0.0.0/26 via 10.240.0.2 (win-0000)\n      + 10.0.2.0/26"},
			details: 2,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := diff.Plans(tt.base.plans(), tt.head.plans())
			var sizes []int
			for _, g := range res.Groups() {
				sizes = append(sizes, len(g.Nodes))
			}
			if fmt.Sprint(sizes) != fmt.Sprint(tt.groups) {
				t.Errorf("groups of %v nodes, want %v", sizes, tt.groups)
			}
			var text bytes.Buffer
			if err := res.WriteText(&text, false); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(text.String(), w) {
					t.Errorf("the diff lacks %q", w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(text.String(), w) {
					t.Errorf("the diff has %q", w)
				}
			}
			for _, c := range res.Changes {
				if (c.Kind == "remoteSubnetRoutes" || c.Kind == "hostRoutes") && len(c.Details) > tt.details {
					t.Errorf("%s %s: %d details, want at most %d", c.Node, c.Kind, len(c.Details), tt.details)
				}
			}
			if t.Failed() {
				t.Logf("diff:\n%s", text.String())
			}
		})
	}
}

// TestRouteChangesExact: every node's listed route change is its table's
// change less its own routes, exactly, when the change is small enough to
// list (one node's routes each way).
func TestRouteChangesExact(t *testing.T) {
	base, head := cluster{n: 30, vni: 4096, typ: plan.RoutesRemoteSubnet, moved: -1}.plans(), cluster{n: 30, vni: 4097, typ: plan.RoutesRemoteSubnet, moved: 5}.plans()
	res := diff.Plans(base, head)
	for _, c := range res.Changes {
		if c.Kind != "remoteSubnetRoutes" {
			continue
		}
		var p *plan.NodePlan
		for _, x := range head {
			if x.Node == c.Node {
				p = x
			}
		}
		var b *plan.NodePlan
		for _, x := range base {
			if x.Node == c.Node {
				b = x
			}
		}
		hs := map[string]bool{}
		for _, r := range p.RemoteSubnetRoutes() {
			hs[r.DestinationPrefix.String()+r.Node+fmt.Sprint(r.IsolationId)] = true
		}
		removed := 0
		for _, r := range b.RemoteSubnetRoutes() {
			if !hs[r.DestinationPrefix.String()+r.Node+fmt.Sprint(r.IsolationId)] {
				removed++
			}
		}
		got := 0
		for _, d := range c.Details {
			if d.Before != "" {
				got++
			}
		}
		if got != removed || removed != 29 {
			t.Errorf("%s: %d routes listed as removed, its plans remove %d (want 29)", c.Node, got, removed)
		}
	}
}

// TestGroupsByHand: changes built by hand need not come node by node.
func TestGroupsByHand(t *testing.T) {
	res := &diff.Result{Changes: []diff.Change{
		{Node: "a", Kind: "network", Name: "Calico", Action: diff.Update},
		{Node: "b", Kind: "network", Name: "Calico", Action: diff.Update},
		{Node: "a", Kind: "policy", Name: "policy program", Action: diff.Update},
		{Node: "c", Kind: "network", Name: "Calico", Action: diff.Update},
	}}
	var got []string
	for _, g := range res.Groups() {
		got = append(got, strings.Join(g.Nodes, "+"))
	}
	if want := "[a b+c]"; fmt.Sprint(got) != want {
		t.Errorf("groups %v, want %s", got, want)
	}
}
