package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/access"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/reach"
)

// model builds dir with the inventory and returns its access model:
// every pod with an address on a Windows node (with its compiled ACL list)
// or a Linux node (decided from the program). name is how dir is called
// in messages and source positions.
func model(cmd *cobra.Command, g *globalFlags, dir, name string, inventory []string) (*access.Model, error) {
	if len(inventory) == 0 {
		return nil, errors.New("needs --inventory: the pods, their labels and addresses")
	}
	res, err := build(cmd, g, dir, name, inputLimits.options(inventory))
	if err != nil {
		return nil, err
	}
	return modelOf(res, name)
}

// modelOf is the access model of a built intent. Its program decides the
// Linux pods, also when the intent has no Windows node.
func modelOf(res *compiler.Result, name string) (*access.Model, error) {
	m, err := access.NewModel(res.Intent, res.Plans, res.Program, name)
	if err != nil {
		return nil, &exitError{code: exitInvalid, err: err}
	}
	return m, nil
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
			m, err := model(cmd, g, args[0], args[0], inventory)
			if err != nil {
				var ee *exitError
				if errors.As(err, &ee) {
					return err
				}
				return &exitError{code: exitUsage, err: fmt.Errorf("matrix %v", err)}
			}
			eps, keys, prog, decider := m.Endpoints, m.Keys, m.Program, m.Decider
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
			return writeMatrix(out, keys, eps, m.Owners, ports, strings.ToUpper(protocol), cells)
		},
	}
	cmd.Flags().StringArrayVar(&inventory, "inventory", nil, "live-state file (kubectl get pods,namespaces -A -o yaml); repeatable")
	cmd.Flags().Uint16Var(&port, "port", 0, "destination port (default: every port in the policies, and 80)")
	cmd.Flags().StringVar(&protocol, "protocol", "TCP", "TCP, UDP, SCTP or ICMP")
	g.outputFlag(cmd, "text", "json")
	return cmd
}

// writeMatrix writes the cells as a table per port; owners are the
// programs owning policy-only nodes' networks, named beside their pods.
func writeMatrix(w io.Writer, keys []string, eps map[string]*reach.Endpoint, owners map[string]string, ports []uint16, proto string, cells []cell) error {
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
		owner := ""
		if o := owners[eps[k].Node]; o != "" {
			owner = ", " + o + "'s endpoint"
		}
		fmt.Fprintf(w, "  %2d  %-*s  %s (%s%s)\n", i+1, width, k, eps[k].Node, eps[k].OS, owner)
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
	var from, to, protocol, base string
	var port uint16
	cmd := &cobra.Command{
		Use:   "explain DIR --inventory FILE --from NS/POD --to NS/POD --port P [--base GIT-REF]",
		Short: "Say why one connection is allowed or blocked: the deciding ACL or policy rule on each side",
		Long: `explain compiles DIR with the inventory's pods and evaluates one connection: the source's
egress and the destination's ingress. A side on a Windows node is decided by its compiled HNS
ACL list: explain shows the deciding ACL, its priority, and the policy rule (file:line) it came
from. A side on a Linux node is decided by Calico there, from the compiled policy program:
explain shows the deciding rule, or the tier end or profile that decided.

With --base GIT-REF, explain decides the connection twice, on DIR as it was at GIT-REF (read
from git's objects, as diff --base does) and on DIR in the work tree, and shows both: what a
change does to this connection, and why.`,
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
			q := query{from: from, to: to, protocol: strings.ToUpper(protocol), proto: proto, port: port}
			w := cmd.OutOrStdout()
			if base == "" {
				res, err := explainIn(cmd, g, args[0], args[0], inventory, q)
				if err != nil {
					return err
				}
				if g.output == "json" {
					return writeJSON(w, res)
				}
				writeExplained(w, "", res)
				return nil
			}
			return explainBase(cmd, g, args[0], base, inventory, q)
		},
	}
	cmd.Flags().StringArrayVar(&inventory, "inventory", nil, "live-state file (kubectl get pods,namespaces -A -o yaml); repeatable")
	cmd.Flags().StringVar(&from, "from", "", "source pod, namespace/name")
	cmd.Flags().StringVar(&to, "to", "", "destination pod, namespace/name")
	cmd.Flags().Uint16Var(&port, "port", 0, "destination port")
	cmd.Flags().StringVar(&protocol, "protocol", "TCP", "TCP, UDP, SCTP or ICMP")
	cmd.Flags().StringVar(&base, "base", "", "also decide the connection on DIR as it was at this git ref, and show both")
	g.outputFlag(cmd, "text", "json")
	return cmd
}

// explainBase decides q on dir as it was at the git ref base and as it
// is, and shows both.
func explainBase(cmd *cobra.Command, g *globalFlags, dir, base string, inventory []string, q query) error {
	w := cmd.OutOrStdout()
	bs, hs, cleanup, err := gitSides(base, dir)
	if err != nil {
		return err
	}
	defer cleanup()
	if bs.absent || hs.absent {
		return &exitError{code: exitUsage, err: fmt.Errorf("explain --base %s: %s exists on one side only (%s); there is no connection to compare", base, dir, cmp.Or(bs.note, hs.note))}
	}
	// The base's source positions read as DIR's: the same files at REF.
	before, err := explainIn(cmd, g, bs.dir, dir, inventory, q)
	if err != nil {
		return err
	}
	after, err := explainIn(cmd, g, hs.dir, dir, inventory, q)
	if err != nil {
		return err
	}
	if g.output == "json" {
		return writeJSON(w, struct {
			Base   string    `json:"base"`
			Before explained `json:"before"`
			After  explained `json:"after"`
		}{base, before, after})
	}
	verdict := map[bool]string{true: "ALLOWED", false: "BLOCKED"}
	change := "unchanged"
	if before.Allowed != after.Allowed {
		change = "changed"
	}
	fmt.Fprintf(w, "%s -> %s  %s/%d: %s -> %s (%s)\n", q.from, q.to, q.protocol, q.port, verdict[before.Allowed], verdict[after.Allowed], change)
	fmt.Fprintf(w, "before (%s at %s):\n", dir, base)
	writeExplained(w, "  ", before)
	fmt.Fprintf(w, "after (%s):\n", dir)
	writeExplained(w, "  ", after)
	return nil
}

// query is the connection explain decides.
type query struct {
	from, to, protocol string
	proto              int
	port               uint16
}

// explained is one decided connection.
type explained struct {
	From      string             `json:"from"`
	To        string             `json:"to"`
	Protocol  string             `json:"protocol"`
	Port      uint16             `json:"port"`
	Allowed   bool               `json:"allowed"`
	DecidedBy string             `json:"decidedBy"`
	Egress    access.Explanation `json:"egress"`
	Ingress   access.Explanation `json:"ingress"`
}

// explainIn compiles dir (called name) and decides q there.
func explainIn(cmd *cobra.Command, g *globalFlags, dir, name string, inventory []string, q query) (explained, error) {
	m, err := model(cmd, g, dir, name, inventory)
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			return explained{}, err
		}
		return explained{}, &exitError{code: exitUsage, err: fmt.Errorf("explain %v", err)}
	}
	for _, k := range []string{q.from, q.to} {
		if m.Endpoints[k] == nil {
			return explained{}, &exitError{code: exitUsage, err: fmt.Errorf("pod %s is not a pod with an address on a Windows or Linux node of %s and the inventory (use namespace/name)", k, name)}
		}
	}
	v, err := decideOrExit(m.Decider, m.Endpoints[q.from], m.Endpoints[q.to], q.proto, q.port)
	if err != nil {
		return explained{}, err
	}
	eg, in := access.Explain(v.Egress, m.Origins), access.Explain(v.Ingress, m.Origins)
	eg.Owner, in.Owner = m.Owners[eg.Node], m.Owners[in.Node]
	return explained{q.from, q.to, q.protocol, q.port, v.Allowed, v.DecidedBy(), eg, in}, nil
}

func writeExplained(w io.Writer, indent string, res explained) {
	verdict := map[bool]string{true: "ALLOWED", false: "BLOCKED"}
	fmt.Fprintf(w, "%s%s -> %s  %s/%d: %s\n", indent, res.From, res.To, res.Protocol, res.Port, verdict[res.Allowed])
	for _, s := range []struct {
		name string
		s    access.Explanation
	}{{"egress of " + res.From, res.Egress}, {"ingress of " + res.To, res.Ingress}} {
		owner := ""
		if s.s.Owner != "" {
			owner = ", " + s.s.Owner + "'s endpoint"
		}
		fmt.Fprintf(w, "%s  %s (node %s, %s%s): %s\n", indent, s.name, s.s.Node, s.s.OS, owner, map[bool]string{true: "allow", false: "block"}[s.s.Allowed])
		switch {
		case s.s.ACL != "":
			fmt.Fprintf(w, "%s    ACL %s, priority %d\n", indent, s.s.ACL, s.s.Priority)
		case s.s.OS == reach.OSLinux:
			fmt.Fprintf(w, "%s    Calico on Linux, from the policy program\n", indent)
		}
		fmt.Fprintf(w, "%s    %s\n", indent, s.s.Because)
		if s.s.Owner != "" {
			aks := ""
			if s.s.Owner == "azure-cni" {
				aks = " (AKS's: to the wireserver, 168.63.129.16, ports 80 and 32526)"
			}
			fmt.Fprintf(w, "%s    %s's own ACLs on the endpoint stay beside hnsplan's: its Blocks decide first%s\n", indent, s.s.Owner, aks)
		}
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
