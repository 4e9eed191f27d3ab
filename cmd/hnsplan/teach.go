package main

import (
	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/internal/cli"
	"github.com/hnsplan/hnsplan/internal/completion"
)

// What makes hnsplan's command tree teach itself: the examples of every
// command, the flags of the commands that read an intent, and shell
// completion. Kept in one table, so that a test that walks the tree
// (TestEveryCommandHasExample) and one that runs the examples
// (TestExamplesRun) read what the help prints.

// intentCommands are the commands that read an intent directory, by path,
// with how many of their leading arguments are directories. Only they
// take the flags that bound reading one (--max-file-size, --cue-timeout,
// --cue-memory) and --color, which colours the findings.
var intentCommands = map[string]int{
	"hnsplan vet":           1,
	"hnsplan compile":       1,
	"hnsplan plan":          1,
	"hnsplan diff":          2,
	"hnsplan matrix":        1,
	"hnsplan explain":       1,
	"hnsplan export calico": 1,
	"hnsplan publish":       1,
}

// examples are the Example of each command, by path. The commands in
// examplesNeed need what a test has not (a cluster); the others are run,
// from a copy of the repository's examples/, by TestExamplesRun.
var examples = map[string]string{
	"hnsplan": `
  # check an intent, then compile one plan per Windows node
  hnsplan vet examples/calico-vxlan
  hnsplan compile examples/calico-vxlan -o plans`,
	"hnsplan vet": `
  # every problem at once, each at its file:line
  hnsplan vet examples/calico-vxlan

  # with the live state, as CI does; findings as SARIF for code scanning
  hnsplan vet examples/calico-vxlan --inventory examples/inventory/calico-vxlan.yaml -o sarif

  # errors only
  hnsplan vet examples/calico-vxlan --severity error`,
	"hnsplan compile": `
  # write <node>.json for each Windows node, and _index.json
  hnsplan compile examples/calico-vxlan -o plans

  # with the pods that are running, so that their addresses keep their blocks
  hnsplan compile examples/calico-vxlan --inventory examples/inventory/calico-vxlan.yaml -o plans`,
	"hnsplan plan": `
  # what the agent of win-1 would create, as a dry run
  hnsplan plan examples/calico-vxlan --node win-1

  # every node's plan as JSON, with the pods that are running
  hnsplan plan examples/calico-vxlan --inventory examples/inventory/calico-vxlan.yaml -o json`,
	"hnsplan diff": `
  # what a change does to the nodes: two intent (or plan) directories
  hnsplan diff examples/calico-vxlan examples/calico-bgp

  # in CI: the pull request's intent against the main branch; exit 2 when it changes anything
  hnsplan diff --base origin/main cluster --inventory inventory.yaml --detailed-exitcode -o markdown

  # what the cluster runs against what the intent compiles to, as kubectl diff does
  hnsplan diff --live cluster --trusted-keys-configmap`,
	"hnsplan matrix": `
  # who can reach whom on TCP/80, pod by pod
  hnsplan matrix examples/calico-vxlan --inventory examples/inventory/calico-vxlan.yaml --port 80`,
	"hnsplan explain": `
  # why frontend/shop-1 may or may not reach web/iis-1 on TCP/80, rule by rule
  hnsplan explain examples/calico-vxlan --inventory examples/inventory/calico-vxlan.yaml --from frontend/shop-1 --to web/iis-1 --port 80

  # the same connection before and after a change (git ref)
  hnsplan explain cluster --base origin/main --inventory inventory.yaml --from frontend/shop-1 --to web/iis-1 --port 80`,
	"hnsplan rules": `
  # the catalog of rules, with their ids and default severities
  hnsplan rules

  # with each rule's remedy and references
  hnsplan rules -o json`,
	"hnsplan schema": `
  # vendor the schema into a CUE module, for editors and cue vet
  hnsplan schema > cue.mod/pkg/hnsplan.io/schema/schema.cue`,
	"hnsplan publish": `
  # what would be written, without a cluster
  hnsplan publish examples/calico-vxlan --dry-run

  # compile, sign and publish to one node first (a canary), then to all
  hnsplan publish cluster --sign-key ~/.ssh/hnsplan_ed25519 --canary 1
  hnsplan publish cluster --sign-key ~/.ssh/hnsplan_ed25519`,
	"hnsplan rollout": `
  # follow a rollout until every node has converged (exit 0) or it halts (exit 4)
  hnsplan rollout status --wait --timeout 30m`,
	"hnsplan rollout status": `
  # each Windows node's published and applied plan, state and slot
  hnsplan rollout status

  # follow it in CI: exit 0 converged, 4 halted, 5 timed out
  hnsplan rollout status --wait --timeout 30m -o json`,
	"hnsplan rollout resume": `
  # free the slots of every halted node, so that the rollout goes on without them
  hnsplan rollout resume

  # free win-2's slot even though it is not halted
  hnsplan rollout resume win-2 --force`,
	"hnsplan rollout suspend": `
  # stop agents writing HNS or replacing networks until unsuspended
  hnsplan rollout suspend win-1 win-2 --reason "KB5040437 under investigation"
  hnsplan rollout suspend --all --reason "change freeze"`,
	"hnsplan rollout unsuspend": `
  # let them go on
  hnsplan rollout unsuspend win-1
  hnsplan rollout unsuspend --all`,
	"hnsplan rollout reconcile": `
  # a pass now, instead of at the next resync
  hnsplan rollout reconcile win-1
  hnsplan rollout reconcile --all --reason "after the HNS reset"`,
	"hnsplan export": `
  # the Calico resources the intent implies, for kubectl apply --server-side
  hnsplan export calico examples/calico-vxlan`,
	"hnsplan export calico": `
  # write calico.yaml, then apply it as hnsplan's field manager
  hnsplan export calico examples/calico-vxlan -o out
  kubectl apply --server-side --field-manager=hnsplan -f out/calico.yaml

  # or as a script of merge patches
  hnsplan export calico examples/calico-vxlan --as patch | sh`,
	"hnsplan version": `
  hnsplan version`,
}

// examplesNeed says what the examples of a command need that a test has
// not; TestExamplesRun runs only the lines of commands not listed (and
// the --dry-run ones of those listed).
var examplesNeed = map[string]string{
	"hnsplan rollout":               "a cluster",
	"hnsplan rollout status":        "a cluster",
	"hnsplan rollout resume":        "a cluster",
	"hnsplan publish":               "a cluster",
	"hnsplan completion":            "a shell",
	"hnsplan completion bash":       "a shell",
	"hnsplan completion zsh":        "a shell",
	"hnsplan completion fish":       "a shell",
	"hnsplan completion powershell": "a shell",
}

// teach finishes root: intent flags, examples, completion, "did you mean".
func teach(root *cobra.Command, g *globalFlags) {
	cli.Walk(root, func(c *cobra.Command) {
		if dirs, ok := intentCommands[c.CommandPath()]; ok {
			addIntentFlags(c, g)
			c.ValidArgsFunction = cli.DirArgs(dirs)
		}
	})
	cli.Prepare(root, examples)
	cli.Walk(root, func(c *cobra.Command) { complete(c) })
}

// addIntentFlags adds the flags of reading an intent to cmd.
func addIntentFlags(cmd *cobra.Command, g *globalFlags) {
	cmd.Flags().StringVar(&g.color, "color", "auto", "colour the text output: auto, always or never")
	addLimitFlags(cmd)
}

// complete registers the completion of cmd's flags by their name: a flag
// name means the same on every command.
func complete(cmd *cobra.Command) {
	cli.Register(cmd, "node", windowsNodes)
	cli.Register(cmd, "nodes", windowsNodes)
	cli.Register(cmd, "from", pods)
	cli.Register(cmd, "to", pods)
	cli.Register(cmd, "namespace", cli.Values(publishNamespace))
	cli.Register(cmd, "severity", cli.Values(diag.Error.String(), diag.Warning.String(), diag.Info.String()))
	cli.Register(cmd, "protocol", cli.Values("TCP", "UDP", "SCTP", "ICMP"))
	cli.Register(cmd, "color", cli.Values("auto", "always", "never"))
	cli.Register(cmd, "as", cli.Values("apply", "patch"))
	cli.Register(cmd, "inventory", cli.Files("yaml", "yml", "json"))
	cli.Register(cmd, "output-dir", cli.Dirs)
	cli.Register(cmd, "output", cli.Dirs) // compile's; the formats' are registered by outputFlag
	cli.Register(cmd, "base", cobra.NoFileCompletions)
}

// windowsNodes completes --node and --nodes with the Windows nodes of the
// intent the command's first argument names.
func windowsNodes(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return completion.WindowsNodes(args[0], inputLimits.load(nil), toComplete), cobra.ShellCompDirectiveNoFileComp
}

// pods completes --from and --to with NAMESPACE/NAME of the pods in the
// command's --inventory files.
func pods(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	inventory, _ := cmd.Flags().GetStringArray("inventory")
	got := completion.Pods(inputLimits.load(inventory), toComplete)
	dir := cobra.ShellCompDirectiveNoFileComp
	for _, p := range got {
		if p[len(p)-1] == '/' {
			dir |= cobra.ShellCompDirectiveNoSpace // a namespace: its pods follow
			break
		}
	}
	return got, dir
}
