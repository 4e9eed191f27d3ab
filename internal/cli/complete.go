package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

// Values completes a flag or argument from a fixed list (output formats,
// severities, protocols), matching case-insensitively what was typed.
func Values(values ...string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return Matching(values, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// Matching returns the values that start with prefix, ignoring case.
func Matching(values []string, prefix string) []string {
	var out []string
	for _, v := range values {
		if strings.HasPrefix(strings.ToLower(v), strings.ToLower(prefix)) {
			out = append(out, v)
		}
	}
	return out
}

// Dirs completes directory names only (an intent, an output directory).
func Dirs(_ *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return nil, cobra.ShellCompDirectiveFilterDirs
}

// DirArgs completes the first n positional arguments as directories, and
// nothing after them.
func DirArgs(n int) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) >= n {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveFilterDirs
	}
}

// Files completes file names with one of the extensions (without dot).
func Files(ext ...string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return ext, cobra.ShellCompDirectiveFilterFileExt
	}
}

// Register gives flag of cmd the completion fn, unless it has one already
// or cmd has no such flag (its own or inherited).
func Register(cmd *cobra.Command, flag string, fn cobra.CompletionFunc) {
	if cmd.Flags().Lookup(flag) == nil && cmd.InheritedFlags().Lookup(flag) == nil {
		return
	}
	if _, ok := cmd.GetFlagCompletionFunc(flag); ok {
		return
	}
	_ = cmd.RegisterFlagCompletionFunc(flag, fn)
}
