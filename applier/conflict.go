package applier

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// FightPasses is how many passes in a row must find the same pod
// endpoint's ACLs rewritten by someone else before the agent stops
// writing (state conflict): one rewrite is an operator's edit, which the
// agent mends; three in a row, each after the agent mended it, is another
// writer that will not stop.
const FightPasses = 3

// competing lists the pods of c's competing dataplanes that plan p does
// not share the node with: flanneld is p's partner when p leaves the
// routes to it (routing "flanneld", docs/flannel.md: it holds the lease
// and the host routes, and keeps the plan's network), and a competitor
// otherwise; calico-node-windows always competes.
func competing(p *plan.NodePlan, c *Cluster) []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, w := range c.Competitors {
		if w.What == kube.Flanneld && p.Routing == "flanneld" {
			continue
		}
		out = append(out, w.String())
	}
	return out
}

// competitorConflict is the status of a pass that found competing
// dataplanes on the node (Cluster.Competitors): nothing was written.
func competitorConflict(who []string) Status {
	return Status{State: kube.StateConflict, LastError: fmt.Sprintf(
		"conflict: %s programs this node's HNS: hnsplan-agent writes nothing to HNS (network, routes, endpoints, ACLs) while it runs here; "+
			"remove it from the node to switch the node over (docs/calico.md, docs/flannel.md, docs/aks.md, Conflict)", strings.Join(who, ", "))}
}

// fights tells another writer of the pod endpoints' ACLs from HNS's own
// read-back quirks. After every pass it keeps, per endpoint (by HNS ID),
// what the agent wanted and what HNS read back once the pass was done:
// HNS's quirks are already in that read-back (hns.Echo), and HNS does not
// change an ACL list nobody writes. So an endpoint whose ACLs differ from
// that read-back at the next pass, while the agent still wants the same
// list, and which Diff would write again, was rewritten by someone else.
// An endpoint the CNI recreated has a new ID, and one whose wanted list
// changed (a policy, a label) is the agent's own change: neither counts.
// Not safe for concurrent use (a pass at a time).
type fights struct {
	left  map[string]leftACLs // by hns.EndpointKey
	count map[string]int      // passes in a row that found it rewritten
	// held is the endpoint in conflict ("" none) and why.
	held, heldWhy string
}

// leftACLs is an endpoint as a pass left it, ACL lists canonical.
type leftACLs struct {
	name       string
	want, read []plan.ACL
}

// observe looks at a pass's have and the ops Diff made, before any is
// applied. It returns the conflict, "" if there is none: an endpoint
// found rewritten FightPasses passes in a row, or the one already held,
// while it is there, the agent wants the same list of it, and Diff would
// still write it (a list that reads back as wanted ends the hold).
func (f *fights) observe(have *hns.State, want *hns.Want, ops []hns.Op) string {
	writes := map[string]bool{}
	for _, op := range ops {
		if op.Kind == hns.KindACL {
			writes[hns.EndpointKey(&hns.Endpoint{ID: op.ID, Name: op.Name})] = true
		}
	}
	count := map[string]int{}
	held := false
	for _, e := range hns.PodEndpoints(have, want) {
		k := hns.EndpointKey(e)
		prev, ok := f.left[k]
		wanted, isPod := want.PodACLs[e.IP.Addr()]
		if !ok || !isPod || !writes[k] || !slices.Equal(prev.want, hns.CanonicalACLs(wanted)) {
			continue
		}
		if k == f.held {
			held = true // still there, still wanted, still not as wanted
			continue
		}
		if !slices.Equal(prev.read, hns.CanonicalACLs(e.ACLs)) {
			count[k] = f.count[k] + 1
			if count[k] >= FightPasses && f.held == "" {
				f.held = k
				f.heldWhy = fmt.Sprintf("an unknown writer of endpoint %s's ACLs (%s): they were rewritten %d passes in a row to a list hnsplan-agent did not write (%d ACLs read, %d wanted)",
					e.Name, strings.TrimPrefix(k, "id:"), count[k], len(e.ACLs), len(wanted))
				held = true
			}
		}
	}
	f.count = count
	if !held {
		// What the last pass left is used up: a pass that fails before
		// leave leaves nothing, and nothing counts at the next.
		f.held, f.heldWhy, f.left = "", "", nil
		return ""
	}
	return "conflict: " + f.heldWhy + "; hnsplan-agent writes nothing to HNS until the endpoint is gone, the plan changes its ACLs, " +
		"they read back as the plan's, or the agent restarts: find the other writer (calico-node-windows, flanneld, a script) and stop it"
}

// leave records what a pass left: now is HNS after the pass (its
// read-back, or its snapshot when it wrote nothing).
func (f *fights) leave(now *hns.State, want *hns.Want) {
	left := map[string]leftACLs{}
	for _, e := range hns.PodEndpoints(now, want) {
		if wanted, ok := want.PodACLs[e.IP.Addr()]; ok {
			left[hns.EndpointKey(e)] = leftACLs{name: e.Name, want: slices.Clone(hns.CanonicalACLs(wanted)), read: slices.Clone(hns.CanonicalACLs(e.ACLs))}
		}
	}
	f.left = left
}
