package audit

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/hnsplan/hnsplan/applier/hns"
)

// Cleanup is the opt-in clean-up of orphan pod endpoints
// (hnsplan-agent run --clean-orphans). The endpoints are the CNI's, so it
// removes one only when every guard holds (Select); any doubt leaves it.
type Cleanup struct {
	// Age is how long an endpoint must have been orphaned, by the
	// agent's first-seen record (--clean-orphans-age; at least MinAge).
	Age time.Duration
	// Max is how many endpoints one pass removes at most
	// (--clean-orphans-max; at least 1).
	Max int
}

// MinAge is the least Cleanup.Age: a CNI makes a pod's endpoint before
// the pod's address reaches the API server.
const MinAge = time.Minute

// DefaultCleanupAge and DefaultCleanupMax are the flags' defaults.
const (
	DefaultCleanupAge = 30 * time.Minute
	DefaultCleanupMax = 5
)

// Validate says what is wrong with c's settings.
func (c Cleanup) Validate() error {
	if c.Age < MinAge {
		return fmt.Errorf("--clean-orphans-age %v: give %v or more (a CNI makes a pod's endpoint before the pod's address is in the cluster)", c.Age, MinAge)
	}
	if c.Max < 1 || c.Max > 100 {
		return fmt.Errorf("--clean-orphans-max %d: give 1 to 100", c.Max)
	}
	return nil
}

// Guards is what Select knows beside the report.
type Guards struct {
	// Want is the plan's: only endpoints on the networks it names (its
	// own network, or the networks a policy-only plan matches) go.
	Want *hns.Want
	// ClusterSynced says Pods are the synced cluster's, every node's.
	// Without it nothing goes: a plan's pods are a compile-time view.
	ClusterSynced bool
	Pods          []Pod
	// Reachable says the API server answered just now: a synced cache
	// can be stale while it is down.
	Reachable bool
	// Have is the snapshot the report was made of.
	Have *hns.State
}

// Refusal is an orphan Select leaves, and why.
type Refusal struct {
	Key, Why string
}

// Select returns the deletes of the orphans of r that every guard lets
// go, at most c.Max, and why each other orphan stays. The guards: the
// report's pods are the synced cluster's, never a plan's; the API server
// answers; the endpoint is on a network the plan names; no pod anywhere
// has its address; it is not remote, not the host endpoint, not attached
// to a namespace; no other endpoint has its name (HNS does not keep
// names unique, and a delete names one); it has been orphaned at least
// c.Age.
func (c Cleanup) Select(r *Report, g Guards) (del []hns.Op, refused []Refusal) {
	refuseAll := func(why string) ([]hns.Op, []Refusal) {
		for _, o := range r.Orphans {
			refused = append(refused, Refusal{o.Key, why})
		}
		return nil, refused
	}
	switch {
	case len(r.Orphans) == 0:
		return nil, nil
	case c.Validate() != nil:
		return refuseAll(c.Validate().Error())
	case r.PodsFrom != "cluster" || !g.ClusterSynced:
		return refuseAll("the pods are not the synced cluster's (never a plan's)")
	case !g.Reachable:
		return refuseAll("the API server does not answer now")
	case g.Want == nil || g.Have == nil:
		return refuseAll("no plan")
	}
	anyPod := map[netip.Addr]string{}
	for _, p := range g.Pods {
		if p.IP.IsValid() {
			anyPod[p.IP] = p.Name
		}
	}
	names := map[string]int{}
	for i := range g.Have.Endpoints {
		names[g.Have.Endpoints[i].Name]++
	}
	for _, o := range r.Orphans {
		e := o.Endpoint
		var why string
		switch {
		case !planNames(g.Want, e.Network):
			why = "on network " + e.Network + ", which the plan does not name"
		case anyPod[e.IP.Addr()] != "":
			why = fmt.Sprintf("pod %s has %s", anyPod[e.IP.Addr()], e.IP.Addr())
		case e.Remote:
			why = "a remote endpoint (kube-proxy's)"
		case e.HostAttached || (g.Want.Foreign == nil && e.Name == g.Want.HostEndpoint.Name):
			why = "the host endpoint"
		case e.Attached:
			why = "attached to a namespace: a sandbox may still use it"
		case names[e.Name] != 1:
			why = fmt.Sprintf("%d endpoints are named %s", names[e.Name], e.Name)
		case r.At.Sub(o.Since) < c.Age:
			why = fmt.Sprintf("orphaned for %s, less than %s", age(r.At.Sub(o.Since)), c.Age)
		case len(del) >= c.Max:
			why = fmt.Sprintf("already %d removals this pass (--clean-orphans-max)", c.Max)
		}
		if why != "" {
			refused = append(refused, Refusal{o.Key, why})
			continue
		}
		del = append(del, hns.Op{Action: hns.Delete, Kind: hns.KindEndpoint, Name: e.Name, ID: e.ID, Network: e.Network,
			Reason: fmt.Sprintf("orphan: no pod in the cluster has %s, for %s", e.IP.Addr(), r.At.Sub(o.Since).Round(time.Second))})
	}
	return del, refused
}

func planNames(w *hns.Want, network string) bool {
	if w.Foreign != nil {
		return w.Foreign.Match(network)
	}
	return network == w.Network.Name
}
