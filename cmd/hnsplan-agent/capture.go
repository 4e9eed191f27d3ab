package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/applier/hns/hnswin"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

func newCaptureCmd() *cobra.Command {
	var out, hnsFlag string
	var mem memOptions
	cmd := &cobra.Command{
		Use:   "capture -o FILE [--hns ...]",
		Short: "Write every HNS network, endpoint, policy and load balancer to FILE as HNS's v2 JSON",
		Long: `capture reads HNS and writes it to FILE (- for stdout) as one JSON document: the
networks, endpoints (with their policies and ACLs), load balancers and namespaces, in HNS's
own v2 JSON. From the host's HNS (Windows) the documents are HNS's, unchanged; from the
in-memory HNS (--hns mem:FILE, any OS) they are what HNS would write for its state (with
--mem-quirks, as it reads back). Attach it to a bug report, or add it as a test fixture
(applier/hns/hnswin/testdata/real): the agent's decoder reads it as it reads HNS.
It changes nothing and needs no state directory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return &exitError{code: exitUsage, err: errors.New("capture needs -o FILE (- for stdout)")}
			}
			client, closeFn, err := openHNS(hnsFlag, mem, &plan.NodePlan{})
			if err != nil {
				return err
			}
			defer closeFn()
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			c, err := hnswin.CaptureOf(ctx, client)
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			b, err := json.MarshalIndent(c, "", "  ")
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			b = append(b, '\n')
			if out == "-" {
				_, err = cmd.OutOrStdout().Write(b)
			} else {
				err = os.WriteFile(out, b, 0o600)
			}
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			if out != "-" {
				fmt.Fprintf(cmd.OutOrStdout(), "captured %d networks, %d endpoints, %d load balancers to %s\n", len(c.Networks), len(c.Endpoints), len(c.LoadBalancers), out)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the file to write (- for stdout)")
	cmd.Flags().StringVar(&hnsFlag, "hns", defaultHNS, "HNS to read: mem, mem:STATE.json"+windowsHNSHelp)
	mem.register(cmd.Flags())
	return cmd
}
