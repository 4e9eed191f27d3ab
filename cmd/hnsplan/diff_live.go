package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/compiler/diff"
	"github.com/hnsplan/hnsplan/fleet"
	"github.com/hnsplan/hnsplan/internal/sshkey"
)

// liveFlags are diff --live's flags: the cluster, and the trust the
// agents verify plans with.
type liveFlags struct {
	live          bool
	kubeconfig    string
	context       string
	trustedKeys   string
	trustedKeysCM bool
}

func (f *liveFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.live, "live", false, "compare DIR with the plans published in the cluster ("+publishNamespace+"), read back and verified as the agents do; exit 0 same, 2 differences, 1 error")
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "with --live: kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	cmd.Flags().StringVar(&f.context, "context", "", "with --live: kubeconfig context to use (default: the current one)")
	cmd.Flags().StringVar(&f.trustedKeys, "trusted-keys", "", "with --live: verify the published plans' signatures with these OpenSSH ed25519 public keys, as agents given --trusted-keys FILE do")
	cmd.Flags().BoolVar(&f.trustedKeysCM, "trusted-keys-configmap", false, "with --live: verify the published plans' signatures with the keys of "+planwatch.ConfigMapNamespace+"/"+planwatch.TrustedKeysName+", as agents given --trusted-keys-configmap do")
	cmd.MarkFlagsMutuallyExclusive("live", "base")
	cmd.MarkFlagsMutuallyExclusive("trusted-keys", "trusted-keys-configmap")
}

// check refuses the --live flags without --live, and a kubeconfig that
// is not there.
func (f *liveFlags) check(cmd *cobra.Command) error {
	if !f.live {
		for _, name := range []string{"kubeconfig", "context", "trusted-keys", "trusted-keys-configmap"} {
			if cmd.Flags().Changed(name) {
				return &exitError{code: exitUsage, err: fmt.Errorf("--%s applies to diff --live", name)}
			}
		}
		return nil
	}
	if f.kubeconfig != "" {
		if _, err := os.Stat(f.kubeconfig); err != nil {
			return &exitError{code: exitUsage, err: fmt.Errorf("--kubeconfig: %v", err)}
		}
	}
	return nil
}

// readOptions is how fleet.ReadLive verifies what is published.
func (f *liveFlags) readOptions(host string) (fleet.ReadOptions, error) {
	opts := fleet.ReadOptions{ClusterTrust: f.trustedKeysCM, Host: host}
	if f.trustedKeys != "" {
		ring, err := sshkey.ReadAuthorizedKeys(f.trustedKeys)
		if err != nil {
			return opts, &exitError{code: exitUsage, err: fmt.Errorf("--trusted-keys: %v", err)}
		}
		opts.Trust = planwatch.NewTrust(ring)
	}
	return opts, nil
}

// runDiffLive compares what the cluster publishes to the agents (the
// base) with dir's plans (the head), as kubectl diff does: exit 0 the
// same, 2 different, 1 an error, or a published plan an agent would
// refuse.
func runDiffLive(cmd *cobra.Command, g *globalFlags, dir string, f diffFlags) error {
	hs := side{dir: dir, name: dir, display: dir}
	plans, built, err := sidesPlans(cmd, g, [2]side{{absent: true}, hs}, f.inventory)
	if err != nil {
		return err
	}
	cs, host, err := kubeClient(f.live.kubeconfig, f.live.context)
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	opts, err := f.live.readOptions(host)
	if err != nil {
		return err
	}
	live, err := fleet.ReadLive(cmd.Context(), cs, opts)
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	if err := live.Err(); err != nil {
		return &exitError{code: exitInvalid, err: fmt.Errorf("%s on %s holds plans an agent would refuse, so what the nodes run cannot be compared: %w", publishNamespace, host, err)}
	}
	res := diff.PlansWith(live.Plans, plans[1], diff.Options{BaseDir: dir, HeadDir: dir, Drain: f.drain})
	where := fmt.Sprintf("the cluster (%s on %s)", publishNamespace, host)
	res.Notes = append(res.Notes, fmt.Sprintf("base: the %s published in %s, read back as the agents read them; head: %s",
		plural(len(live.Plans), "plan"), where, dir))
	if len(live.Plans) == 0 {
		res.Notes = append(res.Notes, "nothing is published in "+where+": every node is created")
	}
	if len(f.inventory) > 0 && f.withAccess {
		res.Notes = append(res.Notes, "access changes are not shown: the cluster's side has no intent (pod labels)")
	}
	var vxlanErr error
	if built[1] != nil {
		vxlanErr = g.reportVXLANChange(cmd, dir, built[1], res.VXLAN)
	}
	if err := writeDiff(cmd, g, res); err != nil {
		return err
	}
	if vxlanErr != nil {
		return vxlanErr
	}
	if res.HasChanges() {
		return &exitError{code: exitChanges}
	}
	return nil
}
