package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/applier/control"
	"github.com/hnsplan/hnsplan/fleet"
)

// controlAction is one of the control commands: which key it writes and
// whether it sets or removes it.
type controlAction struct {
	use, short, long, example string
}

var controlActions = []controlAction{
	{use: "suspend", short: "Suspend agents: they write nothing to HNS and take no step of a replace until unsuspended",
		long: `suspend sets the key suspend.<NODE> (or suspend with --all) of the ConfigMap
hnsplan-system/hnsplan-control to the time and --reason. The agents watch it: a suspended agent
makes no HNS call and takes no step of a network replace (one under way goes on from its
journal once unsuspended); it reports state suspended with the key and reason on its Node,
in /status, as an AgentSuspended Event and as hnsplan_agent_suspended. rollout status shows
suspended nodes, and --wait does not end while one is. An agent that cannot read the
ConfigMap is not suspended.`,
		example: `  hnsplan rollout suspend win-1 win-2 --reason "KB5040437 under investigation"
  hnsplan rollout suspend --all --reason "change freeze"`,
	},
	{use: "unsuspend", short: "Let suspended agents program HNS again",
		long: `unsuspend removes the key suspend.<NODE> (or suspend with --all; a node's own key stays, and
is named) from hnsplan-system/hnsplan-control. The agents go on at once.`,
		example: `  hnsplan rollout unsuspend win-1
  hnsplan rollout unsuspend --all`,
	},
	{use: "reconcile", short: "Ask agents for a pass now, instead of at their next resync",
		long: `reconcile sets the key reconcile.<NODE> (or reconcile with --all) of hnsplan-system/hnsplan-control
to the time: each agent runs a pass at once and records a ReconcileRequested Event on its
Node. A request older than an agent is ignored by it (it passed since it started). A
suspended agent records the request and passes once unsuspended.`,
		example: `  hnsplan rollout reconcile win-1
  hnsplan rollout reconcile --all --reason "after the HNS reset"`,
	},
}

func newRolloutControlCmds() []*cobra.Command {
	var cmds []*cobra.Command
	for _, act := range controlActions {
		f := &rolloutFlags{}
		var all bool
		var reason string
		cmd := &cobra.Command{
			Use: act.use + " NODE...|--all", Short: act.short, Example: act.example,
			Long: act.long + `

It writes its own keys only, by a JSON merge patch of the ConfigMap, which deploy/ ships empty;
the Role hnsplan-rollout-control may get and patch that ConfigMap and nothing else.

Exit codes: 0 written, 1 the cluster failed (or the ConfigMap is missing), 3 usage error.`,
			RunE: func(cmd *cobra.Command, args []string) error {
				if all == (len(args) > 0) {
					return &exitError{code: exitUsage, err: fmt.Errorf("%s needs NODE names or --all, not both", act.use)}
				}
				for _, n := range args {
					if err := control.CheckNode(n); err != nil {
						return &exitError{code: exitUsage, err: err}
					}
				}
				fa := fleet.ControlActions[act.use]
				if fa.Remove && reason != "" {
					return &exitError{code: exitUsage, err: errors.New("--reason: unsuspend writes no value; give it to suspend")}
				}
				cs, host, err := f.client()
				if err != nil {
					return err
				}
				ctx := cmd.Context()
				if ctx == nil {
					ctx = context.Background()
				}
				return invalid(fleet.Control(ctx, cs, fleet.ControlOptions{Namespace: f.namespace, Action: fa, Nodes: args, All: all,
					Reason: reason, Now: time.Now(), Host: host, Out: cmd.OutOrStdout()}))
			},
		}
		f.register(cmd)
		cmd.Flags().BoolVar(&all, "all", false, "every agent (the key "+fleet.ControlActions[act.use].All+")")
		if !fleet.ControlActions[act.use].Remove {
			cmd.Flags().StringVar(&reason, "reason", "", fmt.Sprintf("why, for the agents' status and Events (one printable line, at most %d bytes)", control.MaxReason))
		}
		cmds = append(cmds, cmd)
	}
	return cmds
}
