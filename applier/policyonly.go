package applier

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// maxListed bounds the pods and addresses a status names one by one: a
// burst of 100 new pods is one line that counts the rest.
const maxListed = 10

// unprotected says which pods of a policy-only plan have no endpoint on
// the matching networks yet: the CNI has not made it (a pod reports its
// address after its endpoint exists, so this is brief), or it made it on
// a network the plan does not match, where no ACL of the agent's reaches
// it. Either way the pod is not protected by hnsplan, and the status says
// so until it is.
func unprotected(have *hns.State, want *hns.Want) []string {
	held := map[netip.Addr]bool{}
	for _, e := range hns.PodEndpoints(have, want) {
		held[e.IP.Addr()] = true
	}
	var missing []netip.Addr
	for a := range want.PodACLs {
		if !held[a] {
			missing = append(missing, a)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.SortFunc(missing, netip.Addr.Compare)
	var out []string
	for i, a := range missing {
		if i == maxListed {
			out = append(out, fmt.Sprintf("and %d more pods without an endpoint", len(missing)-maxListed))
			break
		}
		out = append(out, fmt.Sprintf("pod %s (%s): no endpoint on the networks %s yet; none of its ACLs are programmed until the CNI makes it (`Get-HnsEndpoint | Select Name, VirtualNetworkName, IPAddress` on the node shows where it is)",
			want.PodNames[a], a, want.Foreign))
	}
	return out
}

// shared says which pod addresses more than one endpoint holds (a stale
// endpoint a CNI failed to delete: Azure/AKS#5653): each got the pod's
// ACLs, and the stale one should go, by whoever owns it.
func shared(have *hns.State, want *hns.Want) []string {
	by := hns.SharedAddresses(have, want)
	addrs := make([]netip.Addr, 0, len(by))
	for a := range by {
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	var out []string
	for i, a := range addrs {
		if i == maxListed {
			out = append(out, fmt.Sprintf("and %d more shared addresses", len(addrs)-maxListed))
			break
		}
		names := by[a]
		slices.Sort(names)
		out = append(out, fmt.Sprintf("address %s of pod %s is held by %d endpoints (%s): each has the pod's ACLs; the ones its sandbox does not use are stale, remove them (Remove-HnsEndpoint) or restart the pod",
			a, want.PodNames[a], len(names), strings.Join(names, ", ")))
	}
	return out
}

// endpointsSeen is a fingerprint of pod endpoints: each one's HNS ID and
// address, sorted. A CNI that makes an endpoint, or remakes one on the
// same address (a sandbox restarted), changes it.
func endpointsSeen(eps []*hns.Endpoint) string {
	keys := make([]string, len(eps))
	for i, e := range eps {
		keys[i] = hns.EndpointKey(e) + "@" + e.IP.Addr().String()
	}
	slices.Sort(keys)
	return strings.Join(keys, ",")
}

// EndpointLister lists HNS's endpoints more cheaply than a Snapshot
// (hnswin's and hnsmem's Endpoints): the endpoint poll's read.
type EndpointLister interface {
	Endpoints(ctx context.Context) ([]hns.Endpoint, error)
}

// pollEndpoints asks for a pass whenever HNS holds other pod endpoints on
// a policy-only plan's networks than the last pass left: a CNI that makes
// an endpoint announces it to no watch, and when the pod keeps its
// address (a sandbox restarted, an endpoint recreated) no cluster change
// follows either. Felix's Windows dataplane has no such poll: it looks at
// HNS only when a workload endpoint changes. It runs until ctx is done.
func (a *Agent) pollEndpoints(ctx context.Context) {
	t := time.NewTicker(a.cfg.EndpointPoll)
	defer t.Stop()
	var m *plan.NetworkMatcher
	var matched string // the digest of the plan m is of
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p := a.r.Plan()
		if p == nil || p.PolicyOnly == nil {
			continue
		}
		if matched != p.Digest {
			var err error
			if m, err = plan.NewNetworkMatcher(p.PolicyOnly.Networks); err != nil {
				continue // the pass reports it
			}
			matched = p.Digest
		}
		var eps []hns.Endpoint
		var err error
		if l, ok := a.cfg.HNS.(EndpointLister); ok {
			eps, err = l.Endpoints(ctx)
		} else {
			var st *hns.State
			if st, err = a.cfg.HNS.Snapshot(ctx); err == nil {
				eps = st.Endpoints
			}
		}
		if err != nil {
			continue // the next pass reports what HNS answers
		}
		pods := make([]*hns.Endpoint, 0, len(eps))
		for i := range eps {
			if e := &eps[i]; !e.Remote && m.Match(e.Network) {
				pods = append(pods, e)
			}
		}
		a.r.mu.Lock()
		seen := a.r.seen
		a.r.mu.Unlock()
		if endpointsSeen(pods) != seen {
			a.loop.Trigger()
		}
	}
}

// inTheWay refuses, before any call, a network replace or delete while
// endpoints the agent does not own are on the network, for an agent that
// cannot drain the node (Reconciler.CannotDrain: apply --once): HNS would
// refuse the delete (ENTITY_HAS_REFERENCES), or, where it allows it, cut
// the pods off.
func inTheWay(have *hns.State, want *hns.Want, ops []hns.Op) error {
	_, oldHost := hns.Previous(have, want)
	for _, op := range ops {
		if !isNetworkReplace(op) {
			continue
		}
		var names []string
		for _, e := range have.EndpointsOn(cmp.Or(op.From, op.Name)) {
			if e.Name != want.HostEndpoint.Name && e.Name != oldHost {
				names = append(names, e.Name)
			}
		}
		if len(names) == 0 {
			continue
		}
		n, more := len(names), ""
		if n > 3 {
			names, more = names[:3], fmt.Sprintf(" and %d more", len(names)-3)
		}
		return fmt.Errorf("network %s must be recreated (%s), but it still holds %s of pods or kube-proxy (%s%s): drain the node (kubectl drain NODE --ignore-daemonsets) and apply again; nothing was changed",
			cmp.Or(op.From, op.Name), op.Reason, plural(n, "endpoint", "endpoints"), strings.Join(names, ", "), more)
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
