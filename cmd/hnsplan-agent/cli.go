package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/internal/buildinfo"
)

const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 3
	maxAttempts = 3
)

type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return fmt.Sprint(e.err) }
func (e *exitError) Unwrap() error { return e.err }

func run(args []string, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:           "hnsplan-agent",
		Short:         "Converge this Windows node's HNS to its hnsplan plan",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	root.Version = buildinfo.Get().Line("hnsplan-agent") // --version
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(newApplyCmd(), newRunCmd(), newStatusCmd(), newReplaceCmd(), newInstallCmd(), newUninstallCmd(), newVersionCmd())
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(stderr, "hnsplan-agent: %v\n", ee.err)
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "hnsplan-agent: %v\nRun 'hnsplan-agent --help' for usage.\n", err)
	return exitUsage
}

func newApplyCmd() *cobra.Command {
	var once, dryRun, simulateCNI bool
	var planFile, hnsFlag, node string
	cmd := &cobra.Command{
		Use:   "apply --once --plan FILE [--dry-run] [--hns mem[:state.json]]",
		Short: "Apply a plan file to HNS once: print the ops, apply them, print the result",
		Long: `apply reads a plan file, verifies it (format, node, digest) and its meaning
(plan.Validate: network type, VNI, routes, ACLs, sizes), compares it with what
HNS holds, and prints one line per op (+ create, ~ update, - delete, -/+ replace) with its
reason. Unless --dry-run, it applies them — retrying transient HNS errors — and prints the
resulting state. A second run with nothing changed makes no call that mutates HNS.

--hns mem is the in-memory HNS (mem:FILE keeps its state in FILE between runs);
on Windows the default is the host's HNS. --simulate-cni, with mem, first creates the
plan's pod endpoints as the CNI would, so that their ACLs can be applied.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !once {
				return errors.New("apply needs --once (the service is `hnsplan-agent run`)")
			}
			if planFile == "" {
				return errors.New("apply needs --plan FILE")
			}
			data, err := os.ReadFile(planFile)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if node == "" {
				node = hostName()
			}
			p, err := plan.Decode(data, node)
			if err == nil {
				err = plan.Validate(p) // whoever wrote it: no hostile plan is applied
			}
			if err != nil {
				return &exitError{code: exitFailed, err: fmt.Errorf("%v; the last good plan stays applied (pass --node if this host's name is not the plan's)", err)}
			}
			client, closeFn, err := openHNS(hnsFlag, p)
			if err != nil {
				return err
			}
			defer closeFn()
			mem, _ := client.(*hnsmem.HNS)
			if simulateCNI && (mem == nil || dryRun) {
				return &exitError{code: exitUsage, err: errors.New("--simulate-cni needs --hns mem, and no --dry-run")}
			}
			if err := applyOnce(cmd.Context(), cmd.OutOrStdout(), client, p, dryRun, !simulateCNI); err != nil {
				return err
			}
			if !simulateCNI {
				return nil
			}
			// The network is there: the CNI networks the node's pods, with
			// their own policies and no ACLs; then the agent programs those.
			n, err := simulatePods(mem, p)
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\n(the CNI networked %d pods)\n", n)
			return applyOnce(cmd.Context(), cmd.OutOrStdout(), client, p, false, true)
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "apply once and exit")
	cmd.Flags().StringVar(&planFile, "plan", "", "the plan file (<node>.json)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the ops, apply nothing")
	cmd.Flags().StringVar(&hnsFlag, "hns", defaultHNS, "HNS to talk to: mem, mem:STATE.json"+windowsHNSHelp)
	cmd.Flags().StringVar(&node, "node", "", "this node's name (default: the host name, lower case)")
	cmd.Flags().BoolVar(&simulateCNI, "simulate-cni", false, "with --hns mem: create the plan's pod endpoints first, as the CNI would")
	return cmd
}

// callCounter is an HNS that counts its calls (the in-memory one).
type callCounter interface {
	Calls() []hnsmem.Call
	MutatingCalls() int
	ResetCalls()
}

// applyOnce diffs and applies; with show, it prints the resulting state.
// Against an HNS that counts calls, it ends with how many it made: a run
// with nothing to do makes no mutating call.
func applyOnce(ctx context.Context, out io.Writer, client hns.Client, p *plan.NodePlan, dryRun, show bool) error {
	if ctx == nil {
		ctx = context.Background()
	}
	counter, _ := client.(callCounter)
	if counter != nil {
		counter.ResetCalls()
		defer func() {
			fmt.Fprintf(out, "HNS calls: %d mutating, %d reads\n", counter.MutatingCalls(), len(counter.Calls())-counter.MutatingCalls())
		}()
	}
	have, err := client.Snapshot(ctx)
	if err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("read HNS: %w", err)}
	}
	want, pending := hns.WantFromPlan(p, hns.LiveValues{})
	ops := hns.Diff(have, want)
	fmt.Fprintf(out, "node %s, plan %s: %d ops\n", p.Node, p.Digest, len(ops))
	for _, op := range ops {
		fmt.Fprintln(out, op)
	}
	for _, s := range pending {
		fmt.Fprintf(out, "  pending: %s\n", s)
	}
	if dryRun || len(ops) == 0 {
		if len(ops) == 0 {
			fmt.Fprintln(out, "HNS matches the plan.")
		}
		return nil
	}
	if err := inTheWay(have, want, ops); err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	for i, op := range ops {
		if err := applier.Apply(ctx, client, op, maxAttempts, nil); err != nil {
			return &exitError{code: exitFailed, err: fmt.Errorf("%s: %w%s; %d of %d ops were applied before it (run again to finish)",
				strings.TrimSpace(op.String()), err, hint(err), i, len(ops))}
		}
	}
	if show {
		now, err := client.Snapshot(ctx)
		if err != nil {
			return &exitError{code: exitFailed, err: fmt.Errorf("read HNS after applying: %w", err)}
		}
		now.Canonical()
		fmt.Fprintf(out, "\nHNS now:\n%s", now)
	}
	return nil
}

// inTheWay refuses, before any call, a network replace or delete while
// endpoints the agent does not own are on the network: HNS would refuse
// too (ENTITY_HAS_REFERENCES) after the agent's own endpoint was gone, or,
// where it allows it, cut the pods off.
func inTheWay(have *hns.State, want *hns.Want, ops []hns.Op) error {
	for _, op := range ops {
		if op.Kind != hns.KindNetwork || op.Action != hns.Replace && op.Action != hns.Delete {
			continue
		}
		var names []string
		for _, e := range have.EndpointsOn(op.Name) {
			if e.Name != want.HostEndpoint.Name {
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
			op.Name, op.Reason, plural(n, "endpoint", "endpoints"), strings.Join(names, ", "), more)
	}
	return nil
}

// hint says what to do about the HNS errors an operator can act on.
func hint(err error) string {
	var he *hns.Error
	if !errors.As(err, &he) {
		return ""
	}
	switch he.Code {
	case hns.CodeEntityHasReferences:
		return " (pods still have endpoints on the network: drain the node, kubectl drain NODE --ignore-daemonsets, then apply again)"
	case hns.CodeNetworkAlreadyExists:
		return " (another network has that name: remove it, or rename the plan's network)"
	}
	return ""
}

// openRunHNS is openHNS for the service, before any plan is known.
func openRunHNS(flag string) (hns.Client, error) {
	c, _, err := openHNS(flag, &plan.NodePlan{})
	return c, err
}

// openHNS returns the client --hns names. The in-memory HNS plays the
// plan's node: its management address is the one the plan gives the host.
func openHNS(flag string, p *plan.NodePlan) (hns.Client, func(), error) {
	var opts []hnsmem.Option
	if pa, ok := plan.Find[plan.ProviderAddress](p.HostEndpoint.Policies); ok {
		opts = append(opts, hnsmem.ManagementAddress(pa.ProviderAddress))
	}
	switch {
	case flag == "mem":
		return hnsmem.New(opts...), func() {}, nil
	case strings.HasPrefix(flag, "mem:"):
		h, err := hnsmem.Open(strings.TrimPrefix(flag, "mem:"), opts...)
		if err != nil {
			return nil, nil, &exitError{code: exitFailed, err: err}
		}
		return h, func() {}, nil
	}
	return openPlatformHNS(flag)
}

// simulatePods creates the plan's pod endpoints in the in-memory HNS as
// the CNI would when the pods start: with the pod template's policies and
// no ACLs. It returns how many it created.
func simulatePods(h *hnsmem.HNS, p *plan.NodePlan) (int, error) {
	snap, err := h.Snapshot(context.Background())
	if err != nil {
		return 0, err
	}
	have := map[netip.Addr]bool{}
	for _, e := range snap.EndpointsOn(p.Network.Name) {
		have[e.IP.Addr()] = true
	}
	n := 0
	for i, e := range p.Endpoints {
		if len(e.IpConfigurations) == 0 || have[e.IpConfigurations[0].IpAddress] {
			continue
		}
		var policies []plan.Policy
		for _, pol := range e.Policies {
			if pol.Type != plan.TypeACL {
				policies = append(policies, pol)
			}
		}
		name := fmt.Sprintf("cni-%04d_%s", i, p.Network.Name)
		if err := h.AddPodEndpoint(p.Network.Name, name, netipPrefix(e.IpConfigurations[0]), e.MacAddress, policies); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func hostName() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return strings.ToLower(h)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and commit of hnsplan-agent",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), buildinfo.Get().Line("hnsplan-agent"))
			return err
		},
	}
}

func netipPrefix(c plan.IpConfig) netip.Prefix { return netip.PrefixFrom(c.IpAddress, c.PrefixLength) }
