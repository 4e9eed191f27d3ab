package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/compiler/diff"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

func newDiffCmd(g *globalFlags) *cobra.Command {
	var inventory []string
	var base string
	var detailed bool
	cmd := &cobra.Command{
		Use:   "diff BASE HEAD | diff --base GIT-REF DIR",
		Short: "Show what a change does to the Windows nodes' HNS: replaces (drains), routes, reprogrammed endpoints",
		Long: `diff compares two compilations, node by node: which networks must be replaced (a drain,
with the reason), which routes are added or removed, what changes for new pods, and which
endpoints get their ACLs reprogrammed.

BASE and HEAD are intent directories (compiled here) or plan directories (written by
compile, with index.json). With --base GIT-REF, BASE is DIR as it was at GIT-REF, read
from git's objects without touching the work tree. --inventory adds the blast radius:
the pods a drain evicts and the endpoints whose ACL lists change.

-o text (Terraform's symbols), markdown (for a pull-request comment, capped at 65,000
characters) or json. --detailed-exitcode: 0 no changes, 2 changes, 1 error.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if base != "" {
				return cobra.ExactArgs(1)(cmd, args)
			}
			return cobra.ExactArgs(2)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput(cmd, "text", "json", "markdown"); err != nil {
				return err
			}
			baseDir, headDir, baseName := "", args[len(args)-1], ""
			if base != "" {
				dir, cleanup, err := checkout(base, headDir)
				if err != nil {
					return &exitError{code: exitInvalid, err: err}
				}
				defer cleanup()
				baseDir, baseName = dir, headDir+"@"+base
			} else {
				baseDir, baseName = args[0], args[0]
			}
			bp, err := sidePlans(cmd, g, baseDir, baseName, inventory)
			if err != nil {
				return err
			}
			hp, err := sidePlans(cmd, g, headDir, headDir, inventory)
			if err != nil {
				return err
			}
			res := diff.Plans(bp, hp)
			out := cmd.OutOrStdout()
			switch g.output {
			case "json":
				err = res.WriteJSON(out)
			case "markdown":
				_, err = io.WriteString(out, res.Markdown())
			default:
				err = res.WriteText(out, g.useColor(out))
			}
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			if detailed && res.HasChanges() {
				return &exitError{code: exitChanges}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&base, "base", "", "compare DIR with DIR as it was at this git ref (e.g. origin/main)")
	cmd.Flags().StringArrayVar(&inventory, "inventory", nil, "live-state file: adds drained pods and reprogrammed endpoints; repeatable")
	cmd.Flags().BoolVar(&detailed, "detailed-exitcode", false, "exit 0 without changes, 2 with changes, 1 on error")
	g.outputFlag(cmd, "text", "json", "markdown")
	return cmd
}

// sidePlans returns one side's plans: a plan directory's, decoded and
// verified, or an intent directory's, compiled.
func sidePlans(cmd *cobra.Command, g *globalFlags, dir, name string, inventory []string) ([]*plan.NodePlan, error) {
	if idx, err := os.ReadFile(filepath.Join(dir, plan.IndexFile)); err == nil {
		var index plan.Index
		if err := json.Unmarshal(idx, &index); err != nil || index.Kind != plan.IndexKind {
			return nil, &exitError{code: exitInvalid, err: fmt.Errorf("%s: %s is not a plan index", name, plan.IndexFile)}
		}
		var plans []*plan.NodePlan
		for _, e := range index.Plans {
			data, err := os.ReadFile(filepath.Join(dir, e.File))
			if err != nil {
				return nil, &exitError{code: exitInvalid, err: fmt.Errorf("%s: %v", name, err)}
			}
			p, err := plan.Decode(data, e.Node)
			if err != nil {
				return nil, &exitError{code: exitInvalid, err: fmt.Errorf("%s: %v", name, err)}
			}
			plans = append(plans, p)
		}
		return plans, nil
	}
	c, err := compileDir(dir, inventory, false)
	if err != nil {
		return nil, err
	}
	errOut := cmd.ErrOrStderr()
	if c.findings.HasErrors() || c.result == nil {
		_ = notable(c.findings).WriteText(errOut, g.useColor(errOut))
		return nil, &exitError{code: exitInvalid, err: fmt.Errorf("%s: invalid: %s", name, c.findings.Summary())}
	}
	return c.result.Plans, nil
}

// checkout writes dir as it was at ref into a temporary directory, from
// git's objects (git archive): the work tree and the index are untouched.
func checkout(ref, dir string) (string, func(), error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, err
	}
	top, err := git(abs, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", nil, fmt.Errorf("--base needs DIR inside a git repository: %v", err)
	}
	root := strings.TrimSpace(string(top))
	rel, err := filepath.Rel(root, abs)
	if err != nil {
		return "", nil, err
	}
	if _, err := git(root, "rev-parse", "--verify", "--quiet", ref+"^{commit}"); err != nil {
		return "", nil, fmt.Errorf("--base %s: no such commit", ref)
	}
	archive, err := git(root, "archive", "--format=tar", ref, "--", filepath.ToSlash(rel))
	if err != nil {
		return "", nil, fmt.Errorf("--base %s: %s did not exist there: %v", ref, rel, err)
	}
	tmp, err := os.MkdirTemp("", "hnsplan-base-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			cleanup()
			return "", nil, err
		}
		name := filepath.Join(tmp, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(name, tmp+string(filepath.Separator)) {
			continue // never write outside the temporary directory
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(name, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(name), 0o755); err == nil {
				var data []byte
				if data, err = io.ReadAll(tr); err == nil {
					err = os.WriteFile(name, data, 0o644)
				}
			}
		}
		if err != nil {
			cleanup()
			return "", nil, err
		}
	}
	return filepath.Join(tmp, rel), cleanup, nil
}

func git(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
