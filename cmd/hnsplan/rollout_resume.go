package main

import (
	"context"
	"errors"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/fleet"
)

func newRolloutResumeCmd() *cobra.Command {
	f := &rolloutFlags{}
	cmd := &cobra.Command{
		Use:   "resume [NODE...]",
		Short: "Free the rollout slots of halted nodes, so that the rollout goes on without them",
		Long: `resume frees the rollout slots held by halted nodes (as rollout status defines halted):
all of them without NODE, else those of the nodes named. Every stall status shows is freed
without --force: a drain blocked past its timeout, a slot held by a name that is no Windows
node, a slot its agent stopped renewing, and a node cordoned by hnsplan's agent that holds
no slot (its agent died mid-replace), which resume lets go of (annotation hnsplan.io/let-go)
so that it no longer counts against maxUnavailable. A named node that holds no slot and is
not stranded is an error; one that is not halted (its replace is under way) is refused
unless --force. Nothing is freed unless every named node may be.

Each slot is freed by deleting its Lease at the version read, so a slot another node took
over in between is left alone; each freed node gets a Normal Event RolloutResumed. The
node itself stays as it is (cordoned, blocked or in error): its agent does not take a slot
for the same change again until its state changes; fix it and run
hnsplan-agent replace --retry there.

Exit codes: 0 freed (or nothing halted), 1 a node refused or the cluster failed, 3 usage
error.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				if strings.TrimSpace(a) == "" {
					return &exitError{code: exitUsage, err: errors.New("an empty NODE name; give node names, or none for every halted node")}
				}
			}
			cs, host, err := f.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return invalid(fleet.Resume(ctx, cs, fleet.ResumeOptions{Namespace: f.namespace, Nodes: args, Force: f.force,
				Host: host, Out: cmd.OutOrStdout(), ErrOut: cmd.ErrOrStderr()}))
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&f.force, "force", false, "free the slots of named nodes that are not halted (a replace under way loses its slot)")
	return cmd
}
