// Package cli is what both binaries' command trees share so that the CLI
// teaches itself: a walk over every command (cobra's generated help and
// completion commands included), examples for those generated commands,
// "did you mean" for a mistyped flag or subcommand, and completion helpers
// that need nothing but cobra. It links no CUE and no client-go: the agent
// uses it too.
package cli

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

// Walk calls fn for cmd and every command below it, parents first, in
// the order cobra lists them (by name). cobra's hidden completion
// requests (__complete) are machinery, not commands, and are left out.
func Walk(cmd *cobra.Command, fn func(*cobra.Command)) {
	if strings.HasPrefix(cmd.Name(), "__") {
		return
	}
	fn(cmd)
	for _, c := range cmd.Commands() {
		Walk(c, fn)
	}
}

// Prepare finishes root's tree for the user: it adds cobra's help and
// completion commands now (cobra would add them only when it executes, too
// late to give them examples or for a test to walk them), gives every
// command without an example the one of examples (keyed by the command's
// path, "hnsplan rollout status") or, for cobra's own commands, one made
// here, and turns cobra's unknown-flag errors into ones that name the
// flag meant. Call it once the tree is complete.
func Prepare(root *cobra.Command, examples map[string]string) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	// cobra's own suggestion is several lines; Explain gives one.
	root.DisableSuggestions = true
	generated := generatedExamples(root.Name())
	Walk(root, func(c *cobra.Command) {
		if c.Example != "" {
			return
		}
		if ex, ok := examples[c.CommandPath()]; ok {
			c.Example = strings.Trim(ex, "\n")
		} else if ex, ok := generated[strings.TrimPrefix(c.CommandPath(), root.Name()+" ")]; ok && isGenerated(root, c) {
			c.Example = ex
		}
	})
	root.SetFlagErrorFunc(flagError)
}

// isGenerated says whether c is one of the commands cobra adds by itself.
func isGenerated(root, c *cobra.Command) bool {
	for p := c; p != nil; p = p.Parent() {
		if p.Parent() == root {
			return p.Name() == "help" || p.Name() == "completion"
		}
	}
	return false
}

// generatedExamples are the examples of cobra's help and completion
// commands, by their path below the root.
func generatedExamples(bin string) map[string]string {
	return map[string]string{
		"help": fmt.Sprintf("  # the help of a command, as %[1]s COMMAND --help prints it\n  %[1]s help version", bin),
		"completion": fmt.Sprintf("  # load completions into this bash session\n  source <(%[1]s completion bash)\n\n"+
			"  # see how to install them for good, for each shell\n  %[1]s completion bash --help", bin),
		"completion bash": fmt.Sprintf("  # this session\n  source <(%[1]s completion bash)\n\n"+
			"  # every new session (Linux)\n  %[1]s completion bash > /etc/bash_completion.d/%[1]s", bin),
		"completion zsh": fmt.Sprintf("  # every new session (zsh needs compinit enabled)\n"+
			"  %[1]s completion zsh > \"${fpath[1]}/_%[1]s\"", bin),
		"completion fish": fmt.Sprintf("  # every new session\n  %[1]s completion fish > ~/.config/fish/completions/%[1]s.fish", bin),
		"completion powershell": fmt.Sprintf("  # this session (add the line to $PROFILE to keep it)\n"+
			"  %[1]s completion powershell | Out-String | Invoke-Expression", bin),
	}
}

// maxTypo is how far a mistyped name may be from the one meant: two edits
// (a transposition, "inventroy") for short names, a third for long ones.
func maxTypo(name string) int {
	if len(name) > 10 {
		return 3
	}
	return 2
}

var (
	unknownFlagRE      = regexp.MustCompile(`^unknown flag: --([^ =]+)`)
	unknownShorthandRE = regexp.MustCompile(`^unknown shorthand flag: '.' in -([^= ]+)`)
)

// flagError adds the flag meant to pflag's error for an unknown flag:
// "unknown flag: --inventroy (did you mean --inventory?)".
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if m := unknownFlagRE.FindStringSubmatch(msg); m != nil {
		if best := diag.Closest(m[1], flagNames(cmd, false), maxTypo(m[1])); best != "" {
			return fmt.Errorf("%s (did you mean --%s?)", msg, best)
		}
		return fmt.Errorf("%s (%s)", msg, seeHelp(cmd))
	}
	if m := unknownShorthandRE.FindStringSubmatch(msg); m != nil {
		// One letter is too short to guess from: a long flag of that
		// name is the likely intent ("-node" for "--node").
		if name := m[1]; len(name) > 1 && slices.Contains(flagNames(cmd, false), name) {
			return fmt.Errorf("%s (did you mean --%s?)", msg, name)
		}
		return fmt.Errorf("%s (%s)", msg, seeHelp(cmd))
	}
	return err
}

func seeHelp(cmd *cobra.Command) string {
	return fmt.Sprintf("see '%s --help' for its flags", cmd.CommandPath())
}

// flagNames lists cmd's flags (its own and those it inherits), hidden
// ones only if asked.
func flagNames(cmd *cobra.Command, hidden bool) []string {
	var names []string
	add := func(f *pflag.Flag) {
		if (hidden || !f.Hidden) && !slices.Contains(names, f.Name) {
			names = append(names, f.Name)
		}
	}
	cmd.Flags().VisitAll(add)
	cmd.InheritedFlags().VisitAll(add)
	return names
}

var unknownCommandRE = regexp.MustCompile(`^unknown command "([^"]*)" for "([^"]*)"`)

// Explain returns err, from executing root, with the command meant added
// when it is an unknown subcommand: `unknown command "vte" for "hnsplan"
// (did you mean vet?)`. Other errors are returned as they are.
func Explain(root *cobra.Command, err error) error {
	if err == nil {
		return nil
	}
	m := unknownCommandRE.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	parent := root
	if path := strings.Fields(m[2]); len(path) > 1 {
		if c, _, ferr := root.Find(path[1:]); ferr == nil {
			parent = c
		}
	}
	var names []string
	for _, c := range parent.Commands() {
		if c.IsAvailableCommand() || c.Name() == "help" {
			names = append(names, c.Name())
			names = append(names, c.Aliases...)
		}
	}
	// The first line only: cobra may have added its own suggestions.
	first, _, _ := strings.Cut(err.Error(), "\n")
	if best := diag.Closest(m[1], names, maxTypo(m[1])); best != "" {
		return fmt.Errorf("%s (did you mean %s?)", first, best)
	}
	slices.Sort(names)
	return fmt.Errorf("%s (its commands: %s)", first, strings.Join(names, ", "))
}
