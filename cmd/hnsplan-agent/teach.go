package main

import (
	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/internal/cli"
)

// The examples of every command of hnsplan-agent and the completion of
// its flags, in one table: TestEveryCommandHasExample walks the tree,
// TestExamplesRun runs the examples that need no Windows node, running
// agent or cluster (see exampleNeeds in the test).
var examples = map[string]string{
	"hnsplan-agent": `
  # converge this node to the plan published for it, as the service does
  hnsplan-agent run --plan-source configmap --trusted-keys-configmap

  # the state of the agent running on this node
  hnsplan-agent status`,
	"hnsplan-agent apply": `
  # what the plan would change in HNS (here the in-memory HNS), changing nothing
  hnsplan-agent apply --once --plan plans/win-1.json --node win-1 --hns mem:state.json --dry-run

  # apply it, with the plan's signature checked first
  hnsplan-agent apply --once --plan C:\hnsplan\plans\win-1.json --trusted-keys C:\hnsplan\trusted-keys`,
	"hnsplan-agent run": `
  # the service: the plan from its ConfigMap, the keys that sign it from theirs
  hnsplan-agent run --plan-source configmap --trusted-keys-configmap

  # a plan file and the in-memory HNS, until HNS matches the plan (demos, scripts)
  hnsplan-agent run --plan plans/win-1.json --node win-1 --hns mem:state.json --until-converged`,
	"hnsplan-agent status": `
  # the running agent's plan, applied digest, state and last error
  hnsplan-agent status

  # as JSON, from another listen address
  hnsplan-agent status --addr 127.0.0.1:9180 -o json`,
	"hnsplan-agent replace": `
  # let the agent cordon, drain and recreate this node's network for its plan
  hnsplan-agent replace --confirm

  # give up a replace that is blocked (a PodDisruptionBudget holds)
  hnsplan-agent replace --abort`,
	"hnsplan-agent capture": `
  # everything HNS holds, as HNS's v2 JSON, for a bug report or hnsmem
  hnsplan-agent capture -o hns.json

  # the in-memory HNS a run left in state.json, to stdout
  hnsplan-agent capture --hns mem:state.json -o -`,
	"hnsplan-agent audit": `
  # the HNS audit of this node, once: duplicate IPs, orphan and foreign endpoints, the adapter
  hnsplan-agent audit --plan C:\ProgramData\hnsplan\plan.json --node win-1

  # the same over the in-memory HNS a run left in state.json
  hnsplan-agent audit --plan plans/win-1.json --node win-1 --hns mem:state.json -o json`,
	"hnsplan-agent diags": `
  # one archive for a bug report: HNS, status, audit, plan digests, versions; no secret
  hnsplan-agent diags -o C:\diags-win-1.tar.gz --plan C:\ProgramData\hnsplan\plan.json

  # the same over the in-memory HNS a run left in state.json
  hnsplan-agent diags -o diags.tar.gz --hns mem:state.json --plan plans/win-1.json`,
	"hnsplan-agent install": `
  # the Windows service, started at boot, with these run flags
  hnsplan-agent install --plan-source configmap --trusted-keys-configmap`,
	"hnsplan-agent uninstall": `
  hnsplan-agent uninstall`,
	"hnsplan-agent version": `
  hnsplan-agent version`,
}

// teach finishes root: examples, completion, "did you mean".
func teach(root *cobra.Command) {
	cli.Prepare(root, examples)
	cli.Walk(root, func(c *cobra.Command) {
		cli.Register(c, "plan-source", cli.Values("file", "configmap"))
		cli.Register(c, "hns", cli.Values(hnsValues...))
		cli.Register(c, "plan", cli.Files("json"))
		cli.Register(c, "state-dir", cli.Dirs)
		cli.Register(c, "node", cobra.NoFileCompletions)
		if c.CommandPath() == "hnsplan-agent status" {
			cli.Register(c, "output", cli.Values("text", "json"))
		}
	})
}
