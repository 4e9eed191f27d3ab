package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/hnsplan/hnsplan/fleet"
)

// Exit codes of `rollout status` beyond the common ones (docs/operations.md,
// "Rollout status").
const (
	exitHalted  = 4 // a rollout is halted: a slot holder is blocked or failed
	exitTimeout = 5 // --wait: the --timeout passed before the rollout ended
)

type rolloutFlags struct {
	kubeconfig string
	context    string
	namespace  string
	watch      bool
	wait       bool
	timeout    time.Duration
	interval   time.Duration
	force      bool
}

func (f *rolloutFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	cmd.Flags().StringVar(&f.context, "context", "", "kubeconfig context to use (default: the current one)")
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", publishNamespace, "the namespace of the plan ConfigMaps and the slot Leases")
}

// client checks the flags and connects.
func (f *rolloutFlags) client() (kubernetes.Interface, string, error) {
	if f.kubeconfig != "" {
		if _, err := os.Stat(f.kubeconfig); err != nil {
			return nil, "", &exitError{code: exitUsage, err: fmt.Errorf("--kubeconfig: %v", err)}
		}
	}
	if f.namespace == "" {
		return nil, "", &exitError{code: exitUsage, err: errors.New("--namespace: empty; the agents' namespace is " + publishNamespace)}
	}
	cs, host, err := kubeClient(f.kubeconfig, f.context)
	if err != nil {
		return nil, "", &exitError{code: exitInvalid, err: err}
	}
	return cs, host, nil
}

func newRolloutCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Follow and steer the rollout of published plans across the Windows nodes",
		Long: `rollout reads what the agents report: the plan ConfigMaps hnsplan publish wrote, the
Nodes' hnsplan.io/ annotations and the rollout slot Leases (hnsplan-rollout-<i>) in
` + publishNamespace + `. status shows them; resume frees the slots of halted nodes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return &exitError{code: exitUsage, err: errors.New("rollout needs a subcommand: status, resume, suspend, unsuspend or reconcile (hnsplan rollout --help)")}
		},
	}
	cmd.AddCommand(newRolloutStatusCmd(g), newRolloutResumeCmd())
	cmd.AddCommand(newRolloutControlCmds()...)
	return cmd
}

func newRolloutStatusCmd(g *globalFlags) *cobra.Command {
	f := &rolloutFlags{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show each Windows node's published and applied plan, state and rollout slot; exit 4 while halted",
		Long: `status prints, per Windows node (each node with a plan ConfigMap, and each slot holder):
the published digest (the ConfigMap's hnsplan.io/digest), the applied digest (the Node's
hnsplan.io/applied-digest), the state (hnsplan.io/state, as the agent wrote it), the rollout
slot it holds and its last error (hnsplan.io/last-error); then a summary line.

A node is converged when its applied digest is the published one, its state is converged
and it holds no slot; halted when it holds a slot and its state is blocked or error, or
its last error is set and its state is not replacing; pending otherwise. A rollout is
halted while any node is.

--watch prints the status again each time it changes (polling every --interval) until
interrupted or --timeout passes. --wait follows it until it ends: every node converged
(exit 0), or halted (exit 4); after --timeout, exit 5.

Exit codes: 0 no rollout halted (converged or progressing), 1 the cluster could not be
read, 3 usage error, 4 halted, 5 --wait timed out while still pending.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.checkOutput(cmd, "text", "json"); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if f.interval < 100*time.Millisecond || f.interval > 5*time.Minute {
				return &exitError{code: exitUsage, err: fmt.Errorf("--interval %v: give a duration from 100ms to 5m", f.interval)}
			}
			if f.timeout < 0 {
				return &exitError{code: exitUsage, err: fmt.Errorf("--timeout %v: give a positive duration, or 0 for none", f.timeout)}
			}
			if f.timeout > 0 && !f.watch && !f.wait {
				return &exitError{code: exitUsage, err: errors.New("--timeout bounds --watch or --wait; give one of them")}
			}
			return f.status(cmd, g.output)
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVarP(&f.watch, "watch", "w", false, "print the status again whenever it changes, until interrupted or --timeout")
	cmd.Flags().BoolVar(&f.wait, "wait", false, "follow the rollout until every node is converged (exit 0) or it halts (exit 4)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 0, "end --watch or --wait after this long (0: never); --wait then exits 5")
	cmd.Flags().DurationVar(&f.interval, "interval", 2*time.Second, "how often --watch and --wait read the cluster")
	g.outputFlag(cmd, "text", "json")
	return cmd
}

// status prints the status once, or follows it (fleet.Follow); its exit
// is 4 while halted, 5 when --wait timed out.
func (f *rolloutFlags) status(cmd *cobra.Command, format string) error {
	cs, host, err := f.client()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	if f.watch || f.wait {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	st, err := fleet.Follow(ctx, cs, fleet.FollowOptions{Namespace: f.namespace, Format: format, Watch: f.watch, Wait: f.wait,
		Timeout: f.timeout, Interval: f.interval, Host: host, Out: cmd.OutOrStdout(), ErrOut: cmd.ErrOrStderr()})
	switch {
	case errors.Is(err, fleet.ErrTimeout):
		return &exitError{code: exitTimeout, err: err}
	case err != nil:
		return &exitError{code: exitInvalid, err: err}
	case st.Halted():
		return &exitError{code: exitHalted}
	}
	return nil
}
