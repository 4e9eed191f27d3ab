package plan

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// routeNodes are n nodes, each with one /26 block of 10.0.0.0/8 and a
// tunnel MAC, named node-0000...
func routeNodes(n int) []RouteNode {
	nodes := make([]RouteNode, n)
	for i := range nodes {
		nodes[i] = RouteNode{
			Node:      fmt.Sprintf("node-%04d", i),
			Address:   netip.AddrFrom4([4]byte{172, 20, byte(i >> 8), byte(i)}),
			TunnelMAC: fmt.Sprintf("0E-2A-0A-%02X-%02X-%02X", byte(i>>10), byte(i>>2), byte(i&3)<<6),
			Blocks:    []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 10), byte(i >> 2), byte(i&3) << 6}), 26)},
		}
	}
	return nodes
}

func vxlanTable(nodes []RouteNode) *RouteTable {
	return NewRouteTable("demo", RouteKey("demo", "calico-vxlan", RoutesRemoteSubnet, 4096, 4789, nil), RoutesRemoteSubnet, 4096, nodes)
}

// policy is a network policy whose encoding takes about size bytes.
func policy(id string, size int) NetworkPolicy {
	return NetworkPolicy{ID: id, Selector: "app == '" + strings.Repeat("x", size) + "'", Ingress: true,
		IngressRules: []PolicyRule{{ID: id + ".r0", Action: "Allow"}}}
}

func sampleProgram() *Program {
	return &Program{Tiers: []Tier{
		{Name: "security", DefaultAction: "Pass", Policies: []NetworkPolicy{policy("gnp.deny-metadata", 10)}},
		{Name: "empty", DefaultAction: "Deny", Policies: []NetworkPolicy{}},
		{Name: "default", DefaultAction: "Deny", Policies: []NetworkPolicy{policy("knp.default.web", 10), policy("knp.default.db", 10)}},
	}}
}

// planOn is samplePlan for node, given routes and prog (shared, as the
// compiler shares them), its own block taken from routes.
func planOn(node string, routes *RouteTable, prog *Program) *NodePlan {
	p := samplePlan()
	p.Node, p.Program, p.Unresolved = node, prog, nil
	p.SetRoutes(routes)
	if routes != nil {
		for _, n := range routes.Nodes {
			if n.Node == node && len(n.Blocks) > 0 {
				b := n.Blocks[0]
				p.Network.Ipams[0].Subnets[0].IpAddressPrefix = b
				p.HostEndpoint.IpConfigurations[0].IpAddress = b.Addr().Next().Next()
				p.Network.Ipams[0].Subnets[0].Routes[0].NextHop = b.Addr().Next()
				p.PodEndpoint.Gateway = b.Addr().Next()
			}
		}
	}
	return p
}

// wire is what a reader gets: the encoded parts and plans.
type wire struct {
	parts []EncodedPart
	plans map[string][]byte
}

func encodeAll(t *testing.T, plans []*NodePlan) wire {
	t.Helper()
	parts, err := EncodeParts(plans)
	if err != nil {
		t.Fatal(err)
	}
	w := wire{parts: parts, plans: map[string][]byte{}}
	for _, p := range plans {
		data, err := Encode(p)
		if err != nil {
			t.Fatal(err)
		}
		w.plans[p.Node] = data
	}
	return w
}

// decodeParts decodes each part by its kind into a Parts.
func decodeParts(t *testing.T, parts []EncodedPart) *Parts {
	t.Helper()
	var ps Parts
	for _, e := range parts {
		v, err := decodeAny(e.Data, e.Name, e.Kind)
		if err != nil {
			t.Fatalf("part %s: %v", e.Name, err)
		}
		ps.Add(v)
	}
	return &ps
}

func decodeAny(data []byte, name, kind string) (any, error) {
	switch kind {
	case KindRouteTable:
		return DecodeRouteTable(data, name)
	case KindRouteShard:
		return DecodeRouteShard(data, name)
	case KindProgramChunk:
		return DecodeProgramChunk(data, name)
	}
	return nil, fmt.Errorf("kind %q", kind)
}

// TestPartsRoundTrip: what EncodeParts and Encode write, decoded and
// assembled, gives each plan the routes and program it was compiled with;
// the plans assembled from one Parts share them, as the compiler's do.
func TestPartsRoundTrip(t *testing.T) {
	hostTable := NewRouteTable("demo", RouteKey("demo", "static-routes", RoutesHost, 0, 0, nil), RoutesHost, 0, routeNodes(5))
	live := routeNodes(4)
	live = append(live, RouteNode{Node: "linux-1", Address: netip.MustParseAddr("172.21.0.1"), LiveBlocks: true})
	for _, tt := range []struct {
		name    string
		routes  *RouteTable
		program *Program
	}{
		{"routes and program", vxlanTable(routeNodes(5)), sampleProgram()},
		{"host routes", hostTable, nil},
		{"live blocks and no tunnel MACs", vxlanTable(live), nil},
		{"program only", nil, sampleProgram()},
		{"no parts", nil, nil},
		{"many nodes", vxlanTable(routeNodes(3000)), sampleProgram()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "live blocks and no tunnel MACs" {
				for i := range tt.routes.Nodes {
					tt.routes.Nodes[i].TunnelMAC = ""
				}
			}
			var plans []*NodePlan
			for _, n := range []string{"node-0000", "node-0001", "node-0003"} {
				plans = append(plans, planOn(n, tt.routes, tt.program))
			}
			w := encodeAll(t, plans) // sets the plans' digests and references
			var want []string
			for _, p := range plans {
				var b strings.Builder
				if err := WriteText(&b, p); err != nil {
					t.Fatal(err)
				}
				want = append(want, b.String())
				if err := Validate(p); err != nil {
					t.Fatalf("the compiled plan: %v", err)
				}
			}
			// One chunk for a small program; the head and one part per
			// shard that holds a node.
			wantParts := 0
			if tt.program != nil {
				wantParts++
			}
			if tt.routes != nil {
				shards := map[int]bool{}
				for _, n := range tt.routes.Nodes {
					shards[ShardOf(n.Node)] = true
				}
				wantParts += 1 + len(shards)
			}
			if len(w.parts) != wantParts || (tt.name == "many nodes" && wantParts != RouteShards+2) {
				t.Errorf("%d parts, want %d", len(w.parts), wantParts)
			}
			for _, e := range w.parts {
				if len(e.Data) > MaxPartSize {
					t.Errorf("part %s: %d bytes", e.Name, len(e.Data))
				}
				if err := CheckPartName(e.Name); err != nil {
					t.Error(err)
				}
			}
			ps := decodeParts(t, w.parts)
			var got []*NodePlan
			for _, p := range plans {
				q, err := Decode(w.plans[p.Node], p.Node)
				if err != nil {
					t.Fatal(err)
				}
				if err := ps.Assemble(q); err != nil {
					t.Fatalf("Assemble: %v", err)
				}
				if err := Validate(q); err != nil {
					t.Fatalf("the assembled plan: %v", err)
				}
				if d := cmp.Diff(p.RemoteSubnetRoutes(), q.RemoteSubnetRoutes(), cmpPlan); d != "" {
					t.Errorf("%s: RemoteSubnetRoutes (-compiled +assembled):\n%s", p.Node, d)
				}
				if d := cmp.Diff(p.HostRoutes(), q.HostRoutes(), cmpPlan); d != "" {
					t.Errorf("%s: HostRoutes (-compiled +assembled):\n%s", p.Node, d)
				}
				if d := cmp.Diff(p.LiveBlockNodes(), q.LiveBlockNodes(), cmpPlan); d != "" {
					t.Errorf("%s: LiveBlockNodes (-compiled +assembled):\n%s", p.Node, d)
				}
				if d := cmp.Diff(p.Program, q.Program, cmpPlan); d != "" {
					t.Errorf("%s: program (-compiled +assembled):\n%s", p.Node, d)
				}
				names := ps.Names(q)
				if len(names) != len(w.parts) {
					t.Errorf("%s: Names lists %d parts, %d written", p.Node, len(names), len(w.parts))
				}
				got = append(got, q)
			}
			for i, q := range got {
				var b strings.Builder
				if err := WriteText(&b, q); err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(want[i], b.String()); d != "" {
					t.Errorf("%s: text (-compiled +assembled):\n%s", q.Node, d)
				}
				if q.Routes != got[0].Routes || q.Program != got[0].Program {
					t.Errorf("%s: assembled parts are not shared with %s", q.Node, got[0].Node)
				}
			}
			if tt.routes != nil && len(got[0].RemoteSubnetRoutes())+len(got[0].HostRoutes()) == 0 && tt.name != "live blocks and no tunnel MACs" {
				t.Error("the case routes nothing")
			}
			// Encoding again gives the same bytes.
			again := encodeAll(t, plans)
			if !slices.EqualFunc(w.parts, again.parts, func(a, b EncodedPart) bool { return a.Name == b.Name && bytes.Equal(a.Data, b.Data) }) {
				t.Error("encoding the parts twice gave other parts")
			}
		})
	}
}

// TestAssembleRefuses: a part a plan names that the reader does not hold,
// or holds at another digest (a shard, a chunk) or key (the head), is a
// *PartError naming it, and the plan stays unassembled: Validate refuses
// it, so no reader applies it.
func TestAssembleRefuses(t *testing.T) {
	plans := []*NodePlan{planOn("node-0001", vxlanTable(routeNodes(40)), sampleProgram())}
	w := encodeAll(t, plans)
	p := plans[0]
	head, chunk := p.RouteTable.Name, p.ProgramChunks[0].Name
	shard := ShardName(head, ShardOf("node-0007"))
	for _, tt := range []struct {
		name   string
		mutate func(ps *Parts)
		part   string
		have   bool // the error says what is held instead
	}{
		{"no head", func(ps *Parts) { delete(ps.Tables, head) }, head, false},
		{"head of another key", func(ps *Parts) {
			other := *ps.Tables[head]
			other.Key = "sha256:" + strings.Repeat("0", 64)
			ps.Tables[head] = &other
		}, head, true},
		{"missing shard", func(ps *Parts) { delete(ps.Shards, shard) }, shard, false},
		{"shard at another digest", func(ps *Parts) {
			other := *ps.Shards[shard]
			other.Digest = "sha256:" + strings.Repeat("1", 64)
			ps.Shards[shard] = &other
		}, shard, true},
		{"missing chunk", func(ps *Parts) { delete(ps.Chunks, chunk) }, chunk, false},
		{"chunk at another digest", func(ps *Parts) {
			other := *ps.Chunks[chunk]
			other.Digest = "sha256:" + strings.Repeat("2", 64)
			ps.Chunks[chunk] = &other
		}, chunk, true},
		{"nothing held", func(ps *Parts) { *ps = Parts{} }, head, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ps := decodeParts(t, w.parts)
			tt.mutate(ps)
			q, err := Decode(w.plans[p.Node], p.Node)
			if err != nil {
				t.Fatal(err)
			}
			err = ps.Assemble(q)
			var pe *PartError
			if !errors.As(err, &pe) || !errors.Is(err, ErrPartMissing) {
				t.Fatalf("Assemble = %v, want a *PartError", err)
			}
			if pe.Part != tt.part || pe.Node != p.Node || pe.Want == "" || (pe.Have != "") != tt.have {
				t.Errorf("PartError %+v, want part %s (have set: %v)", pe, tt.part, tt.have)
			}
			if !strings.Contains(err.Error(), tt.part) {
				t.Errorf("error %q does not name %s", err, tt.part)
			}
			if q.Routes != nil || q.Program != nil {
				t.Errorf("a plan that failed to assemble has parts attached")
			}
			if Validate(q) == nil {
				t.Errorf("Validate accepted a plan whose parts are not assembled")
			}
		})
	}
	// Assembling again, with the parts now held, succeeds.
	ps := decodeParts(t, w.parts)
	q, _ := Decode(w.plans[p.Node], p.Node)
	delete(ps.Chunks, chunk)
	if ps.Assemble(q) == nil {
		t.Fatal("assembled without a chunk")
	}
	ps.Add(mustDecode(t, w, chunk))
	if err := ps.Assemble(q); err != nil || q.Routes == nil || q.Program == nil {
		t.Fatalf("Assemble with every part: %v", err)
	}
}

func mustDecode(t *testing.T, w wire, name string) any {
	t.Helper()
	for _, e := range w.parts {
		if e.Name == name {
			v, err := decodeAny(e.Data, e.Name, e.Kind)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no part %s", name)
	return nil
}

// TestProgramChunks: a program over a part's size is cut into chunks of
// whole policies, each under MaxPartSize; a tier that spans chunks is in
// each, with its defaultAction, and the chunks re-merge into the program.
// A single policy over the budget is an error naming it.
func TestProgramChunks(t *testing.T) {
	big := &Program{Tiers: []Tier{{Name: "platform", DefaultAction: "Pass"}, {Name: "default", DefaultAction: "Deny"}}}
	for i := range 30 {
		big.Tiers[0].Policies = append(big.Tiers[0].Policies, policy(fmt.Sprintf("gnp.p%02d", i), 20<<10))
	}
	for i := range 10 {
		big.Tiers[1].Policies = append(big.Tiers[1].Policies, policy(fmt.Sprintf("knp.default.p%02d", i), 1<<10))
	}
	parts, err := encodeProgram("demo", big)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) < 3 {
		t.Fatalf("a program of ~610 KiB in %d chunks", len(parts))
	}
	var ps Parts
	var refs []PartRef
	platform := 0
	for _, e := range parts {
		if len(e.Data) > MaxPartSize {
			t.Errorf("chunk %s: %d bytes, more than %d", e.Name, len(e.Data), MaxPartSize)
		}
		c, err := DecodeProgramChunk(e.Data, e.Name)
		if err != nil {
			t.Fatal(err)
		}
		if c.Tiers[0].Name == "platform" {
			platform++
			if c.Tiers[0].DefaultAction != "Pass" {
				t.Errorf("chunk %s: tier platform with defaultAction %s", e.Name, c.Tiers[0].DefaultAction)
			}
		}
		ps.Add(c)
		refs = append(refs, PartRef{Name: e.Name, Digest: e.Digest})
	}
	if platform < 2 {
		t.Errorf("tier platform is in %d chunks, want it to span chunks", platform)
	}
	p := &NodePlan{Node: "win-1", ProgramChunks: refs}
	if err := ps.Assemble(p); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(big, p.Program, cmpPlan); d != "" {
		t.Errorf("re-merged program (-want +got):\n%s", d)
	}

	// One policy too big for any chunk.
	huge := &Program{Tiers: []Tier{{Name: "default", DefaultAction: "Deny", Policies: []NetworkPolicy{
		policy("knp.default.small", 10), policy("knp.default.huge", MaxPartSize)}}}}
	huge.Tiers[0].Policies[1].Source = "policies/huge.yaml:1:1"
	_, err = EncodeParts([]*NodePlan{{Node: "win-1", Program: huge}})
	if err == nil || !strings.Contains(err.Error(), "knp.default.huge") || !strings.Contains(err.Error(), "policies/huge.yaml:1:1") {
		t.Errorf("EncodeParts of a policy over a chunk: %v, want an error naming it and where it is written", err)
	}
}

// TestShardOfStability: a node joins the cluster in one shard; the plans,
// which name their table by key, do not change, and of the parts only
// that shard and the head do. The hash is part of the format: a reader
// never computes it, but a change would move every node and rewrite
// every shard, so it is pinned.
func TestShardOfStability(t *testing.T) {
	for node, want := range map[string]int{"win-1": 23, "node-0000": ShardOf("node-0000")} {
		if got := ShardOf(node); got != want || got < 0 || got >= RouteShards {
			t.Errorf("ShardOf(%q) = %d, want %d", node, got, want)
		}
	}
	compile := func(n int) wire {
		nodes := routeNodes(n)
		var plans []*NodePlan
		table := vxlanTable(nodes)
		for _, name := range []string{"node-0000", "node-0001"} {
			plans = append(plans, planOn(name, table, sampleProgram()))
		}
		return encodeAll(t, plans)
	}
	before, after := compile(500), compile(501) // after adds node-0500
	if len(before.parts) != RouteShards+2 || len(after.parts) != RouteShards+2 {
		t.Fatalf("%d and %d parts, want %d", len(before.parts), len(after.parts), RouteShards+2)
	}
	var changed []string
	for i, b := range before.parts {
		a := after.parts[i]
		if a.Name != b.Name {
			t.Fatalf("part %d: %s became %s", i, b.Name, a.Name)
		}
		if !bytes.Equal(a.Data, b.Data) {
			changed = append(changed, a.Name)
		}
	}
	var head string
	for _, e := range before.parts {
		if e.Kind == KindRouteTable {
			head = e.Name
		}
	}
	want := []string{head, ShardName(head, ShardOf("node-0500"))}
	slices.Sort(want)
	if !slices.Equal(changed, want) {
		t.Errorf("adding a node changed %v, want %v (its shard and the head)", changed, want)
	}
	for node, data := range before.plans {
		if !bytes.Equal(data, after.plans[node]) {
			t.Errorf("adding a node changed the plan of %s", node)
		}
	}
}

// TestDecodePartRejects: a part is verified as a plan is; a reader of
// format 2 refuses format 1 saying which hnsplan to use.
func TestDecodePartRejects(t *testing.T) {
	plans := []*NodePlan{planOn("node-0001", vxlanTable(routeNodes(3)), sampleProgram())}
	w := encodeAll(t, plans)
	byKind := map[string]EncodedPart{}
	for _, e := range w.parts {
		byKind[e.Kind] = e
	}
	head, shard, chunk := byKind[KindRouteTable], byKind[KindRouteShard], byKind[KindProgramChunk]
	oversize := append(bytes.TrimSuffix(shard.Data, []byte("}\n")), []byte(`, "pad": "`+strings.Repeat("x", MaxPartSize)+`"}`)...)
	for _, tt := range []struct {
		name, kind, part string
		data             []byte
		want             error
		says             string
	}{
		{"format 1", KindRouteTable, head.Name, bytes.Replace(head.Data, []byte(`"formatVersion": "2"`), []byte(`"formatVersion": "1"`), 1), ErrMajorVersion,
			"format 1 (every route and the whole policy program inside each plan) is written by hnsplan releases before the split into parts"},
		{"format 3", KindRouteShard, shard.Name, bytes.Replace(shard.Data, []byte(`"formatVersion": "2"`), []byte(`"formatVersion": "3"`), 1), ErrMajorVersion, "this version reads 2.x"},
		{"oversize", KindRouteShard, shard.Name, oversize, ErrTooLarge, "more than a RouteShard's 262144"},
		{"a shard as a head", KindRouteTable, shard.Name, shard.Data, ErrWrongKind, `kind is "RouteShard", not RouteTable`},
		{"a head as a chunk", KindProgramChunk, head.Name, head.Data, ErrWrongKind, `kind is "RouteTable", not ProgramChunk`},
		{"a plan as a chunk", KindProgramChunk, chunk.Name, w.plans["node-0001"], ErrWrongKind, `kind is "NodePlan"`},
		{"another name", KindRouteShard, ShardName(head.Name, 99), shard.Data, ErrForeignPart, "the part is named " + fmt.Sprintf("%q", shard.Name)},
		{"another chunk's name", KindProgramChunk, "program-000000000000", chunk.Data, ErrForeignPart, "program-000000000000"},
		{"tampered", KindRouteShard, shard.Name, bytes.Replace(shard.Data, []byte(`"172.20.0.`), []byte(`"172.20.9.`), 1), ErrDigest, "digest does not match"},
		{"tampered chunk", KindProgramChunk, chunk.Name, bytes.Replace(chunk.Data, []byte(`"Allow"`), []byte(`"Deny"`), 1), ErrDigest, "digest does not match"},
		{"no digest", KindRouteTable, head.Name, bytes.Replace(head.Data, []byte(head.Digest), nil, 1), ErrMissingDigest, "no digest"},
		{"not JSON", KindRouteTable, head.Name, head.Data[:len(head.Data)/2], nil, "not valid JSON"},
		{"a bad address", KindRouteShard, shard.Name, bytes.Replace(shard.Data, []byte(`"172.20.0.`), []byte(`"172.300.0.`), 1), ErrInvalid, "ParseAddr"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, err := decodeAny(tt.data, tt.part, tt.kind)
			var de *DecodeError
			if !errors.As(err, &de) || de.Part != tt.part {
				t.Fatalf("decode = %v, %v; want a *DecodeError for part %s", v, err, tt.part)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("decode = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.says) || !strings.HasPrefix(err.Error(), "part "+tt.part+": ") {
				t.Errorf("error %q does not name the part and say %q", err, tt.says)
			}
		})
	}
	for _, e := range w.parts {
		if _, err := decodeAny(e.Data, e.Name, e.Kind); err != nil {
			t.Errorf("the good part %s: %v", e.Name, err)
		}
	}
}

// TestCheckPartName: only the names compile gives parts become files and
// ConfigMaps.
func TestCheckPartName(t *testing.T) {
	for name, ok := range map[string]bool{
		"routes-0123456789ab": true, "routes-0123456789ab-3f": true, "program-0123456789ab": true,
		"routes-0123456789AB": false, "routes-0123456789ab-3": false, "routes-0123456789ab-3f0": false, "program-0123456789ab-00": false,
		"../routes-0123456789ab": false, "routes-0123456789a/": false, "plan-win-1": false, "": false, "index": false,
	} {
		if err := CheckPartName(name); (err == nil) != ok {
			t.Errorf("CheckPartName(%q) = %v, want ok %v", name, err, ok)
		}
	}
	for _, tt := range []struct {
		e  IndexPart
		ok bool
	}{
		{IndexPart{Name: "routes-0123456789ab", File: "_routes-0123456789ab.json"}, true},
		{IndexPart{Name: "routes-0123456789ab", File: "routes-0123456789ab.json"}, false},
		{IndexPart{Name: "routes-0123456789ab", File: "../_routes-0123456789ab.json"}, false},
		{IndexPart{Name: "routes-0123456789ab", File: "_program-0123456789ab.json"}, false},
		{IndexPart{Name: "..", File: "_...json"}, false},
	} {
		if got := tt.e.IsPartFile(); got != tt.ok {
			t.Errorf("%+v.IsPartFile() = %v", tt.e, got)
		}
	}
}

// TestEncodePartsRefusesTwoTablesOfOneName: plans of two compiles whose
// tables share a key but not their entries cannot be written together,
// or one table would silently stand for both.
func TestEncodePartsRefusesTwoTablesOfOneName(t *testing.T) {
	key := RouteKey("c", "calico-vxlan", RoutesRemoteSubnet, 4096, 4789, nil)
	a := &NodePlan{Node: "win-1", Cluster: "c"}
	b := &NodePlan{Node: "win-2", Cluster: "c"}
	a.SetRoutes(NewRouteTable("c", key, RoutesRemoteSubnet, 4096, routeNodes(3)))
	b.SetRoutes(NewRouteTable("c", key, RoutesRemoteSubnet, 4096, routeNodes(4)))
	if _, err := EncodeParts([]*NodePlan{a, b}); err == nil || !strings.Contains(err.Error(), "two different parts named") {
		t.Fatalf("EncodeParts = %v, want an error naming the two parts", err)
	}
	b.SetRoutes(NewRouteTable("c", key, RoutesRemoteSubnet, 4096, routeNodes(3)))
	if _, err := EncodeParts([]*NodePlan{a, b}); err != nil {
		t.Fatalf("EncodeParts of two equal tables: %v", err)
	}
}
