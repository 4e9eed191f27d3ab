package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/planwatch"
)

func newAuditCmd() *cobra.Command {
	var planFile, hnsFlag, node, stateDir, output, trustedKeys string
	var mem memOptions
	cmd := &cobra.Command{
		Use:   "audit --plan FILE [--node N] [--hns ...] [-o text|json]",
		Short: "Check this node's HNS once: duplicate IPs, orphan and failed endpoints, the network's adapter, foreign objects",
		Long: `audit reads HNS once and reports what the agent's passes report (docs/operations.md,
HNS audit): addresses two endpoints hold, pod endpoints whose address is no pod's of the
node (the plan's pods: audit has no cluster), endpoints HNS reports failed (only HNS's v1
documents say so; otherwise "not checked"), the plan's network bound to another adapter
than the plan's or to one the host no longer has, networks and endpoints no plan names
(reported, never touched), and kube-proxy's load balancers. It changes nothing; an orphan's
age comes from the running agent's record in --state-dir, if there is one.

Exit 0: no problem; 1: problems (or HNS could not be read); 3: usage.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return &exitError{code: exitUsage, err: fmt.Errorf("-o %q: want text or json", output)}
			}
			if planFile == "" {
				return &exitError{code: exitUsage, err: errors.New("audit needs --plan FILE (the node's plan: what it names is the agent's)")}
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
				trust = planwatch.NewTrust(ring)
			}
			u := (&planwatch.File{Path: planFile, Node: node, Trust: trust}).Read(cmd.Context())
			if err := planRefused(planFile, u); err != nil {
				return err
			}
			client, closeFn, err := openHNS(hnsFlag, mem, u.Plan)
			if err != nil {
				return err
			}
			defer closeFn()
			if stateDir == "" {
				stateDir = auditStateDir(hnsFlag)
			}
			r, err := applier.AuditOnce(cmd.Context(), client, node, u.Plan, stateDir, hostAdapters(hnsFlag))
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				err = enc.Encode(r)
			} else {
				err = r.WriteText(out)
			}
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			if r.Problems > 0 {
				return &exitError{code: exitFailed}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&planFile, "plan", "", "the node's plan file (<node>.json)")
	cmd.Flags().StringVar(&node, "node", "", "this node's name (default: the host name, lower case)")
	cmd.Flags().StringVar(&hnsFlag, "hns", defaultHNS, "HNS to read: mem, mem:STATE.json"+windowsHNSHelp)
	cmd.Flags().StringVar(&stateDir, "state-dir", "", "the running agent's state directory, for the orphans' ages (read only; default: the host's, or FILE.d with --hns mem:FILE)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	cmd.Flags().StringVar(&trustedKeys, "trusted-keys", "", trustedKeysHelp)
	mem.register(cmd.Flags())
	return cmd
}

// auditStateDir is the state directory whose record audit reads without
// --state-dir: the host's for the host's HNS, FILE.d for mem:FILE, none
// for mem.
func auditStateDir(hnsFlag string) string {
	switch {
	case hnsFlag == "mem":
		return ""
	case len(hnsFlag) > 4 && hnsFlag[:4] == "mem:":
		return hnsFlag[4:] + ".d"
	}
	return defaultStateDir()
}
