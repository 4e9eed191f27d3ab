package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/internal/buildinfo"
)

// reporter prints a build's findings, the one way every command does:
// vet lists them on stdout in the format of -o, from --severity, and ends
// the text with the summary line; a command that compiles lists the
// errors and warnings on stderr as text, with the summary line only when
// it fails (stderrReporter).
type reporter struct {
	w      io.Writer
	format string // text, json, sarif or github
	min    diag.Severity
	// summary ends the text with the summary line even when the build
	// does not fail.
	summary bool
	color   bool
}

// stderrReporter is the reporter of a command that compiles.
func (g *globalFlags) stderrReporter(cmd *cobra.Command) reporter {
	w := cmd.ErrOrStderr()
	return reporter{w: w, format: "text", min: diag.Warning, color: g.useColor(w)}
}

// report prints the findings of at least severity r.min, and a summary of
// all, of the build of dir (called name); it returns exit 1 if a finding
// is an error or the compile did not run, and if the output cannot be
// written.
func (r reporter) report(name string, res *compiler.Result, findings diag.List) error {
	shown := atLeast(findings, r.min)
	failed := findings.HasErrors() || !res.Compiled()
	var err error
	switch r.format {
	case "json":
		err = shown.WriteJSON(r.w, ruleDocs())
	case "sarif":
		err = relativeToWorkDir(shown).WriteSARIF(r.w, diag.Tool{Name: "hnsplan", Version: buildinfo.Get().Version, InformationURI: projectURL}, ruleDocs())
	case "github":
		err = relativeToWorkDir(shown).WriteGitHub(r.w)
	default:
		err = shown.WriteText(r.w, r.color)
		if err == nil && (r.summary || failed) {
			_, err = fmt.Fprintln(r.w, summary(name, res.Intent, findings))
		}
	}
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	if failed {
		return &exitError{code: exitInvalid}
	}
	return nil
}

// atLeast returns the findings of severity min or above.
func atLeast(l diag.List, min diag.Severity) diag.List {
	var out diag.List
	for _, f := range l {
		if f.Severity >= min {
			out = append(out, f)
		}
	}
	return out
}

// relativeToWorkDir rewrites the findings' absolute paths below the
// working directory as relative ones: code scanning and workflow
// annotations name files relative to the repository, where CI runs.
func relativeToWorkDir(l diag.List) diag.List {
	wd, err := os.Getwd()
	if err != nil {
		return l
	}
	return l.RelativeTo(wd)
}

// summary is the line that ends vet's text and a failed build's findings:
// "DIR: valid: cluster …" or "DIR: invalid: 1 error, 2 warnings".
func summary(dir string, in *intent.Intent, findings diag.List) string {
	if findings.HasErrors() || in.Cluster == nil {
		return fmt.Sprintf("%s: invalid: %s", dir, findings.Summary())
	}
	c := in.Cluster
	win := 0
	for _, n := range c.Nodes {
		if n.IsWindows() {
			win++
		}
	}
	s := fmt.Sprintf("%s: valid: cluster %q (%s), %s (%d Windows, %d Linux), %s, %s",
		dir, c.Name, c.Networking, plural(len(c.Nodes), "node"), win, len(c.Nodes)-win,
		plural(len(c.Pools), "pool"), plural(in.Manifests.Len(), "manifest object"))
	if len(findings) > 0 {
		s += "; " + findings.Summary()
	}
	return s
}
