package applier

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/hnsplan/hnsplan/applier/hns"
)

// GC removes pod endpoints that no pod explains: endpoints on the plan's
// network that are neither the host endpoint nor kube-proxy's remote
// endpoints, and whose address no pod of this node holds. The CNI leaks
// them when a pod's DEL never reaches it (calico-windows.md, #9142), and
// a leaked endpoint keeps its address from the next pod and the network
// from ever being deleted.
//
// It is careful, since the CNI owns these endpoints: an endpoint is
// removed only after it has been unexplained for Grace, measured by this
// process (a restart starts the clock again), and only in a pass whose
// cluster view is synced and whose API server answered (Reachable). It
// never touches another network, a remote endpoint or the host endpoint.
type GC struct {
	// Grace is how long an endpoint must stay unexplained; a pod's
	// endpoint exists before its address reaches the API server. Default
	// 10 minutes.
	Grace time.Duration
	// Reachable says whether the API server answers now (a cache can be
	// synced and stale). Nil means it is never asked: no GC.
	Reachable func(context.Context) bool
	// Now is the clock (tests).
	Now func() time.Time

	mu    sync.Mutex
	since map[string]time.Time // endpoint name -> first seen unexplained
}

// ops returns the deletes that are due in have, for the node's pods in c.
func (g *GC) ops(ctx context.Context, node string, have *hns.State, want *hns.Want, c *Cluster) []hns.Op {
	if g == nil || c == nil || g.Reachable == nil {
		return nil
	}
	now := time.Now
	if g.Now != nil {
		now = g.Now
	}
	grace := g.Grace
	if grace <= 0 {
		grace = 10 * time.Minute
	}
	explained := map[netip.Addr]bool{}
	for _, p := range c.Pods {
		if c.nodeOf(p) == node {
			explained[p.IP] = true
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.since == nil {
		g.since = map[string]time.Time{}
	}
	seen := map[string]bool{}
	var due []hns.Op
	for _, e := range have.EndpointsOn(want.Network.Name) {
		if e.Name == want.HostEndpoint.Name || e.Remote || explained[e.IP.Addr()] {
			continue
		}
		seen[e.Name] = true
		first, ok := g.since[e.Name]
		if !ok {
			g.since[e.Name] = now()
			continue
		}
		if now().Sub(first) >= grace {
			due = append(due, hns.Op{Action: hns.Delete, Kind: hns.KindEndpoint, Name: e.Name, Network: e.Network,
				Reason: fmt.Sprintf("no pod of node %s has %s (for %s)", node, e.IP.Addr(), now().Sub(first).Round(time.Second))})
		}
	}
	for name := range g.since {
		if !seen[name] {
			delete(g.since, name) // explained again, or gone
		}
	}
	if len(due) > 0 && !g.Reachable(ctx) {
		return nil
	}
	return due
}

// forget drops the clock of an endpoint that was removed.
func (g *GC) forget(name string) {
	g.mu.Lock()
	delete(g.since, name)
	g.mu.Unlock()
}
