package applier_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// scaleNode is remote node i of a large cluster, as a route table holds
// it: one /26 block 10.(100+i/1024).(i/4%256).(i%4*64)/26 behind VTEP
// 10.(241+i/65536).(i/256%256).(i%256) — distinct for i < 65,536.
func scaleNode(i int) plan.RouteNode {
	return plan.RouteNode{
		Node:      fmt.Sprintf("node-%05d", i),
		Address:   netip.AddrFrom4([4]byte{10, byte(241 + i/65536), byte(i / 256), byte(i)}),
		TunnelMAC: fmt.Sprintf("0E-2A-%02X-F1-%02X-%02X", byte(i/65536), byte(i/256), byte(i)),
		Blocks:    []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(100 + i/1024), byte(i / 4), byte(i % 4 * 64)}), 26)},
	}
}

// withTable is p (a compiled plan of the perf intent, VNI 4096) with a
// route table, assembled as an agent assembles it from the parts: the
// table named by one key whatever its nodes, so that nodes joining and
// leaving change the table's shards, not the plan's reference. The digest
// names the nodes' count, as a new plan would.
func withTable(p *plan.NodePlan, nodes []plan.RouteNode) *plan.NodePlan {
	c := *p
	key := plan.RouteKey(p.Cluster, "calico-vxlan", plan.RoutesRemoteSubnet, 4096, 4789, nil)
	c.SetRoutes(plan.NewRouteTable(p.Cluster, key, plan.RoutesRemoteSubnet, 4096, slices.Clone(nodes)))
	// The head's digest, as a published table has it; the plan's own
	// digest stays: a node joining changes the table, not the plan.
	c.Program = nil
	if _, err := plan.EncodeParts([]*plan.NodePlan{&c}); err != nil {
		panic(err)
	}
	c.Program = p.Program
	return &c
}

func scaleNodes(n int) []plan.RouteNode {
	out := make([]plan.RouteNode, n)
	for i := range out {
		out[i] = scaleNode(i)
	}
	return out
}

// TestOneNodeOneRoute is issue 16's "one node added to the cluster means
// exactly one route added on every other node": a node converged with a
// table of N nodes takes the table with one more node (the same key, so
// the same plan otherwise) in exactly one mutating HNS call, which adds
// that node's route, and nothing else; one node leaving is exactly one
// call removing its route. A node's VTEP moving is two (its route
// removed, then added: HNS policies have no modify). After each, a pass
// is a no-op.
func TestOneNodeOneRoute(t *testing.T) {
	const n = 2000
	dir, inv := writeIntent(t, t.TempDir(), 2, 80)
	ex := compile(t, dir, inv)
	base := ex.plans["win-1"]
	nodes := scaleNodes(n)
	joined := append(slices.Clone(nodes), scaleNode(n))
	left := slices.Delete(slices.Clone(nodes), n/2, n/2+1)
	moved := slices.Clone(nodes)
	moved[7].Address = netip.MustParseAddr("10.250.0.7")

	h := hnsmem.New()
	r := &applier.Reconciler{HNS: h}
	r.SetPlan(withTable(base, nodes))
	if _, err := r.Pass(ctx, ex.cluster); err != nil { // network, routes, host endpoint
		t.Fatal(err)
	}
	cni(t, h, base, ex.cluster)
	if _, err := r.Pass(ctx, ex.cluster); err != nil { // the pods' ACLs
		t.Fatal(err)
	}
	if got := len(heldRoutes(t, h, base)); got != n {
		t.Fatalf("converged with %d routes, want %d", got, n)
	}
	for _, tc := range []struct {
		name     string
		nodes    []plan.RouteNode
		requests []string // of the mutating calls, in order
	}{
		{"a node joins", joined, []string{"Add"}},
		{"back to N", nodes, []string{"Remove"}},
		{"a node leaves", left, []string{"Remove"}},
		{"it comes back", nodes, []string{"Add"}},
		{"a VTEP moves", moved, []string{"Remove", "Add"}},
	} {
		p := withTable(base, tc.nodes)
		r.SetPlan(p)
		h.ResetCalls()
		st, err := r.Pass(ctx, ex.cluster)
		if err != nil || st.Ops != len(tc.requests) || st.Digest != p.Digest || st.Routes != p.Routes.Digest || st.Routes == "" {
			t.Errorf("%s: %+v, %v; want %d ops and the plan converged with route table %s", tc.name, st, err, len(tc.requests), p.Routes.Digest)
		}
		var mutating []string
		for _, c := range h.Calls() {
			if !strings.HasPrefix(c.Method, "hcnEnumerate") && !strings.HasPrefix(c.Method, "GET ") {
				mutating = append(mutating, c.String())
			}
		}
		ok := h.MutatingCalls() == len(tc.requests) && len(mutating) == len(tc.requests)
		for i := 0; ok && i < len(mutating); i++ {
			ok = strings.HasPrefix(mutating[i], "hcnModifyNetwork "+base.Network.Name+": "+tc.requests[i]+" 1 RemoteSubnetRoute ")
		}
		if !ok {
			t.Errorf("%s: %d mutating calls %q, want hcnModifyNetwork of one RemoteSubnetRoute: %q", tc.name, h.MutatingCalls(), mutating, tc.requests)
		}
		if got, want := heldRoutes(t, h, base), wantRoutes(t, p); !slices.Equal(got, want) {
			t.Errorf("%s: HNS holds %d routes, the plan wants %d", tc.name, len(got), len(want))
		}
		h.ResetCalls()
		if st, err := r.Pass(ctx, ex.cluster); err != nil || st.Ops != 0 || h.MutatingCalls() != 0 {
			t.Errorf("%s: the pass after: %+v, %v, %d mutating calls", tc.name, st, err, h.MutatingCalls())
		}
	}
}

// BenchmarkFreshNodeCPU is issue 16's "a fresh node converges 5,000
// routes over hnsmem at 0 latency in ≤ 2 s of agent CPU": the passes of
// BenchmarkFreshNodeRoutes (network, routes and host endpoint; the CNI;
// the 110 pods' ACL lists) with HNS answering at once, so that what is
// left is the agent's own work, measured as the process's CPU time
// (getrusage: every goroutine, the garbage collector and the in-memory
// HNS included, so an upper bound). Metrics: cpu-s and wall-s of a fresh
// node, mutating calls.
func BenchmarkFreshNodeCPU(b *testing.B) {
	const remote, pods = 5000, 110
	dir, inv := writeIntent(b, b.TempDir(), pods, 80)
	ex := compile(b, dir, inv)
	fresh := withTable(ex.plans["win-1"], scaleNodes(remote))
	var cpu, wall time.Duration
	var calls int
	for b.Loop() {
		h := hnsmem.New()
		r := &applier.Reconciler{HNS: h}
		r.SetPlan(fresh)
		start, cpu0 := time.Now(), cpuTime(b)
		if _, err := r.Pass(ctx, ex.cluster); err != nil { // network, routes, host endpoint
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += cpuTime(b) - cpu0 // the CNI's endpoints are not the agent's work
		wall += time.Since(start)
		if n := cni(b, h, fresh, ex.cluster); n != pods {
			b.Fatalf("%d pods", n)
		}
		b.StartTimer()
		start, cpu0 = time.Now(), cpuTime(b)
		if st, err := r.Pass(ctx, ex.cluster); err != nil || st.Ops != pods { // the pods' ACL lists
			b.Fatalf("%+v, %v", st, err)
		}
		cpu += cpuTime(b) - cpu0
		wall += time.Since(start)
		if got := len(heldRoutes(b, h, fresh)); got != remote {
			b.Fatalf("%d routes, want %d", got, remote)
		}
		calls = h.MutatingCalls()
	}
	perNode := cpu.Seconds() / float64(b.N)
	b.ReportMetric(perNode, "cpu-s")
	b.ReportMetric(wall.Seconds()/float64(b.N), "wall-s")
	b.ReportMetric(float64(calls), "calls")
	if perNode > 2 {
		b.Errorf("a fresh node of %d routes took %.2f s of CPU, want ≤ 2 s", remote, perNode)
	}
}
