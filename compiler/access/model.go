// Package access answers who can reach whom in one compilation (Model:
// the pods of the inventory, each decided where it is enforced, see
// package reach), why (Explain: the deciding ACL or policy rule with its
// file:line), and what a change does to it (Delta: every connection whose
// verdict differs between two compilations, evaluating only the
// endpoints whose ACL lists or policy decisions changed).
package access

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/policy"
	"github.com/hnsplan/hnsplan/compiler/reach"
	"github.com/hnsplan/hnsplan/compiler/sim"
)

// Model is one compilation's pods with an address on a Windows node (with
// its compiled ACL list) or a Linux node (decided from the program), and
// how connections between them are decided.
type Model struct {
	Endpoints map[string]*reach.Endpoint // by pod key
	Keys      []string                   // sorted
	Program   *plan.Program
	World     *acl.World
	Decider   *reach.Decider
	// Origins maps rule ids to their policy and source position.
	Origins map[string]Origin
	// Owners are, by node, the programs that own the network of nodes
	// whose plans are policy only ("azure-cni"): there hnsplan's list is
	// one part of an endpoint's ACLs, beside the owner's Blocks.
	Owners map[string]string
	// aclKeys are the Windows endpoints' ACL lists (as JSON), for a delta
	// to tell which changed.
	aclKeys map[string]string
	acls    map[string][]plan.ACL
}

// NewModel builds the model of a compiled intent: in with its inventory,
// the plans compiled from it, and its policy program (the plans' program;
// given apart so that an intent without Windows nodes has one). dir is the
// intent directory as the reader knows it: source positions, relative to
// it in the program, are shown joined to it.
func NewModel(in *intent.Intent, plans []*plan.NodePlan, prog *plan.Program, dir string) (*Model, error) {
	world := acl.NewWorld(policy.Pods(&in.Inventory), policy.NamespaceLabels(in), nil)
	pods := map[string]*acl.Pod{}
	for _, p := range world.Pods {
		pods[p.Key()] = p
	}
	m := &Model{Endpoints: map[string]*reach.Endpoint{}, Program: prog, World: world,
		Origins: Origins(prog, dir), aclKeys: map[string]string{}, acls: map[string][]plan.ACL{}, Owners: map[string]string{}}
	for _, p := range plans {
		if p.PolicyOnly != nil {
			m.Owners[p.Node] = p.PolicyOnly.Owner
		}
		for _, e := range p.Endpoints {
			var acls []plan.ACL
			for _, pol := range e.Policies {
				if a, ok := pol.Settings.(plan.ACL); ok {
					acls = append(acls, a)
				}
			}
			l, err := sim.Compile(acls)
			if err != nil {
				return nil, fmt.Errorf("pod %s: %v", e.Pod, err)
			}
			pod := pods[e.Pod]
			if pod == nil { // the plan's address is the one the inventory gives
				ns, name, _ := strings.Cut(e.Pod, "/")
				if len(e.IpConfigurations) == 0 {
					return nil, fmt.Errorf("pod %s on node %s: the plan's endpoint has no address", e.Pod, p.Node)
				}
				pod = &acl.Pod{Namespace: ns, Name: name, IP: e.IpConfigurations[0].IpAddress}
			}
			m.Endpoints[e.Pod] = &reach.Endpoint{Pod: pod, Node: p.Node, OS: reach.OSWindows, ACL: l}
			key, _ := json.Marshal(acls)
			m.aclKeys[e.Pod] = string(key)
			m.acls[e.Pod] = acls
		}
	}
	linux := map[string]bool{}
	for _, n := range in.Cluster.Nodes {
		linux[n.Name] = !n.IsWindows()
	}
	for i := range in.Inventory.Pods {
		ip := &in.Inventory.Pods[i]
		key := cmp.Or(ip.Namespace, "default") + "/" + ip.Name
		if pod := pods[key]; pod != nil && linux[ip.Spec.NodeName] {
			m.Endpoints[key] = &reach.Endpoint{Pod: pod, Node: ip.Spec.NodeName, OS: reach.OSLinux}
		}
	}
	m.Keys = slices.Sorted(maps.Keys(m.Endpoints))
	m.Decider = reach.NewDecider(prog, world)
	return m, nil
}

// Origin is where a rule of the program comes from.
type Origin struct {
	Policy, Source string
}

// Origins maps the program's rule ids to their policy and source position
// (joined to dir).
func Origins(prog *plan.Program, dir string) map[string]Origin {
	m := map[string]Origin{}
	if prog == nil {
		return m
	}
	for _, t := range prog.Tiers {
		for _, p := range t.Policies {
			for _, r := range append(slices.Clone(p.IngressRules), p.EgressRules...) {
				src := r.Source
				if src != "" && dir != "" {
					src = filepath.Join(dir, src)
				}
				m[r.ID] = Origin{Policy: p.ID, Source: src}
			}
		}
	}
	return m
}

// Explanation is how one end of a connection decided.
type Explanation struct {
	Endpoint string `json:"endpoint"`
	Node     string `json:"node"`
	OS       string `json:"os"`
	Allowed  bool   `json:"allowed"`
	ACL      string `json:"acl,omitempty"`      // Windows: the deciding ACL
	Priority uint16 `json:"priority,omitempty"` // and its priority
	Rule     string `json:"rule,omitempty"`     // Linux: the deciding rule
	// Policy and Source are the deciding rule's policy and where it is
	// written, when a policy rule decided.
	Policy  string `json:"policy,omitempty"`
	Source  string `json:"source,omitempty"`
	Because string `json:"because"`
	// Owner is, for an endpoint on a network another program owns (a
	// policy-only plan), that program: its own Blocks, which hnsplan
	// keeps, decide before the list explained here.
	Owner string `json:"owner,omitempty"`
}

// Explain says how one side decided, naming the deciding ACL or rule and
// where the rule is written.
func Explain(s reach.Side, origins map[string]Origin) Explanation {
	e := s.Endpoint
	out := Explanation{Endpoint: e.Key(), Node: e.Node, OS: e.OS, Allowed: s.Allowed}
	if e.OS == reach.OSWindows {
		out.Because = "no ACL matched: HNS allows by default"
		if a := s.Windows.ACL; a != nil {
			out.ACL, out.Priority = a.Id, a.Priority
			rule := ruleOfACL(a.Id)
			if o, ok := origins[rule]; ok {
				out.Policy, out.Source = o.Policy, o.Source
			}
			out.Because = explainACL(a.Id, origins)
		}
		return out
	}
	d := s.Linux
	switch d.Why {
	case "rule":
		out.Rule = d.Rule.ID
		if o, ok := origins[d.Rule.ID]; ok {
			out.Policy, out.Source = o.Policy, o.Source
		}
		out.Because = explainRule(d.Rule.ID, origins)
	case "tier-end":
		out.Because = fmt.Sprintf("a policy of tier %q selects this endpoint and none of its rules matched: the tier's default deny", d.Tier)
	case "no-policy":
		out.Because = "no policy selects this endpoint in this direction: the namespace profile allows"
	default:
		out.Because = "the traffic passed every tier: the namespace profile allows"
	}
	return out
}

func explainRule(rule string, origins map[string]Origin) string {
	if o, ok := origins[rule]; ok {
		return fmt.Sprintf("rule %s of policy %s, %s", rule, o.Policy, o.Source)
	}
	return "rule " + rule
}

// ruleOfACL is the rule an ACL id was rendered from: the id without its
// last "-N".
func ruleOfACL(id string) string {
	if i := strings.LastIndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return id
}

// explainACL says, in words, which rule an ACL id comes from.
func explainACL(id string, origins map[string]Origin) string {
	rule := ruleOfACL(id)
	if _, ok := origins[rule]; ok {
		return explainRule(rule, origins)
	}
	switch {
	case id == "allow-host-to-endpoint":
		return "the node's own addresses always reach its pods (kubelet probes)"
	case strings.HasPrefix(rule, "no-policy-"):
		return "no policy selects this endpoint in this direction: the namespace profile allows"
	case strings.HasPrefix(rule, "profile-"):
		return "the traffic passed every tier: the namespace profile allows"
	case strings.HasPrefix(rule, "tier-") && strings.Contains(rule, "-end-"):
		tier := strings.TrimPrefix(rule[:strings.LastIndex(rule, "-end-")], "tier-")
		return fmt.Sprintf("a policy of tier %q selects this endpoint and none of its rules matched: the tier's default deny", tier)
	}
	return "rule " + rule
}
