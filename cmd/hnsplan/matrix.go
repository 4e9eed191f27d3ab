package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/check"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/policy"
	"github.com/hnsplan/hnsplan/compiler/reach"
	"github.com/hnsplan/hnsplan/compiler/sim"
)

// endpoints compiles dir with the inventory and returns every pod with an
// address on a Windows node (with its compiled ACL list) or a Linux node
// (decided from the program), by pod key; the sorted keys; the program;
// and the decider of connections between them.
func endpoints(cmd *cobra.Command, g *globalFlags, dir string, inventory []string) (map[string]*reach.Endpoint, []string, *plan.Program, *reach.Decider, error) {
	if len(inventory) == 0 {
		return nil, nil, nil, nil, errors.New("needs --inventory: the pods, their labels and addresses")
	}
	c, err := compileDir(cmd, g, dir, dir, inventory, false)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var prog *plan.Program
	if len(c.result.Plans) > 0 {
		prog = c.result.Plans[0].Program
	} else if cat, err := catalog(); err == nil {
		// No Windows node: the program still decides the Linux pods.
		if prog, _ = policy.Compile(&c.in.Manifests, check.Services(c.in), cat.Severity); len(prog.Tiers) == 0 {
			prog = nil
		}
	}
	world := acl.NewWorld(policy.Pods(&c.in.Inventory), policy.NamespaceLabels(c.in), nil)
	pods := map[string]*acl.Pod{}
	for _, p := range world.Pods {
		pods[p.Key()] = p
	}
	eps := map[string]*reach.Endpoint{}
	for _, p := range c.result.Plans {
		for _, e := range p.Endpoints {
			var acls []plan.ACL
			for _, pol := range e.Policies {
				if a, ok := pol.Settings.(plan.ACL); ok {
					acls = append(acls, a)
				}
			}
			l, err := sim.Compile(acls)
			if err != nil {
				return nil, nil, nil, nil, &exitError{code: exitInvalid, err: fmt.Errorf("pod %s: %v", e.Pod, err)}
			}
			pod := pods[e.Pod]
			if pod == nil { // the plan's address is the one the inventory gives
				pod = &acl.Pod{Namespace: strings.SplitN(e.Pod, "/", 2)[0], Name: strings.SplitN(e.Pod, "/", 2)[1], IP: e.IpConfigurations[0].IpAddress}
			}
			eps[e.Pod] = &reach.Endpoint{Pod: pod, Node: p.Node, OS: reach.OSWindows, ACL: l}
		}
	}
	linux := map[string]bool{}
	for _, n := range c.in.Cluster.Nodes {
		linux[n.Name] = !n.IsWindows()
	}
	for i := range c.in.Inventory.Pods {
		ip := &c.in.Inventory.Pods[i]
		key := cmp.Or(ip.Namespace, "default") + "/" + ip.Name
		if pod := pods[key]; pod != nil && linux[ip.Spec.NodeName] {
			eps[key] = &reach.Endpoint{Pod: pod, Node: ip.Spec.NodeName, OS: reach.OSLinux}
		}
	}
	keys := slices.Sorted(maps.Keys(eps))
	return eps, keys, prog, reach.NewDecider(prog, world), nil
}

// policyPorts lists the numeric ports the program's rules name.
func policyPorts(prog *plan.Program) []uint16 {
	set := map[uint16]bool{80: true}
	if prog != nil {
		for _, t := range prog.Tiers {
			for _, p := range t.Policies {
				for _, r := range append(slices.Clone(p.IngressRules), p.EgressRules...) {
					for _, pr := range append(slices.Clone(r.Local.Ports), r.Remote.Ports...) {
						if pr.Last-pr.First < 16 {
							for port := int(pr.First); port <= int(pr.Last); port++ {
								set[uint16(port)] = true
							}
						} else {
							set[pr.First] = true
						}
					}
				}
			}
		}
	}
	ports := make([]uint16, 0, len(set))
	for p := range set {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	return ports
}

var protocolNumbers = map[string]int{"TCP": 6, "UDP": 17, "SCTP": 132, "ICMP": 1}

type cell struct {
	From     string `json:"from"`
	To       string `json:"to"`
	Protocol string `json:"protocol"`
	Port     uint16 `json:"port"`
	Allowed  bool   `json:"allowed"`
	// DecidedBy is the OS whose enforcement decided: the blocking side's,
	// or both sides' for an allowed connection (reach.Verdict.DecidedBy).
	DecidedBy string `json:"decidedBy"`
}

func decideOrExit(d *reach.Decider, src, dst *reach.Endpoint, proto int, port uint16) (reach.Verdict, error) {
	v, err := d.Decide(src, dst, proto, port)
	if err != nil {
		return v, &exitError{code: exitInvalid, err: err}
	}
	return v, nil
}

func newMatrixCmd(g *globalFlags) *cobra.Command {
	var inventory []string
	var port uint16
	var protocol string
	cmd := &cobra.Command{
		Use:   "matrix DIR --inventory FILE",
		Short: "Print who can reach whom: Windows pods by their compiled HNS ACLs, Linux pods by Calico's policy",
		Long: `matrix compiles DIR with the inventory's pods and prints the reachability of every pair of
pods on Windows and Linux nodes: allowed only if the source's egress and the destination's
ingress both allow it. A pod on a Windows node decides by its compiled HNS ACL list, as HNS
evaluates it (never a second reading of the policies); a pod on a Linux node by the compiled
policy program with Calico's Linux semantics (tiers, Pass, negations and named ports
natively). Each blocked cell says which side blocked it. Ports: --port, or every port the
policies name plus 80; protocol TCP unless --protocol.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput(cmd, "text", "json"); err != nil {
				return err
			}
			proto, ok := protocolNumbers[strings.ToUpper(protocol)]
			if !ok {
				return fmt.Errorf("--protocol %q: want TCP, UDP, SCTP or ICMP", protocol)
			}
			eps, keys, prog, decider, err := endpoints(cmd, g, args[0], inventory)
			if err != nil {
				var ee *exitError
				if errors.As(err, &ee) {
					return err
				}
				return &exitError{code: exitUsage, err: fmt.Errorf("matrix %v", err)}
			}
			ports := []uint16{port}
			if port == 0 {
				ports = policyPorts(prog)
			}
			var cells []cell
			for _, p := range ports {
				for _, from := range keys {
					for _, to := range keys {
						if from == to {
							continue
						}
						v, err := decideOrExit(decider, eps[from], eps[to], proto, p)
						if err != nil {
							return err
						}
						cells = append(cells, cell{From: from, To: to, Protocol: strings.ToUpper(protocol), Port: p, Allowed: v.Allowed, DecidedBy: v.DecidedBy()})
					}
				}
			}
			out := cmd.OutOrStdout()
			if g.output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					Cells []cell `json:"cells"`
				}{append([]cell{}, cells...)})
			}
			return writeMatrix(out, keys, eps, ports, strings.ToUpper(protocol), cells)
		},
	}
	cmd.Flags().StringArrayVar(&inventory, "inventory", nil, "live-state file (kubectl get pods,namespaces -A -o yaml); repeatable")
	cmd.Flags().Uint16Var(&port, "port", 0, "destination port (default: every port in the policies, and 80)")
	cmd.Flags().StringVar(&protocol, "protocol", "TCP", "TCP, UDP, SCTP or ICMP")
	g.outputFlag(cmd, "text", "json")
	return cmd
}

func writeMatrix(w io.Writer, keys []string, eps map[string]*reach.Endpoint, ports []uint16, proto string, cells []cell) error {
	mark := map[string]string{}
	for _, c := range cells {
		m := "."
		switch {
		case c.Allowed:
		case c.DecidedBy == reach.OSLinux:
			m = "L"
		default:
			m = "X"
		}
		mark[fmt.Sprintf("%s|%s|%d", c.From, c.To, c.Port)] = m
	}
	fmt.Fprintln(w, "Pods (rows: from, columns: to; . allowed, X blocked by a Windows node's HNS ACLs,")
	fmt.Fprintln(w, "L blocked by Calico on a Linux node, decided from the policy program):")
	width := 0
	for _, k := range keys {
		width = max(width, len(k))
	}
	for i, k := range keys {
		fmt.Fprintf(w, "  %2d  %-*s  %s (%s)\n", i+1, width, k, eps[k].Node, eps[k].OS)
	}
	for _, p := range ports {
		fmt.Fprintf(w, "\n%s/%d\n     ", proto, p)
		for i := range keys {
			fmt.Fprintf(w, "%3d", i+1)
		}
		fmt.Fprintln(w)
		for i, from := range keys {
			fmt.Fprintf(w, "  %2d ", i+1)
			for _, to := range keys {
				ch := "#"
				if from != to {
					ch = mark[fmt.Sprintf("%s|%s|%d", from, to, p)]
				}
				fmt.Fprintf(w, "%3s", ch)
			}
			if _, err := fmt.Fprintln(w); err != nil {
				return err
			}
		}
	}
	return nil
}

func newExplainCmd(g *globalFlags) *cobra.Command {
	var inventory []string
	var from, to, protocol string
	var port uint16
	cmd := &cobra.Command{
		Use:   "explain DIR --inventory FILE --from NS/POD --to NS/POD --port P",
		Short: "Say why one connection is allowed or blocked: the deciding ACL or policy rule on each side",
		Long: `explain compiles DIR with the inventory's pods and evaluates one connection: the source's
egress and the destination's ingress. A side on a Windows node is decided by its compiled HNS
ACL list: explain shows the deciding ACL, its priority, and the policy rule (file:line) it came
from. A side on a Linux node is decided by Calico there, from the compiled policy program:
explain shows the deciding rule, or the tier end or profile that decided.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput(cmd, "text", "json"); err != nil {
				return err
			}
			proto, ok := protocolNumbers[strings.ToUpper(protocol)]
			if !ok {
				return fmt.Errorf("--protocol %q: want TCP, UDP, SCTP or ICMP", protocol)
			}
			if from == "" || to == "" || port == 0 && proto != 1 {
				return errors.New("explain needs --from NS/POD, --to NS/POD and --port")
			}
			eps, _, prog, decider, err := endpoints(cmd, g, args[0], inventory)
			if err != nil {
				var ee *exitError
				if errors.As(err, &ee) {
					return err
				}
				return &exitError{code: exitUsage, err: fmt.Errorf("explain %v", err)}
			}
			src, dst := eps[from], eps[to]
			for _, k := range []string{from, to} {
				if eps[k] == nil {
					return &exitError{code: exitUsage, err: fmt.Errorf("pod %s is not a pod with an address on a Windows or Linux node of %s and the inventory (use namespace/name)", k, args[0])}
				}
			}
			v, err := decideOrExit(decider, src, dst, proto, port)
			if err != nil {
				return err
			}
			origins := ruleOrigins(prog, args[0])
			res := struct {
				From      string      `json:"from"`
				To        string      `json:"to"`
				Protocol  string      `json:"protocol"`
				Port      uint16      `json:"port"`
				Allowed   bool        `json:"allowed"`
				DecidedBy string      `json:"decidedBy"`
				Egress    explainSide `json:"egress"`
				Ingress   explainSide `json:"ingress"`
			}{from, to, strings.ToUpper(protocol), port, v.Allowed, v.DecidedBy(), explained(v.Egress, origins), explained(v.Ingress, origins)}
			w := cmd.OutOrStdout()
			if g.output == "json" {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			verdict := map[bool]string{true: "ALLOWED", false: "BLOCKED"}
			fmt.Fprintf(w, "%s -> %s  %s/%d: %s\n", from, to, res.Protocol, port, verdict[v.Allowed])
			for _, s := range []struct {
				name string
				s    explainSide
			}{{"egress of " + from, res.Egress}, {"ingress of " + to, res.Ingress}} {
				fmt.Fprintf(w, "  %s (node %s, %s): %s\n", s.name, s.s.Node, s.s.OS, map[bool]string{true: "allow", false: "block"}[s.s.Allowed])
				switch {
				case s.s.ACL != "":
					fmt.Fprintf(w, "    ACL %s, priority %d\n", s.s.ACL, s.s.Priority)
				case s.s.OS == reach.OSLinux:
					fmt.Fprintln(w, "    Calico on Linux, from the policy program")
				}
				fmt.Fprintf(w, "    %s\n", s.s.Because)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&inventory, "inventory", nil, "live-state file (kubectl get pods,namespaces -A -o yaml); repeatable")
	cmd.Flags().StringVar(&from, "from", "", "source pod, namespace/name")
	cmd.Flags().StringVar(&to, "to", "", "destination pod, namespace/name")
	cmd.Flags().Uint16Var(&port, "port", 0, "destination port")
	cmd.Flags().StringVar(&protocol, "protocol", "TCP", "TCP, UDP, SCTP or ICMP")
	g.outputFlag(cmd, "text", "json")
	return cmd
}

// explainSide is one end of an explained connection.
type explainSide struct {
	Endpoint string `json:"endpoint"`
	Node     string `json:"node"`
	OS       string `json:"os"`
	Allowed  bool   `json:"allowed"`
	ACL      string `json:"acl,omitempty"`      // Windows: the deciding ACL
	Priority uint16 `json:"priority,omitempty"` // and its priority
	Rule     string `json:"rule,omitempty"`     // Linux: the deciding rule
	Because  string `json:"because"`
}

func explained(s reach.Side, origins map[string]origin) explainSide {
	e := s.Endpoint
	out := explainSide{Endpoint: e.Key(), Node: e.Node, OS: e.OS, Allowed: s.Allowed}
	if e.OS == reach.OSWindows {
		out.Because = "no ACL matched: HNS allows by default"
		if a := s.Windows.ACL; a != nil {
			out.ACL, out.Priority, out.Because = a.Id, a.Priority, explainACL(a.Id, origins)
		}
		return out
	}
	d := s.Linux
	switch d.Why {
	case "rule":
		out.Rule = d.Rule.ID
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

// origin is where a rendered rule comes from.
type origin struct {
	policy, source string
}

// ruleOrigins maps rule ids to their policy and source position (relative
// to the working directory).
func ruleOrigins(prog *plan.Program, dir string) map[string]origin {
	m := map[string]origin{}
	if prog == nil {
		return m
	}
	for _, t := range prog.Tiers {
		for _, p := range t.Policies {
			for _, r := range append(slices.Clone(p.IngressRules), p.EgressRules...) {
				src := r.Source
				if src != "" {
					src = filepath.Join(dir, src)
				}
				m[r.ID] = origin{policy: p.ID, source: src}
			}
		}
	}
	return m
}

// explainRule says, in words, where a program rule comes from.
func explainRule(rule string, origins map[string]origin) string {
	if o, ok := origins[rule]; ok {
		return fmt.Sprintf("rule %s of policy %s, %s", rule, o.policy, o.source)
	}
	return "rule " + rule
}

// explainACL says, in words, which rule an ACL id comes from.
func explainACL(id string, origins map[string]origin) string {
	rule := id
	if i := strings.LastIndexByte(id, '-'); i > 0 {
		rule = id[:i]
	}
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

func parseAddr(s string) netip.Addr {
	a, _ := netip.ParseAddr(s)
	return a
}
