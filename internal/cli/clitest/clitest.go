// Package clitest holds the checks both binaries' tests run on their
// command trees: every command has an example, and the examples run.
package clitest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/internal/cli"
)

// CheckExamples fails t for each command of root, cobra's help and
// completion commands included, whose help has no example. root must have
// been through cli.Prepare, as the binary's is.
func CheckExamples(t *testing.T, root *cobra.Command) {
	t.Helper()
	n := 0
	cli.Walk(root, func(c *cobra.Command) {
		n++
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%q has no example in its help: add one to the examples table of cmd/%s/teach.go", c.CommandPath(), root.Name())
			return
		}
		var help bytes.Buffer
		c.SetOut(&help)
		if err := c.Help(); err != nil {
			t.Errorf("%q: help: %v", c.CommandPath(), err)
		}
		if !strings.Contains(help.String(), "Examples:\n") {
			t.Errorf("%q: its help prints no example:\n%s", c.CommandPath(), help.String())
		}
		for _, line := range Lines(c) {
			// An example names a command that exists.
			if args := strings.Fields(line); args[0] == root.Name() {
				if _, _, err := root.Find(args[1:]); err != nil {
					t.Errorf("%q: example %q: %v", c.CommandPath(), line, err)
				}
			}
		}
	})
	if n < 3 {
		t.Fatalf("walked %d commands of %s: the walk is not seeing the tree", n, root.Name())
	}
}

// Lines returns the command lines of c's example: its lines that are not
// comments or blank, trimmed.
func Lines(c *cobra.Command) []string {
	var out []string
	for _, l := range strings.Split(c.Example, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// A Line is one command line of an example, split as a shell without
// quotes would split it: Args after the binary's name, and Stdout the file
// after a lone ">".
type Line struct {
	Text   string
	Args   []string
	Stdout string
}

// Runnable returns the lines of every example below root that run
// without a shell (no pipes, substitutions, quotes or variables) and that
// contain none of the keys of needs: those need what a test has not (a
// cluster, a Windows node), and the value says what.
func Runnable(root *cobra.Command, needs map[string]string) []Line {
	var out []Line
	seen := map[string]bool{}
	cli.Walk(root, func(c *cobra.Command) {
	lines:
		for _, text := range Lines(c) {
			if seen[text] || strings.ContainsAny(text, "|<$'\"`;&\\") {
				continue
			}
			seen[text] = true
			for k := range needs {
				if strings.Contains(text, k) {
					continue lines
				}
			}
			f := strings.Fields(text)
			if f[0] != root.Name() {
				continue
			}
			l := Line{Text: text, Args: f[1:]}
			if i := indexOf(l.Args, ">"); i >= 0 && i == len(l.Args)-2 {
				l.Stdout, l.Args = l.Args[i+1], l.Args[:i]
			}
			out = append(out, l)
		}
	})
	return out
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// CopyExamples copies the repository's examples/ directory (at repo) into
// dir, without its Go files, so that examples that write beside it (an
// output directory) write into the test's own directory.
func CopyExamples(t *testing.T, repo, dir string) {
	t.Helper()
	src := filepath.Join(repo, "examples")
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		dst := filepath.Join(dir, "examples", rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if strings.HasSuffix(path, ".go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatalf("copying the examples: %v", err)
	}
}
