package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/check"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/internal/buildinfo"
	"github.com/hnsplan/hnsplan/internal/cli"
	"github.com/hnsplan/hnsplan/internal/crash"
	"github.com/hnsplan/hnsplan/policies"
	"github.com/hnsplan/hnsplan/schema"
)

// Exit codes (DESIGN §4.3).
const (
	exitOK      = 0
	exitInvalid = 1
	exitChanges = 2
	exitUsage   = 3
)

// exitError ends a command with a code; its message, if any, has been
// printed already or is printed by run.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

// run executes the CLI with args and returns the process exit code.
// Everything it prints goes through a diag.Escaper: no name or message
// from the input can put a control sequence on the user's terminal.
func run(args []string, stdout, stderr io.Writer) int {
	stdout, stderr = diag.NewEscaper(stdout), diag.NewEscaper(stderr)
	return execute(newRoot(stdout, stderr), args, stderr)
}

// execute runs root with args. A panic of the command (this goroutine;
// the compiler's worker goroutines return theirs as errors, see
// internal/crash) is an internal error, exit 1: never the runtime's
// exit 2, which diff --detailed-exitcode reads as "changes found".
func execute(root *cobra.Command, args []string, stderr io.Writer) (code int) {
	defer crash.Guard("hnsplan", stderr, &code)
	root.SetArgs(args)
	err := cli.Explain(root, root.Execute())
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(stderr, "hnsplan: %v\n", ee.err)
		}
		return ee.code
	}
	// Anything else comes from parsing the command line.
	fmt.Fprintf(stderr, "hnsplan: %v\nRun 'hnsplan --help' for usage.\n", err)
	return exitUsage
}

type globalFlags struct {
	output string
	color  string
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:   "hnsplan",
		Short: "Validate and compile the network intent of Kubernetes Windows nodes into HNS plans",
		Long: `hnsplan checks a cluster's network intent (CUE plus Kubernetes manifests)
against everything Windows HNS cannot do, and compiles one HNS plan per Windows node.

Exit codes: 0 success, 1 invalid input or failure, 2 changes found
(diff --detailed-exitcode), 3 usage error, 4 a rollout is halted (rollout status),
5 rollout status --wait timed out.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.Version = buildinfo.Get().Line("hnsplan") // --version
	root.SetVersionTemplate("{{.Version}}\n")
	g.color, inputLimits = "auto", defaultLimits()
	root.AddCommand(newVetCmd(g), newCompileCmd(g), newPlanCmd(g), newDiffCmd(g), newMatrixCmd(g), newExplainCmd(g), newRulesCmd(g), newSchemaCmd(), newPublishCmd(g), newRolloutCmd(g), newExportCmd(g), newVersionCmd())
	teach(root, g)
	return root
}

// outputFlag adds -o/--output with the formats a command offers.
func (g *globalFlags) outputFlag(cmd *cobra.Command, formats ...string) {
	cmd.Flags().StringVarP(&g.output, "output", "o", formats[0], "output format: "+strings.Join(formats, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", cli.Values(formats...))
}

// checkOutput rejects an output format the command does not offer.
func (g *globalFlags) checkOutput(cmd *cobra.Command, allowed ...string) error {
	if !slices.Contains(allowed, g.output) {
		return fmt.Errorf("unknown output format %q for %s; allowed: %s", g.output, cmd.Name(), strings.Join(allowed, ", "))
	}
	switch g.color {
	case "auto", "always", "never":
	default:
		return fmt.Errorf("unknown --color %q; allowed: auto, always, never", g.color)
	}
	return nil
}

// useColor reports whether text output to w gets ANSI colours.
func (g *globalFlags) useColor(w io.Writer) bool {
	switch g.color {
	case "always":
		return true
	case "never":
		return false
	}
	if os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	if e, ok := w.(*diag.Escaper); ok {
		w = e.Unwrap()
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func newVetCmd(g *globalFlags) *cobra.Command {
	var inventory []string
	var minSeverity string
	cmd := &cobra.Command{
		Use:   "vet DIR",
		Short: "Check an intent directory against the schema and every Windows constraint",
		Long: `vet loads the intent in DIR — one CUE package that sets ` + "`cluster`" + `, plus every
Kubernetes manifest (*.yaml, *.yml) below it — and reports every problem at once,
each with the file:line:col of its cause. It exits 1 if any finding is an error.

-o json lists the findings with file, line and column besides pos, each rule's remedy and
reference URL; -o sarif writes a SARIF 2.1.0 log for code scanning (upload it with
github/codeql-action/upload-sarif); -o github writes workflow commands
(::error file=F,line=L,col=C::message) that annotate the lines in a pull request.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput(cmd, "text", "json", "sarif", "github"); err != nil {
				return err
			}
			if minSeverity == "" {
				// Text has a summary line that counts what it does not
				// list; the machine formats have none, so they list
				// everything.
				minSeverity = map[string]string{"text": "warning", "json": "info", "sarif": "info", "github": "info"}[g.output]
			}
			min, err := diag.ParseSeverity(minSeverity)
			if err != nil {
				return fmt.Errorf("--severity: %v", err)
			}
			// The compile runs too, so that vet reports what compile
			// would (a block no pool has, an ACL list over budget).
			res, findings, err := compiler.Build(args[0], inputLimits.options(inventory))
			if err != nil {
				return loadError(err)
			}
			out := cmd.OutOrStdout()
			r := reporter{w: out, format: g.output, min: min, summary: true, color: g.useColor(out)}
			return r.report(args[0], res, findings)
		},
	}
	cmd.Flags().StringArrayVar(&inventory, "inventory", nil, "live-state file (kubectl get ... -o yaml); repeatable")
	cmd.Flags().StringVar(&minSeverity, "severity", "", "list findings of at least this severity: error, warning or info (default warning for text, whose summary line counts all; info for json)")
	g.outputFlag(cmd, "text", "json", "sarif", "github")
	return cmd
}

// projectURL is hnsplan's home, where the rules are documented.
const projectURL = "https://github.com/hnsplan/hnsplan"

// ruleDocs looks rules up in the catalog for machine output: summary,
// remedy, references, and the rule's section of docs/rules.md.
func ruleDocs() diag.Docs {
	cat, err := catalog()
	if err != nil {
		return nil
	}
	return func(rule string) (diag.RuleDoc, bool) {
		r, ok := cat[rule]
		if !ok {
			return diag.RuleDoc{}, false
		}
		return diag.RuleDoc{Summary: r.Summary, Remedy: r.Remedy, References: r.References,
			HelpURI: projectURL + "/blob/main/" + rulesDocPath + "#" + anchor(r.ID)}, true
	}
}

// catalog loads the rule catalog embedded from policies/.
func catalog() (check.Catalog, error) {
	rules, err := intent.Catalog()
	if err != nil {
		return nil, err
	}
	return check.NewCatalog(rules), nil
}

func newRulesCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "List the Windows constraint rules: id, default severity, family, summary",
		Long: `rules lists the catalog of rules hnsplan checks, with their stable ids. Change a
rule's severity in the intent with cluster.constraints: {"rule-id": "warning"} (or
"error", "info", "off"). Rules of phase "load" report unreadable input and cannot be
changed. -o json adds each rule's remedy and references; -o markdown prints the
catalog as ` + rulesDocPath + ` is kept.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.checkOutput(cmd, "text", "json", "markdown"); err != nil {
				return err
			}
			rules, err := intent.Catalog()
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			out := cmd.OutOrStdout()
			if g.output == "markdown" {
				return writeRulesMarkdown(out, rules)
			}
			if g.output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				enc.SetEscapeHTML(false)
				return enc.Encode(struct {
					Rules []policies.Rule `json:"rules"`
				}{rules})
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSEVERITY\tFAMILY\tPHASE\tSUMMARY")
			for _, r := range rules {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Severity, r.Family, r.Phase, r.Summary)
			}
			return tw.Flush()
		},
	}
	g.outputFlag(cmd, "text", "json", "markdown")
	return cmd
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func newSchemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the CUE schema of the intent (#Intent, #Cluster)",
		Long: `schema prints the CUE schema hnsplan applies to the ` + "`cluster`" + ` field, so that it can
be vendored into a CUE module for editors and ` + "`cue vet`" + `. hnsplan applies it by itself;
importing it is optional.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(schema.Source)
			return err
		},
	}
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and commit of hnsplan",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), buildinfo.Get().Line("hnsplan"))
			return err
		},
	}
}
