package applier_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// BenchmarkVXLANChangeWindow measures how long a VXLAN VNI change keeps
// the nodes apart, at maxUnavailable 1 (rolling) and with
// windows.rollout.vxlanChange all-at-once, for the same nodes: real
// agents (their passes, the replace flow, the rollout slots' protocol)
// over in-memory HNS, a fake API server's Leases, and a kubelet that takes
// vxlanBenchDrain to end an evicted pod. Times are a tenth of a real
// cluster's (a 3 s drain for 30 s, a 1 s slot poll for 10 s); the
// replace's own 2 s drain poll is not scaled. It reports
//
//   - rollout-s: from the new plans published to the last node converged
//     on the new VNI: how long a Windows node is on another VNI than the
//     Linux nodes when FelixConfiguration is patched as the rollout
//     starts, and, all-at-once, how long every Windows pod is drained;
//   - split-s: from the first old network deleted to the last new one
//     created, while Windows nodes on the two VNIs cannot reach each
//     other;
//   - waves (the plan's, Rollout.Waves), s/wave (rollout-s per wave, to
//     hold against vxlan's estimate: drain + recreate + slot poll), and
//     peak-cordoned (the most nodes cordoned at once).
//
// Run with -benchtime 1x: each run is one whole rollout.
func BenchmarkVXLANChangeWindow(b *testing.B) {
	for _, mode := range []struct {
		name    string
		rollout *plan.Rollout
	}{
		{"rolling", &plan.Rollout{MaxUnavailable: "1"}},
		{"all-at-once", &plan.Rollout{MaxUnavailable: "1", VXLANChange: plan.VXLANAllAtOnce}},
	} {
		b.Run(fmt.Sprintf("%s/nodes=%d", mode.name, vxlanBenchNodes), func(b *testing.B) {
			var sum vxlanRun
			for range b.N {
				r := vxlanWindow(b, mode.rollout)
				sum.rollout, sum.split, sum.peak = sum.rollout+r.rollout, sum.split+r.split, max(sum.peak, r.peak)
			}
			n := time.Duration(b.N)
			waves, err := mode.rollout.Waves(vxlanBenchNodes, true)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric((sum.rollout / n).Seconds(), "rollout-s")
			b.ReportMetric((sum.split / n).Seconds(), "split-s")
			b.ReportMetric(float64(waves), "waves")
			b.ReportMetric((sum.rollout/n).Seconds()/float64(waves), "s/wave")
			b.ReportMetric(float64(sum.peak), "peak-cordoned")
		})
	}
}

// vxlanRun is what one rollout measured.
type vxlanRun struct {
	rollout, split time.Duration
	peak           int
}

const (
	vxlanBenchNodes = 4
	vxlanBenchDrain = 3 * time.Second
)

// benchKube is one node's view of a cluster of Windows nodes, each with
// one pod whose endpoint the kubelet removes vxlanBenchDrain after its
// eviction; cordons are counted cluster-wide.
type benchKube struct {
	*fakeKube
	c   *benchCluster
	hns *hnsmem.HNS
	pod string
}

type benchCluster struct {
	mu       sync.Mutex
	nodes    []kube.Node
	cordoned map[string]bool
	peak     int
	evicting map[string]bool // by node
}

func (k *benchKube) Nodes() []kube.Node { return k.c.nodes }

func (k *benchKube) Cordon(context.Context) error   { return k.c.cordon(k.node.Name, true) }
func (k *benchKube) Uncordon(context.Context) error { return k.c.cordon(k.node.Name, false) }

func (c *benchCluster) cordon(node string, on bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cordoned[node] = on
	n := 0
	for _, on := range c.cordoned {
		if on {
			n++
		}
	}
	c.peak = max(c.peak, n)
	return nil
}

// Evict asks the pod to go: its endpoint goes vxlanBenchDrain later.
func (k *benchKube) Evict(context.Context) ([]string, error) {
	k.c.mu.Lock()
	defer k.c.mu.Unlock()
	snap, err := k.hns.Snapshot(context.Background())
	if err != nil {
		return nil, err
	}
	if snap.Endpoint(k.pod) == nil {
		return nil, nil
	}
	if !k.c.evicting[k.node.Name] {
		k.c.evicting[k.node.Name] = true
		time.AfterFunc(vxlanBenchDrain, func() { _ = k.hns.RemoveEndpoint(k.pod) })
	}
	return []string{k.pod}, nil
}

// vxlanWindow runs vxlanBenchNodes agents through a VNI change at rollout
// r and returns what it measured.
func vxlanWindow(b *testing.B, r *plan.Rollout) vxlanRun {
	b.Helper()
	ex := compile(b, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	base := ex.plans["win-1"]
	block := base.Network.Ipams[0].Subnets[0].IpAddressPrefix
	const vni = 5000
	cs := fake.NewClientset()
	c := &benchCluster{cordoned: map[string]bool{}, evicting: map[string]bool{}}
	w := &window{}
	type node struct {
		name string
		hns  *hnsmem.HNS
		src  chanSource
		a    *applier.Agent
		kube *benchKube
	}
	var nodes []*node
	for i := range vxlanBenchNodes {
		n := &node{name: fmt.Sprintf("win-b%d", i), hns: hnsmem.New(hnsmem.ManagementAddress(mgmt(b, base))), src: make(chanSource)}
		c.nodes = append(c.nodes, windowsNode(n.name))
		n.kube = &benchKube{fakeKube: &fakeKube{synced: true, node: kube.Node{Name: n.name}}, c: c, hns: n.hns, pod: "web_" + base.Network.Name}
		a, err := applier.NewAgent(applier.Config{Node: n.name, HNS: &windowHNS{HNS: n.hns, vni: func() uint32 { return vni }, w: w}, Plans: n.src, PlansFrom: "bench",
			StateDir: b.TempDir(), HostRoutes: replace.NewMemRoutes(), Listen: "127.0.0.1:0", Kube: n.kube, Leases: cs.CoordinationV1(),
			// A long lease: the fake API server keeps a Lease's
			// resourceVersion through renewals, which a taker would read
			// as a dead holder's once the duration passed.
			SlotDuration: time.Hour, SlotPoll: time.Second, DrainTimeout: time.Minute, Resync: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		n.a = a
		nodes = append(nodes, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.a.Run(ctx); err != nil && ctx.Err() == nil {
				b.Errorf("agent %s: %v", n.name, err)
			}
		}()
	}
	converged := func(digest string) {
		for _, n := range nodes {
			for {
				if st := n.a.Status(); st.State == kube.StateConverged && st.Applied == digest {
					break
				}
				if ctx.Err() != nil {
					b.Fatalf("node %s: %+v", n.name, n.a.Status())
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	first := *base
	first.Digest, first.Rollout = "sha256:first", r
	for _, n := range nodes {
		q := first
		q.Node = n.name
		n.src <- &q
	}
	converged(first.Digest)
	for _, n := range nodes {
		if err := n.hns.AddPodEndpoint(base.Network.Name, n.kube.pod, netip.PrefixFrom(block.Addr().Next().Next().Next(), block.Bits()), "", nil); err != nil {
			b.Fatal(err)
		}
	}
	moved := withVNI(&first, vni)
	moved.Rollout = r
	b.ResetTimer()
	published := time.Now()
	for _, n := range nodes {
		q := *moved
		q.Node = n.name
		n.src <- &q
	}
	converged(moved.Digest)
	done := time.Now()
	b.StopTimer()
	c.mu.Lock()
	defer c.mu.Unlock()
	split := w.span()
	if split == 0 && vxlanBenchNodes > 1 && c.peak < vxlanBenchNodes {
		b.Fatalf("no network replaced, or none in turn: %+v", w)
	}
	return vxlanRun{rollout: done.Sub(published), split: split, peak: c.peak}
}
