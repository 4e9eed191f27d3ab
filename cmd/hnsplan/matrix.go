package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/sim"
)

// endpoint is a pod endpoint of a compiled plan with its parsed ACLs.
type endpoint struct {
	key  string
	node string
	ip   string
	acl  *sim.List
}

// endpoints compiles dir with the inventory and returns every Windows pod
// endpoint with its ACL list, by pod key, and the program.
func endpoints(cmd *cobra.Command, g *globalFlags, dir string, inventory []string) (map[string]*endpoint, []string, *plan.Program, error) {
	if len(inventory) == 0 {
		return nil, nil, nil, errors.New("needs --inventory: the pods, their labels and addresses")
	}
	c, err := compileDir(dir, inventory, false)
	if err != nil {
		return nil, nil, nil, err
	}
	errOut := cmd.ErrOrStderr()
	if err := notable(c.findings).WriteText(errOut, g.useColor(errOut)); err != nil {
		return nil, nil, nil, &exitError{code: exitInvalid, err: err}
	}
	if c.findings.HasErrors() || c.result == nil {
		fmt.Fprintf(errOut, "%s: invalid: %s\n", dir, c.findings.Summary())
		return nil, nil, nil, &exitError{code: exitInvalid}
	}
	eps := map[string]*endpoint{}
	var keys []string
	var prog *plan.Program
	for _, p := range c.result.Plans {
		prog = p.Program
		for _, e := range p.Endpoints {
			var acls []plan.ACL
			for _, pol := range e.Policies {
				if a, ok := pol.Settings.(plan.ACL); ok {
					acls = append(acls, a)
				}
			}
			l, err := sim.Compile(acls)
			if err != nil {
				return nil, nil, nil, &exitError{code: exitInvalid, err: fmt.Errorf("pod %s: %v", e.Pod, err)}
			}
			eps[e.Pod] = &endpoint{key: e.Pod, node: p.Node, ip: e.IpConfigurations[0].IpAddress.String(), acl: l}
			keys = append(keys, e.Pod)
		}
	}
	slices.Sort(keys)
	return eps, keys, prog, nil
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
}

// decide is the verdict of one connection: the source's egress list and
// the destination's ingress list, both from the compiled ACLs.
func decide(src, dst *endpoint, proto int, port uint16) (out, in sim.Verdict, allowed bool) {
	dstIP, srcIP := parseAddr(dst.ip), parseAddr(src.ip)
	out = src.acl.Evaluate("Out", sim.Packet{Protocol: proto, Remote: dstIP, LocalPort: ephemeralPort, RemotePort: port})
	in = dst.acl.Evaluate("In", sim.Packet{Protocol: proto, Remote: srcIP, LocalPort: port, RemotePort: ephemeralPort})
	return out, in, out.Allowed && in.Allowed
}

// ephemeralPort stands for the client's source port.
const ephemeralPort = 49152

func newMatrixCmd(g *globalFlags) *cobra.Command {
	var inventory []string
	var port uint16
	var protocol string
	cmd := &cobra.Command{
		Use:   "matrix DIR --inventory FILE",
		Short: "Print who can reach whom, computed from the compiled HNS ACL lists",
		Long: `matrix compiles DIR with the inventory's pods and prints the reachability of every pair of
pods on Windows nodes: allowed only if the source's egress ACL list and the destination's
ingress ACL list both allow it, as HNS evaluates them (never a second reading of the
policies). Ports: --port, or every port the policies name plus 80; protocol TCP unless
--protocol.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput(cmd, "text", "json"); err != nil {
				return err
			}
			proto, ok := protocolNumbers[strings.ToUpper(protocol)]
			if !ok {
				return fmt.Errorf("--protocol %q: want TCP, UDP, SCTP or ICMP", protocol)
			}
			eps, keys, prog, err := endpoints(cmd, g, args[0], inventory)
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
						_, _, allowed := decide(eps[from], eps[to], proto, p)
						cells = append(cells, cell{From: from, To: to, Protocol: strings.ToUpper(protocol), Port: p, Allowed: allowed})
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
			return writeMatrix(out, keys, ports, strings.ToUpper(protocol), cells)
		},
	}
	cmd.Flags().StringArrayVar(&inventory, "inventory", nil, "live-state file (kubectl get pods,namespaces -A -o yaml); repeatable")
	cmd.Flags().Uint16Var(&port, "port", 0, "destination port (default: every port in the policies, and 80)")
	cmd.Flags().StringVar(&protocol, "protocol", "TCP", "TCP, UDP, SCTP or ICMP")
	g.outputFlag(cmd, "text", "json")
	return cmd
}

func writeMatrix(w io.Writer, keys []string, ports []uint16, proto string, cells []cell) error {
	allowed := map[string]bool{}
	for _, c := range cells {
		allowed[fmt.Sprintf("%s|%s|%d", c.From, c.To, c.Port)] = c.Allowed
	}
	fmt.Fprintln(w, "Pods on Windows nodes (rows: from, columns: to; . allowed, X blocked):")
	for i, k := range keys {
		fmt.Fprintf(w, "  %2d  %s\n", i+1, k)
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
					ch = "X"
					if allowed[fmt.Sprintf("%s|%s|%d", from, to, p)] {
						ch = "."
					}
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
		Short: "Say why one connection is allowed or blocked: the deciding ACL on each side",
		Long: `explain compiles DIR with the inventory's pods and evaluates one connection against the
compiled HNS ACL lists: the source's egress and the destination's ingress. For each side
it shows the deciding ACL, its priority, and the policy rule (file:line) it came from.`,
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
			eps, _, prog, err := endpoints(cmd, g, args[0], inventory)
			if err != nil {
				var ee *exitError
				if errors.As(err, &ee) {
					return err
				}
				return &exitError{code: exitUsage, err: fmt.Errorf("explain %v", err)}
			}
			src, dst := eps[from], eps[to]
			for k, e := range map[string]*endpoint{from: src, to: dst} {
				if e == nil {
					return &exitError{code: exitUsage, err: fmt.Errorf("pod %s is not a pod endpoint on a Windows node of %s (use namespace/name)", k, args[0])}
				}
			}
			out, in, allowed := decide(src, dst, proto, port)
			origins := ruleOrigins(prog, args[0])
			type side struct {
				Endpoint string `json:"endpoint"`
				Node     string `json:"node"`
				Allowed  bool   `json:"allowed"`
				ACL      string `json:"acl"`
				Priority uint16 `json:"priority"`
				Because  string `json:"because"`
			}
			mk := func(e *endpoint, v sim.Verdict) side {
				s := side{Endpoint: e.key, Node: e.node, Allowed: v.Allowed, Because: "no ACL matched: HNS allows by default"}
				if v.ACL != nil {
					s.ACL, s.Priority, s.Because = v.ACL.Id, v.ACL.Priority, explainACL(v.ACL.Id, origins)
				}
				return s
			}
			res := struct {
				From     string `json:"from"`
				To       string `json:"to"`
				Protocol string `json:"protocol"`
				Port     uint16 `json:"port"`
				Allowed  bool   `json:"allowed"`
				Egress   side   `json:"egress"`
				Ingress  side   `json:"ingress"`
			}{from, to, strings.ToUpper(protocol), port, allowed, mk(src, out), mk(dst, in)}
			w := cmd.OutOrStdout()
			if g.output == "json" {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			verdict := map[bool]string{true: "ALLOWED", false: "BLOCKED"}
			fmt.Fprintf(w, "%s -> %s  %s/%d: %s\n", from, to, res.Protocol, port, verdict[allowed])
			for _, s := range []struct {
				name string
				s    side
			}{{"egress of " + from, res.Egress}, {"ingress of " + to, res.Ingress}} {
				fmt.Fprintf(w, "  %s (node %s): %s\n", s.name, s.s.Node, map[bool]string{true: "allow", false: "block"}[s.s.Allowed])
				if s.s.ACL != "" {
					fmt.Fprintf(w, "    ACL %s, priority %d\n", s.s.ACL, s.s.Priority)
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

// explainACL says, in words, which rule an ACL id comes from.
func explainACL(id string, origins map[string]origin) string {
	rule := id
	if i := strings.LastIndexByte(id, '-'); i > 0 {
		rule = id[:i]
	}
	if o, ok := origins[rule]; ok {
		return fmt.Sprintf("rule %s of policy %s, %s", rule, o.policy, o.source)
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
