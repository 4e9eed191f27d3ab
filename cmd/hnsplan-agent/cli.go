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
	"github.com/spf13/pflag"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/hns/hnswin"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/internal/buildinfo"
	"github.com/hnsplan/hnsplan/internal/crash"
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

// run executes the CLI with args and returns the process exit code. A
// panic of the command's goroutine is an internal error, exit 1, never the
// runtime's 2; the goroutines the agent starts itself exit 1 the same way
// (crash.Goroutine in run.go and service_windows.go).
func run(args []string, stdout, stderr io.Writer) (code int) {
	defer crash.Guard("hnsplan-agent", stderr, &code)
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
	root.AddCommand(newApplyCmd(), newRunCmd(), newStatusCmd(), newReplaceCmd(), newCaptureCmd(), newInstallCmd(), newUninstallCmd(), newVersionCmd())
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
	var planFile, hnsFlag, node, stateDir, trustedKeys string
	var mem memOptions
	cmd := &cobra.Command{
		Use:   "apply --once --plan FILE [--trusted-keys FILE] [--dry-run] [--hns mem[:state.json]] [--state-dir DIR]",
		Short: "Apply a plan file to HNS once: print the ops, apply them, print the result",
		Long: `apply reads a plan file, verifies it (format, node, digest), reads the shared
parts it names from their files beside it (_routes-….json, _program-….json, as
hnsplan compile writes them; each at the digest the plan names), checks its meaning
(plan.Validate: network type, VNI, routes, ACLs, sizes), compares it with what
HNS holds, and prints one line per op (+ create, ~ update, - delete, -/+ replace) with its
reason. Unless --dry-run, it applies them — retrying transient HNS errors — and prints the
resulting state. A second run with nothing changed makes no call that mutates HNS.

A network HNS cannot change in place (its name, type, subnet, VNI or VXLAN port
changed) is recreated through the journalled replace, as the service does, once no
pod is on it: apply cannot drain the node, so it refuses while pods are there. A
replace left unfinished (a crash, a kill) is resumed by the next apply or run.

The state directory (--state-dir) holds the replace journal and the record of the
network the agent owns (so a renamed network is replaced, not doubled); it is locked
while apply or run works on it, so two agents never act on one node at once.

With --trusted-keys FILE (OpenSSH ed25519 public keys, one a line) the plan must be
signed by one of them: its signature FILE.sig (hnsplan compile --sign-key) is checked
before anything in the plan is believed, and so is its route table's (_routes-….json.sig),
and a plan unsigned or signed by another key
is refused (exit 1, naming the plan and the keys trusted).

--hns mem is the in-memory HNS (mem:FILE keeps its state in FILE between runs, and its
state directory defaults to FILE.d); on Windows the default is the host's HNS.
--simulate-cni, with mem, first creates the plan's pod endpoints as the CNI would,
so that their ACLs can be applied.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runApply(cmd, applyFlags{once: once, dryRun: dryRun, simulateCNI: simulateCNI, planFile: planFile, hnsFlag: hnsFlag, node: node, stateDir: stateDir, trustedKeys: trustedKeys, mem: mem})
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "apply once and exit")
	cmd.Flags().StringVar(&planFile, "plan", "", "the plan file (<node>.json)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the ops, apply nothing")
	cmd.Flags().StringVar(&hnsFlag, "hns", defaultHNS, "HNS to talk to: mem, mem:STATE.json"+windowsHNSHelp)
	cmd.Flags().StringVar(&node, "node", "", "this node's name (default: the host name, lower case)")
	cmd.Flags().StringVar(&stateDir, "state-dir", "", stateDirHelp)
	cmd.Flags().BoolVar(&simulateCNI, "simulate-cni", false, "with --hns mem: create the plan's pod endpoints first, as the CNI would")
	cmd.Flags().StringVar(&trustedKeys, "trusted-keys", "", trustedKeysHelp)
	mem.register(cmd.Flags())
	return cmd
}

// applyFlags are apply's flags.
type applyFlags struct {
	once, dryRun, simulateCNI                      bool
	planFile, hnsFlag, node, stateDir, trustedKeys string
	mem                                            memOptions
}

// runApply applies the plan file once, as apply's flags say.
func runApply(cmd *cobra.Command, f applyFlags) error {
	if !f.once {
		return errors.New("apply needs --once (the service is `hnsplan-agent run`)")
	}
	if f.planFile == "" {
		return errors.New("apply needs --plan FILE")
	}
	if f.node == "" {
		f.node = hostName()
	}
	var trust *planwatch.Trust
	if f.trustedKeys != "" {
		ring, err := readTrustedKeys(f.trustedKeys)
		if err != nil {
			return err
		}
		trust = planwatch.NewTrust(ring)
	}
	// The service's own read: signature, plan, the parts beside
	// it, plan.Validate (whoever wrote it: no hostile plan is
	// applied).
	u := (&planwatch.File{Path: f.planFile, Node: f.node, Trust: trust}).Read(cmd.Context())
	if err := planRefused(f.planFile, u); err != nil {
		return err
	}
	if trust != nil {
		fmt.Fprintf(cmd.OutOrStdout(), "plan %s: signed by %s, a trusted key\n", f.planFile, u.Signer)
	}
	p := u.Plan
	client, closeFn, err := openHNS(f.hnsFlag, f.mem, p)
	if err != nil {
		return err
	}
	defer closeFn()
	mem, _ := client.(*hnsmem.HNS)
	if f.simulateCNI && (mem == nil || f.dryRun) {
		return &exitError{code: exitUsage, err: errors.New("--simulate-cni needs --hns mem, and no --dry-run")}
	}
	sd, err := openStateDir(f.stateDir, f.hnsFlag, "apply --once")
	if err != nil {
		return err
	}
	defer sd.close()
	agent, err := applier.NewAgent(applier.Config{Node: f.node, HNS: client, HNSName: f.hnsFlag, StateDir: sd.dir, HostRoutes: hostRoutes(),
		Plans: &planwatch.File{Path: f.planFile, Node: f.node, Trust: trust}, PlansFrom: f.planFile})
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	out := cmd.OutOrStdout()
	if err := applyOnce(cmd.Context(), out, agent, client, p, f.dryRun, !f.simulateCNI); err != nil {
		return err
	}
	if !f.simulateCNI {
		return nil
	}
	// The network is there: the CNI networks the node's pods, with
	// their own policies and no ACLs; then the agent programs those.
	n, err := simulatePods(mem, p)
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	fmt.Fprintf(out, "\n(the CNI networked %d pods)\n", n)
	return applyOnce(cmd.Context(), out, agent, client, p, false, true)
}

// planRefused is the exit for a plan file apply --once cannot take: absent
// (a usage error), or refused for its signature, its content or its
// meaning, with what planwatch says of it.
func planRefused(planFile string, u planwatch.Update) error {
	var pe *planwatch.Error
	switch {
	case u.Err == nil:
		return nil
	case errors.Is(u.Err, planwatch.ErrAbsent):
		return &exitError{code: exitUsage, err: fmt.Errorf("plan %s does not exist", planFile)}
	case errors.As(u.Err, &pe):
		tail := "; nothing was changed"
		var se *plan.SignatureError
		if !errors.As(u.Err, &se) {
			tail += ", the last good plan stays applied"
		}
		if errors.Is(u.Err, plan.ErrForeignNode) {
			tail += " (pass --node if this host's name is not the plan's)"
		}
		return &exitError{code: exitFailed, err: fmt.Errorf("plan %s: %s%s", planFile, pe.Msg, tail)}
	}
	return &exitError{code: exitFailed, err: u.Err}
}

// callCounter is an HNS that counts its calls (the in-memory one).
type callCounter interface {
	Calls() []hnsmem.Call
	MutatingCalls() int
	ResetCalls()
}

// applyOnce runs one pass of the agent (applier.Agent.Once) and prints
// it: the ops with their reasons, what waits, the replace's steps, and,
// with show, what HNS holds after. Against an HNS that counts calls, it
// ends with how many it made: a run with nothing to do makes no mutating
// call. Exit 1 when HNS does not hold the plan at the end (an error, a
// read-back mismatch, a replace that waits).
func applyOnce(ctx context.Context, out io.Writer, a *applier.Agent, client hns.Client, p *plan.NodePlan, dryRun, show bool) error {
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
	resumed, changes, pending := false, 0, 0
	st, err := a.Once(ctx, p, applier.OnceOptions{
		DryRun: dryRun,
		Resuming: func(j *replace.Journal, path string) {
			resumed = true
			what := "resumed now"
			if dryRun {
				what = "which apply without --dry-run resumes"
			}
			fmt.Fprintf(out, "unfinished: the replace of network %s (%s), journalled at step %s in %s, %s\n", j.Want.Name, j.Reason, j.Step, path, what)
		},
		Round: func(r applier.Round) {
			changes += len(r.Ops)
			if r.N == 0 {
				fmt.Fprintf(out, "node %s, plan %s: %d ops\n", p.Node, p.Digest, len(r.Ops))
			} else if len(r.Ops) > 0 {
				fmt.Fprintf(out, "then, on the new network, %d ops\n", len(r.Ops))
			}
			for _, op := range r.Ops {
				fmt.Fprintln(out, op)
			}
			if r.N == 0 {
				pending = len(r.Pending)
				for _, s := range r.Pending {
					fmt.Fprintf(out, "  pending: %s\n", s)
				}
				for _, s := range r.Notes {
					fmt.Fprintf(out, "  note: %s\n", s)
				}
			}
		},
		Event: func(e replace.Event) { fmt.Fprintf(out, "  replace: %s\n", e.Message) },
	})
	if err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("%w%s", err, hint(err))}
	}
	matches := "HNS matches the plan."
	if pending > 0 {
		matches = "HNS matches the plan, but for what waits (pending, above)."
	}
	switch {
	case dryRun:
		if changes == 0 && !resumed {
			fmt.Fprintln(out, matches)
		}
		return nil
	case st.State == kube.StateReadbackMismatch:
		for _, m := range st.Mismatches {
			fmt.Fprintf(out, "hns-readback-mismatch: %s\n", m)
		}
		return &exitError{code: exitFailed, err: fmt.Errorf("HNS reads back %s otherwise than the agent wrote; not written again until the plan or the object changes (docs/first-windows-host.md says how to report it)",
			plural(len(st.Mismatches), "field", "fields"))}
	case st.State != kube.StateConverged:
		return &exitError{code: exitFailed, err: fmt.Errorf("node %s is %s: %s", p.Node, st.State, st.LastError)}
	}
	if changes == 0 && !resumed {
		fmt.Fprintln(out, matches)
		return nil
	}
	if show {
		fmt.Fprintf(out, "\nHNS now:\n%s", heldState(ctx, client))
	}
	return nil
}

// heldState renders what HNS holds: the in-memory HNS's own rendering
// (not a call), else a snapshot's.
func heldState(ctx context.Context, client hns.Client) string {
	if s, ok := client.(fmt.Stringer); ok {
		return s.String()
	}
	now, err := client.Snapshot(ctx)
	if err != nil {
		return fmt.Sprintf("(reading HNS: %v)\n", err)
	}
	now.Canonical()
	return now.String()
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
func openRunHNS(flag string, mem memOptions) (hns.Client, error) {
	c, _, err := openHNS(flag, mem, &plan.NodePlan{})
	return c, err
}

// memOptions are the flags of the in-memory HNS: --mem-quirks and
// --mem-seed.
type memOptions struct {
	quirks, seed string
}

func (o *memOptions) register(fl *pflag.FlagSet) {
	fl.StringVar(&o.quirks, "mem-quirks", "", memQuirksHelp)
	fl.StringVar(&o.seed, "mem-seed", "", memSeedHelp)
}

const memSeedHelp = "with --hns mem: start from what a capture holds (hnsplan-agent capture -o FILE on a real node, or an assembled one: examples/*/*.capture.json), " +
	"as a CNI, kube-proxy or an earlier agent left the node; with mem:STATE.json only while STATE.json does not exist yet"

const memQuirksHelp = "with --hns mem: the HNS read-back quirks to model, comma-separated (" +
	"no-vxlanport-echo, no-acl-id, acl-any-empty, acl-extra-fields, acl-priority-default, duplicate-endpoint-names, duplicate-endpoint-ips, vsid-unreadable, vsid-echo-differs, route-batch-partial; see docs/first-windows-host.md)"

// openHNS returns the client --hns names, the in-memory one with the
// --mem-quirks given and seeded from --mem-seed. The in-memory HNS plays
// the plan's node: its management address is the one the plan gives the
// host.
func openHNS(flag string, mem memOptions, p *plan.NodePlan) (hns.Client, func(), error) {
	isMem := flag == "mem" || strings.HasPrefix(flag, "mem:")
	var opts []hnsmem.Option
	if pa, ok := plan.Find[plan.ProviderAddress](p.HostEndpoint.Policies); ok {
		opts = append(opts, hnsmem.ManagementAddress(pa.ProviderAddress))
	}
	if mem.quirks != "" {
		if !isMem {
			return nil, nil, &exitError{code: exitUsage, err: fmt.Errorf("--mem-quirks needs --hns mem or mem:FILE (the host's HNS has its own)")}
		}
		qs, err := hnsmem.ParseQuirks(mem.quirks)
		if err != nil {
			return nil, nil, &exitError{code: exitUsage, err: fmt.Errorf("--mem-quirks: %w", err)}
		}
		opts = append(opts, hnsmem.WithQuirks(qs...))
	}
	if mem.seed != "" && !isMem {
		return nil, nil, &exitError{code: exitUsage, err: fmt.Errorf("--mem-seed needs --hns mem or mem:FILE (it never writes to the host's HNS)")}
	}
	var h *hnsmem.HNS
	switch {
	case flag == "mem":
		h = hnsmem.New(opts...)
	case strings.HasPrefix(flag, "mem:"):
		path := strings.TrimPrefix(flag, "mem:")
		if _, err := os.Stat(path); err == nil && mem.seed != "" {
			return nil, nil, &exitError{code: exitUsage, err: fmt.Errorf("--mem-seed %s with --hns %s, which exists: the state file already holds a node; remove it to start again from the capture, or leave out --mem-seed", mem.seed, flag)}
		}
		var err error
		if h, err = hnsmem.Open(path, opts...); err != nil {
			return nil, nil, &exitError{code: exitFailed, err: err}
		}
	default:
		return openPlatformHNS(flag)
	}
	if mem.seed != "" {
		if err := seedHNS(h, mem.seed); err != nil {
			return nil, nil, err
		}
	}
	return h, func() {}, nil
}

// seedHNS fills the in-memory HNS with what the capture file holds, read
// as the agent reads a node (hnswin.DecodeCapture).
func seedHNS(h *hnsmem.HNS, file string) error {
	b, err := readBounded(file, maxCaptureSize)
	if err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("--mem-seed: %w", err)}
	}
	st, err := hnswin.DecodeCapture(b)
	if err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("--mem-seed %s: %w (a file hnsplan-agent capture -o wrote)", file, err)}
	}
	if err := h.Seed(st); err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("--mem-seed %s: %w", file, err)}
	}
	return nil
}

// maxCaptureSize bounds a capture read as a seed: a node's networks,
// endpoints and load balancers (a 110-pod node with 5,000 kube-proxy load
// balancers is a few MiB).
const maxCaptureSize = 64 << 20

// readBounded reads a regular file of at most max bytes.
func readBounded(name string, max int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d MiB", name, max>>20)
	}
	return b, nil
}

// simulatePods creates the plan's pod endpoints in the in-memory HNS as
// the CNI would when the pods start: with the pod template's policies and
// no ACLs, on the plan's network; for a policy-only plan, with no policy,
// on the first network of HNS the plan matches (the CNI's, seeded). It
// returns how many it created.
func simulatePods(h *hnsmem.HNS, p *plan.NodePlan) (int, error) {
	snap, err := h.Snapshot(context.Background())
	if err != nil {
		return 0, err
	}
	network, suffix := p.Network.Name, "_"+p.Network.Name
	if po := p.PolicyOnly; po != nil {
		m, err := plan.NewNetworkMatcher(po.Networks)
		if err != nil {
			return 0, err
		}
		network, suffix = "", "-eth0"
		for _, n := range snap.Networks {
			if m.Match(n.Name) {
				network = n.Name
				break
			}
		}
		if network == "" {
			return 0, fmt.Errorf("no network of the in-memory HNS matches the plan's networks %s: seed the CNI's network first (--mem-seed a capture of the node)", m)
		}
	}
	have := map[netip.Addr]bool{}
	for _, e := range snap.EndpointsOn(network) {
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
		ip := netipPrefix(e.IpConfigurations[0])
		if p.PolicyOnly != nil {
			// The CNI's network's prefix length, as its IPAM gives it.
			for _, nw := range snap.Networks {
				for _, s := range nw.Subnets {
					if nw.Name == network && s.Prefix.Contains(ip.Addr()) {
						ip = netip.PrefixFrom(ip.Addr(), s.Prefix.Bits())
					}
				}
			}
		}
		if err := h.AddPodEndpoint(network, fmt.Sprintf("cni-%04d%s", i, suffix), ip, e.MacAddress, policies); err != nil {
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
