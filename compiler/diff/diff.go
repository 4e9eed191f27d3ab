// Package diff compares two sets of node plans, as a reviewer needs to see
// a change before it merges: which nodes change, which changes recreate a
// network (a drain, since HNS cannot change a network's identity in
// place), which only touch routes or new pods, and how many endpoints get
// their ACLs reprogrammed (each update can reset TCP connections).
//
// Changes are ordered by node, then kind, then name; a plan's unchanged
// parts produce no change. Diffing is pure: rendering is separate.
package diff

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/hnsplan/hnsplan/compiler/access"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/vxlan"
)

// Action is what a change does: plan.Action, the vocabulary the agent's
// ops share (Terraform's).
type Action = plan.Action

const (
	Create  = plan.Create
	Update  = plan.Update
	Delete  = plan.Delete
	Replace = plan.Replace
	NoOp    = plan.NoOp
)

// Reasons (CONSTRAINTS.md, "Changes between two plans").
const (
	ReasonVNI            = "vni-changed"
	ReasonVXLANPort      = "vxlan-port-changed"
	ReasonSubnet         = "subnet-changed"
	ReasonType           = "network-type-changed"
	ReasonName           = "network-name-changed"
	ReasonSingleNetwork  = "single-network-changed"
	ReasonNATNewPodsOnly = "nat-outgoing-new-pods-only"
	ReasonACLReprogram   = "acl-reprogram"
	ReasonRoutes         = "routes-changed"
	// hnsplan's own:
	ReasonTemplate     = "pod-template-new-pods-only" // other pod endpoint settings: new pods only
	ReasonHostEndpoint = "host-endpoint-changed"
	ReasonNetworkPol   = "network-policies-changed"
	ReasonOwner        = "network-owner-changed" // hnsplan's network becomes a CNI's, or the reverse
	ReasonMatch        = "network-match-changed" // a policy-only plan's networks, owner or node address
)

// Options are what a diff knows besides the plans.
type Options struct {
	// BaseDir and HeadDir say where each side's intent is, so that the
	// policies' source positions (relative to their intent directory)
	// read as paths from the working directory. Empty: left as the plans
	// carry them.
	BaseDir, HeadDir string
	// Base and Head are the two sides' VXLAN identities as their intents
	// give them (vxlan.FromIntent): with node counts, Linux nodes and
	// rollout groups, and for a network hnsplan does not own (flanneld's)
	// the only word on it. nil: what the plans give (vxlan.FromPlans).
	Base, Head *vxlan.Side
	// Drain is how long a node's pods take to leave, for the window of a
	// VXLAN change (vxlan.DefaultDrain when zero).
	Drain time.Duration
}

// Change is one change to one node's HNS state.
type Change struct {
	Node    string   `json:"node"`
	Kind    string   `json:"kind"` // node, network, hostEndpoint, remoteSubnetRoutes, hostRoutes, podEndpoint, policy
	Name    string   `json:"name"`
	Action  Action   `json:"action"`
	Reasons []string `json:"reasons,omitempty"`
	// Impact says what the change costs: drains, reprogrammed endpoints.
	Impact []string `json:"impact,omitempty"`
	// Details are the attribute-level differences, for the renderers.
	Details []Detail `json:"details,omitempty"`
	// Endpoints are the pod endpoints whose ACL list changes (with an
	// inventory), and Drained the pods a replace evicts.
	Endpoints []string `json:"endpoints,omitempty"`
	Drained   []string `json:"drained,omitempty"`
	// Policies are the network policies the change creates, deletes or
	// updates (kind policy), field by field.
	Policies []PolicyChange `json:"policies,omitempty"`
	// whole identifies the complete change where Details list only part
	// of it (routes past MaxListDetails), so that only nodes with the
	// same whole change are grouped.
	whole string
}

// Detail is one attribute's difference: Before and After are "" when the
// attribute is added or removed.
type Detail struct {
	Path              string `json:"path"`
	Before            string `json:"before,omitempty"`
	After             string `json:"after,omitempty"`
	ForcesReplacement bool   `json:"forcesReplacement,omitempty"`
}

// Result is a diff.
type Result struct {
	Changes []Change `json:"changes"`
	// Inventory reports whether the plans held rendered endpoints, so that
	// reprogrammed endpoints and drained pods could be counted.
	Inventory bool `json:"inventory"`
	// Notes say what the renderers must tell the reader beyond the
	// changes, such as a side that does not exist (every node created).
	Notes []string `json:"notes,omitempty"`
	// Access is what the change does to who can reach whom, when the
	// diff had an inventory and both sides' intents (access.Diff); nil
	// when it was not computed.
	Access *access.Delta `json:"-"`
	// VXLAN is the change of the cluster's VXLAN VNI or port, beyond the
	// Windows networks' replaces: the Linux side, the node pairs cut off
	// and for how long; nil when neither changes.
	VXLAN *vxlan.Change `json:"-"`
}

// Summary counts a result the way its closing line says it.
type Summary struct {
	NodesAdded, NodesChanged, NodesRemoved int
	NetworksReplaced                       int
	EndpointsReprogrammed                  int
	PodsDrained                            int
}

// Summarize counts r.
func (r *Result) Summarize() Summary {
	var s Summary
	changed := map[string]bool{}
	for _, c := range r.Changes {
		switch {
		case c.Kind == "node" && c.Action == Create:
			s.NodesAdded++
		case c.Kind == "node" && c.Action == Delete:
			s.NodesRemoved++
		default:
			changed[c.Node] = true
		}
		if c.Kind == "network" && c.Action == Replace {
			s.NetworksReplaced++
			s.PodsDrained += len(c.Drained)
		}
		if c.Kind == "policy" {
			s.EndpointsReprogrammed += len(c.Endpoints)
		}
	}
	s.NodesChanged = len(changed)
	return s
}

// HasChanges reports whether anything changes: a plan, or the cluster's
// VXLAN identity (which flanneld's plans do not show).
func (r *Result) HasChanges() bool { return len(r.Changes) > 0 || r.VXLAN != nil }

// Plans compares base with head, each a set of plans (by node).
func Plans(base, head []*plan.NodePlan) *Result { return PlansWith(base, head, Options{}) }

// PlansWith is Plans with the intent directories of both sides, which the
// policies' source positions are relative to.
func PlansWith(base, head []*plan.NodePlan, opt Options) *Result {
	b, h := index(base), index(head)
	d := &differ{opt: opt, programs: map[[2]*plan.Program]programChange{},
		remote: map[[2]*plan.RouteTable]*routeDelta[plan.RemoteSubnetRoute]{},
		host:   map[[2]*plan.RouteTable]*routeDelta[plan.HostRoute]{}}
	res := &Result{Changes: []Change{}}
	nodes := map[string]bool{}
	for n := range b {
		nodes[n] = true
	}
	for n := range h {
		nodes[n] = true
	}
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, p := range append(slices.Clone(base), head...) {
		if len(p.Endpoints) > 0 {
			res.Inventory = true
		}
	}
	for _, n := range names {
		bp, hp := b[n], h[n]
		switch {
		case bp == nil:
			res.Changes = append(res.Changes, Change{Node: n, Kind: "node", Name: n, Action: Create,
				Impact: []string{fmt.Sprintf("network %q and host endpoint created", hp.Network.Name)}})
		case hp == nil:
			res.Changes = append(res.Changes, Change{Node: n, Kind: "node", Name: n, Action: Delete,
				Impact: []string{"the node leaves the intent: its agent keeps the last plan it applied"}})
		default:
			res.Changes = append(res.Changes, d.node(bp, hp)...)
		}
	}
	res.VXLAN = vxlanChange(base, head, res.Changes, opt)
	return res
}

func index(ps []*plan.NodePlan) map[string]*plan.NodePlan {
	m := make(map[string]*plan.NodePlan, len(ps))
	for _, p := range ps {
		m[p.Node] = p
	}
	return m
}

// identity is what HNS cannot change in place.
type identity struct {
	name, typ, subnet string
	vni, port         string
}

func identityOf(p *plan.NodePlan) identity {
	id := identity{name: p.Network.Name, typ: p.Network.Type}
	var subnets []string
	for _, ipam := range p.Network.Ipams {
		for _, s := range ipam.Subnets {
			subnets = append(subnets, s.IpAddressPrefix.String())
			if v, ok := plan.Find[plan.VSID](s.Policies); ok {
				id.vni = fmt.Sprint(v.IsolationId)
			}
		}
	}
	id.subnet = strings.Join(subnets, ",")
	if v, ok := plan.Find[plan.VxlanPort](p.Network.Policies); ok {
		id.port = fmt.Sprint(v.Port)
	}
	return id
}

func (d *differ) node(b, h *plan.NodePlan) []Change {
	if b.PolicyOnly != nil || h.PolicyOnly != nil {
		return d.policyOnlyNode(b, h)
	}
	var out []Change
	n := h.Node
	drained := podsOf(b)
	// The network.
	bi, hi := identityOf(b), identityOf(h)
	net := Change{Node: n, Kind: "network", Name: h.Network.Name}
	for _, f := range []struct {
		path, before, after, reason string
	}{
		{"Name", bi.name, hi.name, ReasonName},
		{"Type", bi.typ, hi.typ, ReasonType},
		{"Subnet", bi.subnet, hi.subnet, ReasonSubnet},
		{"VNI", bi.vni, hi.vni, ReasonVNI},
		{"VxlanPort", bi.port, hi.port, ReasonVXLANPort},
	} {
		if f.before != f.after {
			net.Reasons = append(net.Reasons, f.reason)
			net.Details = append(net.Details, Detail{Path: f.path, Before: f.before, After: f.after, ForcesReplacement: true})
		}
	}
	if b.SingleNetwork != h.SingleNetwork {
		net.Reasons = append(net.Reasons, ReasonSingleNetwork)
		net.Details = append(net.Details, Detail{Path: "singleNetwork", Before: fmt.Sprint(b.SingleNetwork), After: fmt.Sprint(h.SingleNetwork), ForcesReplacement: true})
	}
	if len(net.Reasons) > 0 {
		net.Action = Replace
		net.Drained = drained
		net.Impact = append(net.Impact, drainImpact(n, drained, b))
	}
	if d := describedPolicies(otherPolicies(b.Network.Policies), otherPolicies(h.Network.Policies)); len(d) > 0 {
		if net.Action == "" {
			net.Action = Update
		}
		net.Reasons = append(net.Reasons, ReasonNetworkPol)
		net.Details = append(net.Details, d...)
	}
	if net.Action != "" {
		out = append(out, net)
	}
	// The host endpoint.
	if d := jsonDiff("", b.HostEndpoint, h.HostEndpoint); len(d) > 0 {
		out = append(out, Change{Node: n, Kind: "hostEndpoint", Name: h.HostEndpoint.Name, Action: Update,
			Reasons: []string{ReasonHostEndpoint}, Details: d})
	}
	// Routes: the change of the route tables the plans name, less the
	// node's own routes.
	if c, ok := d.remoteSubnetRoutes(b.Routes, h.Routes).change(n); ok {
		out = append(out, c)
	}
	if c, ok := d.hostRoutes(b.Routes, h.Routes).change(n); ok {
		out = append(out, c)
	}
	// The pod endpoint template: HNS applies it when a pod is created.
	if d := jsonDiff("", b.PodEndpoint, h.PodEndpoint); len(d) > 0 {
		c := Change{Node: n, Kind: "podEndpoint", Name: "template", Action: Update, Details: d,
			Impact: []string{"pods created from now on; existing pods keep their endpoints until recreated"}}
		_, bNAT := plan.Find[plan.OutBoundNAT](b.PodEndpoint.Policies)
		_, hNAT := plan.Find[plan.OutBoundNAT](h.PodEndpoint.Policies)
		if bNAT != hNAT {
			c.Reasons = append(c.Reasons, ReasonNATNewPodsOnly)
		} else {
			c.Reasons = append(c.Reasons, ReasonTemplate)
		}
		out = append(out, c)
	}
	// The policy program and, with an inventory, the endpoints it reaches.
	if c, ok := d.program(n, b, h); ok {
		out = append(out, c)
	}
	slices.SortStableFunc(out, func(x, y Change) int { return cmp.Compare(kindOrder(x.Kind), kindOrder(y.Kind)) })
	return out
}

// policyOnlyNode is node for a pair of plans of which one at least is
// policy only: who owns the network, which networks hold the pod
// endpoints, and the policy. An owned network's fields are not compared
// with a CNI's: nothing of the one becomes the other.
func (d *differ) policyOnlyNode(b, h *plan.NodePlan) []Change {
	var out []Change
	n := h.Node
	owner := func(p *plan.NodePlan) string {
		if p.PolicyOnly == nil {
			return "hnsplan"
		}
		return p.PolicyOnly.Owner
	}
	name := func(p *plan.NodePlan) string {
		if p.PolicyOnly == nil {
			return p.Network.Name
		}
		return strings.Join(p.PolicyOnly.Networks, ", ")
	}
	networks := func(p *plan.NodePlan) string {
		if p.PolicyOnly == nil {
			return fmt.Sprintf("%q", p.Network.Name)
		}
		q := make([]string, len(p.PolicyOnly.Networks))
		for i, m := range p.PolicyOnly.Networks {
			q[i] = fmt.Sprintf("%q", m)
		}
		return strings.Join(q, ", ")
	}
	c := Change{Node: n, Kind: "network", Name: name(h), Action: Update}
	switch {
	case b.PolicyOnly == nil:
		c.Reasons = []string{ReasonOwner}
		c.Details = []Detail{{Path: "owner", Before: "hnsplan", After: owner(h)}}
		if networks(b) != networks(h) {
			c.Details = append(c.Details, Detail{Path: "networks", Before: networks(b), After: networks(h)})
		}
		c.Impact = []string{fmt.Sprintf("the agent stops managing network %s and its host endpoint and routes, and deletes none of them: %s owns them from now on; it programs only the ACLs of the pod endpoints on networks %s; no drain",
			b.Network.Name, owner(h), networks(h))}
	case h.PolicyOnly == nil:
		c.Reasons = []string{ReasonOwner}
		c.Details = []Detail{{Path: "owner", Before: owner(b), After: "hnsplan"}}
		if networks(b) != networks(h) {
			c.Details = append(c.Details, Detail{Path: "networks", Before: networks(b), After: networks(h)})
		}
		c.Impact = []string{fmt.Sprintf("the agent takes over network %s: it keeps one of that name with the plan's type, subnet and VNI, and otherwise replaces it, draining the node (its pods%s); stop %s's network management on the node first",
			h.Network.Name, podCount(b), owner(b))}
	default:
		bp, hp := b.PolicyOnly, h.PolicyOnly
		if bp.Owner != hp.Owner {
			c.Details = append(c.Details, Detail{Path: "owner", Before: bp.Owner, After: hp.Owner})
		}
		if !slices.Equal(bp.Networks, hp.Networks) {
			c.Details = append(c.Details, Detail{Path: "networks", Before: networks(b), After: networks(h)})
			c.Impact = append(c.Impact, "pod endpoints on networks no longer matched keep the agent's last ACLs; those on newly matched ones get their pods' lists")
		}
		if bp.NodeAddress != hp.NodeAddress {
			c.Details = append(c.Details, Detail{Path: "nodeAddress", Before: bp.NodeAddress.String(), After: hp.NodeAddress.String()})
		}
		if len(c.Details) > 0 {
			c.Reasons = []string{ReasonMatch}
		}
	}
	if len(c.Details) > 0 {
		out = append(out, c)
	}
	if c, ok := d.program(n, b, h); ok {
		out = append(out, c)
	}
	return out
}

// podCount is ": N" for a plan with rendered endpoints, else a hint.
func podCount(p *plan.NodePlan) string {
	if len(p.Endpoints) == 0 {
		return ": run with --inventory to count them"
	}
	return fmt.Sprintf(": %d", len(p.Endpoints))
}

func kindOrder(k string) int {
	return slices.Index([]string{"node", "network", "hostEndpoint", "remoteSubnetRoutes", "hostRoutes", "podEndpoint", "policy"}, k)
}

// podsOf lists the pods the plan knows on its node (with an inventory).
func podsOf(p *plan.NodePlan) []string {
	var out []string
	for _, e := range p.Endpoints {
		out = append(out, e.Pod)
	}
	return out
}

func drainImpact(node string, pods []string, p *plan.NodePlan) string {
	if len(p.Endpoints) == 0 && p.Endpoints == nil {
		return fmt.Sprintf("drain of node %s (its pods: run with --inventory to count them)", node)
	}
	noun := "pods"
	if len(pods) == 1 {
		noun = "pod"
	}
	return fmt.Sprintf("drain of node %s (%d %s)", node, len(pods), noun)
}

// otherPolicies are the network policies besides the identity ones.
func otherPolicies(ps []plan.Policy) []plan.Policy {
	return slices.DeleteFunc(slices.Clone(ps), func(p plan.Policy) bool { return p.Type == plan.TypeVxlanPort })
}

// jsonDiff compares two values field by field (top-level fields of their
// JSON form), reporting the ones that differ; a Policies list is compared
// policy by policy.
//
// Values that are deeply equal are equal in JSON: that check comes first,
// as it costs a fraction of encoding both (thousands of nodes, most of
// whose host endpoints and templates do not change).
func jsonDiff(prefix string, b, h any) []Detail {
	if reflect.DeepEqual(b, h) {
		return nil
	}
	bj, _ := json.Marshal(b)
	hj, _ := json.Marshal(h)
	if bytes.Equal(bj, hj) {
		return nil
	}
	var bm, hm map[string]json.RawMessage
	if json.Unmarshal(bj, &bm) != nil || json.Unmarshal(hj, &hm) != nil {
		return []Detail{{Path: prefix, Before: string(bj), After: string(hj)}}
	}
	keys := map[string]bool{}
	for k := range bm {
		keys[k] = true
	}
	for k := range hm {
		keys[k] = true
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	slices.Sort(names)
	var out []Detail
	for _, k := range names {
		if bytes.Equal(bm[k], hm[k]) {
			continue
		}
		if k == "Policies" {
			var bp, hp []plan.Policy
			if json.Unmarshal(orNull(bm[k]), &bp) == nil && json.Unmarshal(orNull(hm[k]), &hp) == nil {
				out = append(out, describedPolicies(bp, hp)...)
				continue
			}
		}
		out = append(out, Detail{Path: strings.TrimPrefix(prefix+"."+k, "."), Before: string(bm[k]), After: string(hm[k])})
	}
	return out
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// describedPolicies lists the policies only one side has, in words.
func describedPolicies(b, h []plan.Policy) []Detail {
	bs, hs := make([]string, len(b)), make([]string, len(h))
	for i, p := range b {
		bs[i] = plan.Describe(p)
	}
	for i, p := range h {
		hs[i] = plan.Describe(p)
	}
	var out []Detail
	for _, s := range bs {
		if !slices.Contains(hs, s) {
			out = append(out, Detail{Path: "Policies", Before: s})
		}
	}
	for _, s := range hs {
		if !slices.Contains(bs, s) {
			out = append(out, Detail{Path: "Policies", After: s})
		}
	}
	return out
}

// differ holds what one diff computes once for all nodes: the comparison
// of each pair of policy programs and of route tables (the nodes of one
// compilation share theirs).
type differ struct {
	opt      Options
	programs map[[2]*plan.Program]programChange
	remote   map[[2]*plan.RouteTable]*routeDelta[plan.RemoteSubnetRoute]
	host     map[[2]*plan.RouteTable]*routeDelta[plan.HostRoute]
}

type programChange struct {
	policies []PolicyChange
	details  []Detail
}

func (d *differ) programDiff(b, h *plan.Program) programChange {
	key := [2]*plan.Program{b, h}
	if c, ok := d.programs[key]; ok {
		return c
	}
	pols, tiers := programDiff(b, h, d.opt)
	c := programChange{policies: pols, details: tiers}
	if len(pols) == 0 && len(tiers) == 0 && orderOf(b) != orderOf(h) {
		c.details = append(c.details, Detail{Path: "order", Before: "tiers and policy order", After: "changed"})
	}
	d.programs[key] = c
	return c
}

// program compares the policy programs and, where both plans carry
// rendered endpoints, which endpoints' ACL lists change.
func (d *differ) program(n string, b, h *plan.NodePlan) (Change, bool) {
	c := Change{Node: n, Kind: "policy", Name: "policy program", Action: Update}
	pc := d.programDiff(b.Program, h.Program)
	c.Policies, c.Details = pc.policies, pc.details
	programChanged := len(c.Policies)+len(c.Details) > 0
	// Endpoints whose rendered ACL list changes.
	be, he := endpointACLs(b), endpointACLs(h)
	for _, pod := range sortedKeys(he) {
		if bacl, ok := be[pod]; ok && bacl != he[pod] {
			c.Endpoints = append(c.Endpoints, pod)
		}
	}
	if !programChanged && len(c.Endpoints) == 0 {
		return c, false
	}
	if len(b.Endpoints) > 0 || len(h.Endpoints) > 0 {
		c.Reasons = []string{fmt.Sprintf("%s:%d endpoints", ReasonACLReprogram, len(c.Endpoints))}
		c.Impact = []string{fmt.Sprintf("%s reprogrammed (each update can reset TCP connections)", plural(len(c.Endpoints), "endpoint"))}
	} else {
		c.Reasons = []string{ReasonACLReprogram}
		c.Impact = []string{"the endpoints the changed policies select are reprogrammed; run with --inventory to count them"}
	}
	return c, true
}

// endpointACLs maps each rendered pod endpoint to its ACL list (as JSON).
func endpointACLs(p *plan.NodePlan) map[string]string {
	m := map[string]string{}
	for _, e := range p.Endpoints {
		var acls []plan.ACL
		for _, pol := range e.Policies {
			if a, ok := pol.Settings.(plan.ACL); ok {
				acls = append(acls, a)
			}
		}
		b, _ := json.Marshal(acls)
		m[e.Pod] = string(b)
	}
	return m
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%s %ss", diag.Thousands(n), noun)
}

// orderOf is the evaluation order of the program's policies.
func orderOf(p *plan.Program) string {
	if p == nil {
		return ""
	}
	var ids []string
	for _, t := range p.Tiers {
		for _, pol := range t.Policies {
			ids = append(ids, t.Name+"/"+pol.ID)
		}
	}
	return strings.Join(ids, ",")
}
