package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/applier/statedir"
)

// getStatus reads a running agent's /status.
func getStatus(addr string) (agentStatus, error) {
	var st agentStatus
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/status")
	if err != nil {
		return st, fmt.Errorf("no agent answers on %s (is `hnsplan-agent run` running, with --listen %s?): %w", addr, addr, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("%s/status: %w", addr, err)
	}
	return st, nil
}

func newStatusCmd() *cobra.Command {
	var addr, output string
	cmd := &cobra.Command{
		Use:   "status [--addr HOST:PORT] [-o text|json]",
		Short: "Show the running agent's state: plan, applied digest, state, last error",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := getStatus(addr)
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			out := cmd.OutOrStdout()
			switch output {
			case "json":
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			case "text":
			default:
				return &exitError{code: exitUsage, err: fmt.Errorf("-o %q: want text or json", output)}
			}
			fmt.Fprintf(out, "node:     %s\nstate:    %s\nplan:     %s (%s)\napplied:  %s\n", st.Node, st.State, orNone(st.Plan), orNone(st.Planned), orNone(st.Applied))
			if st.AppliedRoutes != "" {
				fmt.Fprintf(out, "routes:   %s\n", st.AppliedRoutes)
			}
			if st.Error != "" {
				fmt.Fprintf(out, "error:    %s\n", st.Error)
			}
			if st.Reject != "" {
				fmt.Fprintf(out, "rejected: %s\n", st.Reject)
			}
			for _, p := range st.Pending {
				fmt.Fprintf(out, "pending:  %s\n", p)
			}
			for _, n := range st.Notes {
				fmt.Fprintf(out, "note:     %s\n", n)
			}
			for _, m := range st.Mismatches {
				fmt.Fprintf(out, "hns-readback-mismatch: %s\n", m)
			}
			if b := st.OSBuild; b != nil {
				fmt.Fprintf(out, "windows:  %s (from the %s)\n", b.Build, b.From)
				if r := b.Regression; r != nil {
					fmt.Fprintf(out, "windows:  known regression since %s: %s; fixed by %s\n", r.Introduced, r.Summary, r.Fixed)
				}
			}
			if s := st.Suspended; s != nil {
				fmt.Fprintf(out, "suspended: by key %s: %s\n", s.Key, orNone(s.Reason))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:9180", "the agent's --listen address")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func newReplaceCmd() *cobra.Command {
	var confirm, abort, retry bool
	var addr, stateDir string
	cmd := &cobra.Command{
		Use:   "replace (--confirm | --retry | --abort) [--addr HOST:PORT] [--state-dir DIR]",
		Short: "Confirm, retry or abort the running agent's network replace",
		Long: `replace --confirm lets the running agent recreate this node's network for the plan it
is applying now (state replace-pending): it will cordon, drain, recreate and uncordon.
The confirmation is for that plan only; a later plan asks again.

replace --retry lets a halted replace try again: one blocked or in error (it retries by
itself too; the rollout stays halted on its slot meanwhile), one whose rollout slot an
operator freed (state rollout-halted, after hnsplan rollout resume), or one aborted.

replace --abort gives up a replace that has deleted nothing yet: the agent uncordons the
node (if it cordoned it), removes the journal, releases its rollout slot and reports
replace-pending; --retry or a new plan starts again. Once the network is deleted it
refuses: the node has no network, and only finishing the replace gives it one back.

Each writes a request into the agent's state directory, which the agent takes at its
next pass (within seconds while it waits; a blocked drain ends its wait first).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runReplace(cmd.OutOrStdout(), confirm, retry, abort, addr, stateDir)
		},
	}
	cmd.Flags().BoolVar(&confirm, "confirm", false, "confirm the replace")
	cmd.Flags().BoolVar(&retry, "retry", false, "let a halted replace try again")
	cmd.Flags().BoolVar(&abort, "abort", false, "give up a replace that has deleted nothing yet")
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:9180", "the agent's --listen address")
	cmd.Flags().StringVar(&stateDir, "state-dir", defaultStateDir(), "the agent's --state-dir")
	return cmd
}

// runReplace asks the agent at addr, whose state directory is stateDir,
// to confirm, retry or abort its replace.
func runReplace(out io.Writer, confirm, retry, abort bool, addr, stateDir string) error {
	n := 0
	for _, b := range []bool{confirm, retry, abort} {
		if b {
			n++
		}
	}
	if n != 1 {
		return &exitError{code: exitUsage, err: errors.New("replace needs one of --confirm (start a replace: it drains the node and recreates its network), --retry or --abort")}
	}
	st, err := getStatus(addr)
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	switch {
	case confirm:
		if st.State != kube.StateReplacePending {
			return &exitError{code: exitFailed, err: fmt.Errorf("node %s is %s, not replace-pending: there is nothing to confirm", st.Node, st.State)}
		}
		if err := replace.Confirm(filepath.Join(stateDir, statedir.ConfirmFile), st.Plan); err != nil {
			return &exitError{code: exitFailed, err: err}
		}
		fmt.Fprintf(out, "confirmed the replace for plan %s on node %s; the agent starts it at its next pass\n", st.Plan, st.Node)
	case retry:
		switch st.State {
		case kube.StateBlocked, kube.StateError, kube.StateRolloutHalted, kube.StateReplacePending:
		default:
			return &exitError{code: exitFailed, err: fmt.Errorf("node %s is %s: there is no halted replace to retry (blocked, error, rollout-halted or an aborted replace-pending)", st.Node, st.State)}
		}
		if err := request(stateDir, statedir.RetryFile, st.Plan); err != nil {
			return err
		}
		fmt.Fprintf(out, "asked node %s to retry the replace for plan %s (it was %s); the agent takes a rollout slot again at its next pass\n", st.Node, st.Plan, st.State)
	case abort:
		j, err := replace.LoadJournal(filepath.Join(stateDir, statedir.JournalFile))
		if err != nil {
			return &exitError{code: exitFailed, err: err}
		}
		if j != nil && !replace.Abortable(j.Step) {
			return &exitError{code: exitFailed, err: fmt.Errorf("node %s: the replace of network %s (%s) is at step %s: %w. The node has no network until it is; "+
				"fix what stops it (hnsplan-agent status, the node's Events) and let it finish, or hnsplan-agent replace --retry", st.Node, j.Want.Name, j.Reason, j.Step, replace.ErrTooLate)}
		}
		if j == nil && st.State != kube.StateRolloutWaiting && st.State != kube.StateRolloutHalted && st.State != kube.StateError {
			return &exitError{code: exitFailed, err: fmt.Errorf("node %s is %s and no replace is journalled in %s: there is nothing to abort", st.Node, st.State, stateDir)}
		}
		if err := request(stateDir, statedir.AbortFile, st.Plan); err != nil {
			return err
		}
		fmt.Fprintf(out, "asked node %s to abort its replace for plan %s; at its next pass it uncordons, releases its rollout slot and reports replace-pending\n", st.Node, st.Plan)
	}
	return nil
}

// request writes an operator's request for the running agent (--retry,
// --abort) into its state directory, naming the plan it is about.
func request(stateDir, name, digest string) error {
	if err := statedir.WriteRequest(stateDir, name, digest); err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("write the request %s: %w (is --state-dir the agent's?)", name, err)}
	}
	return nil
}

func newInstallCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "install [run flags]",
		Short: "Install the agent as the Windows service hnsplan-agent, started at boot with these run flags",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			exe, err := os.Executable()
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			args := []string{"run"}
			cmd.Flags().Visit(func(fl *pflag.Flag) { args = append(args, "--"+fl.Name+"="+fl.Value.String()) })
			if err := installService(serviceName, exe, args); err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "installed service %s: %s %v\n", serviceName, exe, args)
			return nil
		},
	}
	f.register(cmd)
	return cmd
}

func newUninstallCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "uninstall",
		Short: "Remove the Windows service hnsplan-agent",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := uninstallService(serviceName); err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed service %s\n", serviceName)
			return nil
		},
	}
}
