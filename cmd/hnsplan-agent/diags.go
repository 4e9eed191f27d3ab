package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/applier/diags"
	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/internal/buildinfo"
)

func newDiagsCmd() *cobra.Command {
	var out, planFile, hnsFlag, node, stateDir, addr string
	var mem memOptions
	cmd := &cobra.Command{
		Use:   "diags -o FILE [--plan FILE] [--node N] [--hns ...] [--addr HOST:PORT] [--state-dir DIR]",
		Short: "Write one tar.gz for a bug report: the HNS capture, versions, status, audit, plan digests, the agent's records",
		Long: `diags writes FILE, a gzipped tar for a bug report (docs/operations.md, Diagnostics):
the HNS capture (as hnsplan-agent capture writes it), the agent's and Go's versions, the OS
build and HNS's version, the running agent's /status (if it answers on --addr), the HNS
audit (of --plan, if given), the plan digests, the agent's own records from its state
directory (an allow-list: the replace journal, the rollout slot, the network it owns, the
echo baseline, the audit's record, pending requests) and where its log is. It takes no
kubeconfig, token, key or environment variable, and leaves out any member that looks like
it holds one. It changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return &exitError{code: exitUsage, err: errors.New("diags needs -o FILE, the archive to write")}
			}
			if node == "" {
				node = hostName()
			}
			s := diags.Sources{Node: node, Version: buildinfo.Get().Line("hnsplan-agent"), OSBuild: diags.OSBuild,
				PlanFile: planFile, Adapters: hostAdapters(hnsFlag), Now: time.Now()}
			p := &plan.NodePlan{}
			if planFile != "" {
				u := (&planwatch.File{Path: planFile, Node: node}).Read(cmd.Context())
				if s.PlanErr = u.Err; u.Err == nil {
					s.Plan, p = u.Plan, u.Plan
				}
			}
			client, closeFn, err := openHNS(hnsFlag, mem, p)
			if err != nil {
				return err
			}
			defer closeFn()
			s.HNS = client
			if st, err := getStatus(addr); err != nil {
				s.StatusErr = err
			} else if b, err := json.MarshalIndent(st, "", "  "); err == nil {
				s.Status = append(b, '\n')
			}
			if stateDir == "" {
				stateDir = auditStateDir(hnsFlag)
			}
			s.StateDir = stateDir
			members := diags.Bundle(cmd.Context(), s)
			base := fmt.Sprintf("hnsplan-diags-%s-%s", node, s.Now.UTC().Format("20060102T150405Z"))
			n, err := diags.WriteFile(out, base, s.Now, members)
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %d files in %s/ (%d bytes); attach it to the bug report\n", out, len(members), base, n)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the archive to write (.tar.gz)")
	cmd.Flags().StringVar(&planFile, "plan", "", "the node's plan file, for its digest and the audit")
	cmd.Flags().StringVar(&node, "node", "", "this node's name (default: the host name, lower case)")
	cmd.Flags().StringVar(&hnsFlag, "hns", defaultHNS, "HNS to read: mem, mem:STATE.json"+windowsHNSHelp)
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:9180", "the running agent's --listen address, for its /status")
	cmd.Flags().StringVar(&stateDir, "state-dir", "", "the agent's state directory (default: the host's, or FILE.d with --hns mem:FILE)")
	mem.register(cmd.Flags())
	return cmd
}
