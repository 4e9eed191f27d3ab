package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/applier/statedir"
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
	var planFile, hnsFlag, node, stateDir, trustedKeys, memQuirks string
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
			var trust *planwatch.Trust
			if trustedKeys != "" {
				ring, err := readTrustedKeys(trustedKeys)
				if err != nil {
					return err
				}
				if err := verifySigned(cmd.OutOrStdout(), planFile, data, ring); err != nil {
					return err
				}
				trust = planwatch.NewTrust(ring)
			}
			p, err := plan.Decode(data, node)
			if err == nil {
				// The shared parts it names, beside it, as compile wrote
				// them; with trusted keys, its route table signed too.
				err = planwatch.AssembleFromDir(p, filepath.Dir(planFile), trust)
			}
			if err == nil {
				err = plan.Validate(p) // whoever wrote it: no hostile plan is applied
			}
			if err != nil {
				return &exitError{code: exitFailed, err: fmt.Errorf("%v; the last good plan stays applied (pass --node if this host's name is not the plan's)", err)}
			}
			client, closeFn, err := openHNS(hnsFlag, memQuirks, p)
			if err != nil {
				return err
			}
			defer closeFn()
			mem, _ := client.(*hnsmem.HNS)
			if simulateCNI && (mem == nil || dryRun) {
				return &exitError{code: exitUsage, err: errors.New("--simulate-cni needs --hns mem, and no --dry-run")}
			}
			sd, err := openStateDir(stateDir, hnsFlag, "apply --once")
			if err != nil {
				return err
			}
			defer sd.close()
			o := onceOpts{dryRun: dryRun, show: !simulateCNI, stateDir: sd.dir}
			if err := applyOnce(cmd.Context(), cmd.OutOrStdout(), client, p, o); err != nil {
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
			o.show = true
			return applyOnce(cmd.Context(), cmd.OutOrStdout(), client, p, o)
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
	cmd.Flags().StringVar(&memQuirks, "mem-quirks", "", memQuirksHelp)
	return cmd
}

// callCounter is an HNS that counts its calls (the in-memory one).
type callCounter interface {
	Calls() []hnsmem.Call
	MutatingCalls() int
	ResetCalls()
}

// onceOpts are apply --once's settings: print the ops only (dryRun),
// print the resulting state (show), and the state directory (the replace
// journal, the record of the network the agent owns), which the caller
// holds locked.
type onceOpts struct {
	dryRun, show bool
	stateDir     string
}

// applyOnce diffs and applies; with show, it prints the resulting state.
// Against an HNS that counts calls, it ends with how many it made: a run
// with nothing to do makes no mutating call. A network replace, or one
// the journal says is unfinished, goes through the journalled replace.
func applyOnce(ctx context.Context, out io.Writer, client hns.Client, p *plan.NodePlan, o onceOpts) error {
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
	owned, err := statedir.LoadOwned(o.stateDir)
	if err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("%w; nothing was changed", err)}
	}
	journalPath := filepath.Join(o.stateDir, statedir.JournalFile)
	journal, err := replace.LoadJournal(journalPath)
	if err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("%w: a replace was left half done by another agent version, or the file was damaged; finish it with the agent that started it, or check HNS by hand before removing the file; nothing was changed", err)}
	}
	echo, err := statedir.LoadEcho(o.stateDir)
	if err != nil {
		fmt.Fprintf(out, "warning: %v\n", err)
	}
	have, err := client.Snapshot(ctx)
	if err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("read HNS: %w", err)}
	}
	want, pending := hns.WantFromPlan(p, hns.LiveValues{})
	want.Owned, want.Echo = owned, echo
	ops := hns.Diff(have, want)
	fmt.Fprintf(out, "node %s, plan %s: %d ops\n", p.Node, p.Digest, len(ops))
	for _, op := range ops {
		fmt.Fprintln(out, op)
	}
	for _, s := range pending {
		fmt.Fprintf(out, "  pending: %s\n", s)
	}
	if journal != nil {
		fmt.Fprintf(out, "  unfinished: the replace of network %s (%s), journalled at step %s in %s, ", journal.Want.Name, journal.Reason, journal.Step, journalPath)
		if o.dryRun {
			fmt.Fprintln(out, "which apply without --dry-run resumes")
		} else {
			fmt.Fprintln(out, "resumed now")
		}
	}
	if o.dryRun {
		if len(ops) == 0 && journal == nil {
			fmt.Fprintln(out, "HNS matches the plan.")
		}
		return nil
	}
	if len(ops) == 0 && journal == nil {
		if err := keepEcho(o.stateDir, echo, nil, have); err != nil {
			return err
		}
		if err := mismatched(out, echo.Mismatches()); err != nil {
			return err
		}
		fmt.Fprintln(out, "HNS matches the plan.")
		return recordOwned(o.stateDir, owned, want, p.Digest)
	}
	if err := inTheWay(have, want, ops); err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	if i := slices.IndexFunc(ops, isNetworkReplace); i >= 0 && echo.Replaced(p.Digest, ops[i].Reason) {
		// The loop breaker: this replace ran for this plan, and HNS reads
		// the network back as if it had not.
		ms := hns.NetworkMismatches(&want.Network, have.Network(cmp.Or(ops[i].From, ops[i].Name)))
		fmt.Fprintf(out, "  not replacing network %s again: it was replaced for this plan (%s) and reads back otherwise\n", ops[i].Name, ops[i].Reason)
		return mismatched(out, append(echo.Mismatches(), ms...))
	}
	if i := slices.IndexFunc(ops, isNetworkReplace); journal != nil || i >= 0 {
		err := replaceOnce(ctx, out, client, p, want, journalPath)
		if err == nil && i >= 0 {
			echo.NoteReplace(p.Digest, ops[i].Reason)
		}
		if serr := statedir.SaveEcho(o.stateDir, echo); serr != nil && err == nil {
			err = &exitError{code: exitFailed, err: fmt.Errorf("the network was replaced, but saving the baseline of what HNS echoes in %s failed: %w (run again)", o.stateDir, serr)}
		}
		if err != nil {
			return err
		}
		// What is left: the pods' ACLs (the runner made the rest).
		if have, err = client.Snapshot(ctx); err != nil {
			return &exitError{code: exitFailed, err: fmt.Errorf("read HNS: %w", err)}
		}
		ops = hns.Diff(have, want)
		if slices.ContainsFunc(ops, isNetworkReplace) {
			return mismatched(out, append(echo.Mismatches(), hns.NetworkMismatches(&want.Network, have.Network(want.Network.Name))...))
		}
	}
	for i, op := range ops {
		if err := applier.Apply(ctx, client, op, maxAttempts, nil); err != nil {
			return &exitError{code: exitFailed, err: fmt.Errorf("%s: %w%s; %d of %d ops were applied before it (run again to finish)",
				strings.TrimSpace(op.String()), err, hint(err), i, len(ops))}
		}
	}
	// The read-back: one snapshot, which the result printed is too.
	now, err := client.Snapshot(ctx)
	if err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("read HNS back after applying: %w", err)}
	}
	if err := keepEcho(o.stateDir, echo, ops, now); err != nil {
		return err
	}
	if err := recordOwned(o.stateDir, owned, want, p.Digest); err != nil {
		return err
	}
	if o.show {
		now.Canonical()
		fmt.Fprintf(out, "\nHNS now:\n%s", now)
	}
	return mismatched(out, echo.Mismatches())
}

func isNetworkReplace(op hns.Op) bool {
	return op.Kind == hns.KindNetwork && (op.Action == hns.Replace || op.Action == hns.Delete)
}

// keepEcho takes the read-back now of ops into the baseline and saves
// it if it changed.
func keepEcho(dir string, echo *hns.Echo, ops []hns.Op, now *hns.State) error {
	if !echo.Record(ops, now) {
		return nil
	}
	if err := statedir.SaveEcho(dir, echo); err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("saving the baseline of what HNS echoes in %s: %w (run again)", dir, err)}
	}
	return nil
}

// mismatched prints the read-back mismatches and fails (exit 1) if there
// are any: HNS does not hold what the plan asks, as far as it reads back.
func mismatched(out io.Writer, ms []hns.Mismatch) error {
	if len(ms) == 0 {
		return nil
	}
	for _, m := range ms {
		fmt.Fprintf(out, "hns-readback-mismatch: %s\n", m)
	}
	return &exitError{code: exitFailed, err: fmt.Errorf("HNS reads back %s otherwise than the agent wrote; not written again until the plan or the object changes (docs/first-windows-host.md says how to report it)",
		plural(len(ms), "field", "fields"))}
}

// replaceOnce runs (or resumes) the journalled replace for apply --once.
// It cannot drain: inTheWay has refused while pods are on the network,
// so the drain finds none and nothing waits for one. Running apply is the
// operator's confirmation, whatever the plan's replacement mode.
func replaceOnce(ctx context.Context, out io.Writer, client hns.Client, p *plan.NodePlan, want *hns.Want, journalPath string) error {
	res, err := replace.Run(ctx, replace.Config{
		HNS: client, Drainer: applier.NoDrainer{}, HostRoutes: hostRoutes(),
		Want: want, PlanDigest: p.Digest, JournalPath: journalPath,
		Mode: replace.ModeDrain, Confirmed: true,
		DrainTimeout: time.Nanosecond, // never wait: there is nothing to drain with
		OnEvent: func(e replace.Event) {
			fmt.Fprintf(out, "  replace: %s\n", e.Message)
		},
	})
	if err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("%w; the journal %s keeps the replace: run apply --once (or the service) again to resume it", err, journalPath)}
	}
	if res.State != kube.StateConverged {
		return &exitError{code: exitFailed, err: fmt.Errorf("the replace of network %s is %s; run apply --once again once that is resolved", want.Network.Name, res.State)}
	}
	return nil
}

// recordOwned records the plan's network as the agent's, once HNS holds
// it, unless the record says so already.
func recordOwned(dir string, owned *hns.Owned, want *hns.Want, digest string) error {
	o := hns.Owned{Network: want.Network.Name, HostEndpoint: want.HostEndpoint.Name}
	if owned != nil && *owned == o {
		return nil
	}
	if err := statedir.SaveOwned(dir, o, digest); err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("HNS matches the plan, but recording its network in %s failed: %w (run again)", dir, err)}
	}
	return nil
}

// inTheWay refuses, before any call, a network replace or delete while
// endpoints the agent does not own are on the network: apply --once
// cannot drain the node, HNS would refuse the delete too
// (ENTITY_HAS_REFERENCES), or, where it allows it, cut the pods off.
func inTheWay(have *hns.State, want *hns.Want, ops []hns.Op) error {
	_, oldHost := hns.Previous(have, want)
	for _, op := range ops {
		if op.Kind != hns.KindNetwork || op.Action != hns.Replace && op.Action != hns.Delete {
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
func openRunHNS(flag, quirks string) (hns.Client, error) {
	c, _, err := openHNS(flag, quirks, &plan.NodePlan{})
	return c, err
}

const memQuirksHelp = "with --hns mem: the HNS read-back quirks to model, comma-separated (" +
	"no-vxlanport-echo, no-acl-id, acl-any-empty, acl-extra-fields, acl-priority-default, duplicate-endpoint-names, vsid-unreadable, vsid-echo-differs, route-batch-partial; see docs/first-windows-host.md)"

// openHNS returns the client --hns names, the in-memory one with the
// --mem-quirks given. The in-memory HNS plays the plan's node: its
// management address is the one the plan gives the host.
func openHNS(flag, quirks string, p *plan.NodePlan) (hns.Client, func(), error) {
	var opts []hnsmem.Option
	if pa, ok := plan.Find[plan.ProviderAddress](p.HostEndpoint.Policies); ok {
		opts = append(opts, hnsmem.ManagementAddress(pa.ProviderAddress))
	}
	if quirks != "" {
		if flag != "mem" && !strings.HasPrefix(flag, "mem:") {
			return nil, nil, &exitError{code: exitUsage, err: fmt.Errorf("--mem-quirks needs --hns mem or mem:FILE (the host's HNS has its own)")}
		}
		qs, err := hnsmem.ParseQuirks(quirks)
		if err != nil {
			return nil, nil, &exitError{code: exitUsage, err: fmt.Errorf("--mem-quirks: %w", err)}
		}
		opts = append(opts, hnsmem.WithQuirks(qs...))
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
