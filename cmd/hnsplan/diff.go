package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/access"
	"github.com/hnsplan/hnsplan/compiler/check"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/diff"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/vxlan"
)

func newDiffCmd(g *globalFlags) *cobra.Command {
	var inventory []string
	var base string
	var detailed, withAccess bool
	var drain time.Duration
	var lf liveFlags
	cmd := &cobra.Command{
		Use:   "diff BASE HEAD | diff --base GIT-REF DIR | diff --live DIR",
		Short: "Show what a change does to the Windows nodes' HNS: replaces (drains), routes, reprogrammed endpoints",
		Long: `diff compares two compilations, node by node: which networks must be replaced (a drain,
with the reason), which routes are added or removed, what changes for new pods, and which
endpoints get their ACLs reprogrammed.

BASE and HEAD are intent directories (compiled here) or plan directories (written by
compile, with _index.json, or index.json before). With --base GIT-REF, BASE is DIR as it was at GIT-REF, read
from git's objects without touching the work tree. --inventory adds the blast radius:
the pods a drain evicts and the endpoints whose ACL lists change.

Policy changes are shown field by field (ingress[0].destination.ports: 80 -> 8080), rules
added and removed, with the policy's file:line. Nodes with the same changes are shown once,
with their names.

With --inventory and intent directories on both sides, diff also shows the access delta:
every (source pod, destination pod, protocol, port) whose verdict changes, newly denied
first, each with the deciding ACL or policy rule (file:line) before and after. Windows
pods are decided by their compiled ACL lists, Linux pods from the policy program, as
matrix does; only endpoints whose ACL lists or deciding policies changed are evaluated.
The ports probed are those the changed policies' rules name and each destination's
container ports. --access=false leaves it out.

A change of the cluster's VXLAN VNI or port is said once, before the nodes: what changes
on the Linux nodes and how to apply it (Calico: a merge patch of FelixConfiguration
default; flannel: net-conf.json and a restart of its DaemonSets), which pods are cut off
from which while some nodes have switched and others not, and for how long: the Windows
nodes' rollout waves, ceil(N/maxUnavailable), each estimated as a --drain-time drain
(default 30s), 10s to recreate the network and 10s for the next node to find a slot.
With intents on both sides it is also the warning vxlan-vni-change, at the head's setting.

An intent that does not exist on one side is an intent added or removed. With --base,
DIR absent at GIT-REF (git's tree there has no such path) shows every node created, and
DIR absent from the work tree but present at GIT-REF shows every node removed. In the
BASE HEAD form, a BASE that does not exist shows every node created; a HEAD that does
not exist is taken as removed only when git's HEAD commit has it (a deletion not yet
committed), so that a mistyped path is an error, never "remove everything". A path on
neither side, a bad ref and a DIR outside a git repository are errors. A note above the
diff says when a side was absent.

--live DIR compares what the cluster publishes with DIR's plans, as kubectl diff does: the
base is every plan ConfigMap in ` + publishNamespace + ` and the parts it names, read back and
verified as the agent on each node verifies them (its own code: signature, format, node,
digest, parts, meaning); the head is DIR, an intent or a plan directory. Its exit codes
are always diff's: 0 the same, 2 differences (nothing published: every node is created),
1 an error, or a published plan an agent would refuse (each named, with why). The cluster
is the kubeconfig's, as for publish (--kubeconfig, --context). --trusted-keys FILE or
--trusted-keys-configmap verify signatures as the agents given them do; without either,
signatures are not checked.

-o text (Terraform's symbols), markdown (for a pull-request comment, capped at 65,000
characters) or json. --detailed-exitcode: 0 no changes, 2 changes, 1 error.`,
		Example: `  hnsplan diff --base origin/main cluster -o markdown --detailed-exitcode
  hnsplan diff base head --inventory live.yaml --drain-time 2m
  hnsplan diff --live cluster --trusted-keys-configmap`,
		Args: diffArgs(&base, &lf.live),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDiff(cmd, g, args, diffFlags{base: base, inventory: inventory, detailed: detailed, withAccess: withAccess, drain: drain, live: lf})
		},
	}
	cmd.Flags().StringVar(&base, "base", "", "compare DIR with DIR as it was at this git ref (e.g. origin/main)")
	cmd.Flags().StringArrayVar(&inventory, "inventory", nil, "live-state file: adds drained pods and reprogrammed endpoints; repeatable")
	cmd.Flags().BoolVar(&detailed, "detailed-exitcode", false, "exit 0 without changes, 2 with changes, 1 on error")
	cmd.Flags().BoolVar(&withAccess, "access", true, "with --inventory: show who gains or loses access (the access delta)")
	cmd.Flags().DurationVar(&drain, "drain-time", vxlan.DefaultDrain, "how long a Windows node's pods take to leave (their terminationGracePeriodSeconds): the window of a VXLAN VNI or port change is estimated from it")
	lf.register(cmd)
	g.outputFlag(cmd, "text", "json", "markdown")
	return cmd
}

// diffArgs checks diff's arguments: DIR with --base or --live, BASE HEAD
// otherwise.
func diffArgs(base *string, live *bool) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if *base != "" || *live {
			return cobra.ExactArgs(1)(cmd, args)
		}
		return cobra.ExactArgs(2)(cmd, args)
	}
}

// diffFlags are diff's flags.
type diffFlags struct {
	base       string
	inventory  []string
	detailed   bool
	withAccess bool
	drain      time.Duration
	live       liveFlags
}

// runDiff compares the two sides the arguments and flags name: BASE and
// HEAD, DIR at --base and DIR, or what the cluster publishes and DIR.
func runDiff(cmd *cobra.Command, g *globalFlags, args []string, f diffFlags) error {
	if err := g.checkOutput(cmd, "text", "json", "markdown"); err != nil {
		return err
	}
	if err := f.live.check(cmd); err != nil {
		return err
	}
	if f.live.live {
		return runDiffLive(cmd, g, args[0], f)
	}
	var bs, hs side
	if f.base != "" {
		var cleanup func()
		var err error
		bs, hs, cleanup, err = gitSides(f.base, args[0])
		if err != nil {
			return err
		}
		defer cleanup()
	} else {
		var err error
		if bs, hs, err = dirSides(args[0], args[1]); err != nil {
			return err
		}
	}
	plans, built, err := sidesPlans(cmd, g, [2]side{bs, hs}, f.inventory)
	if err != nil {
		return err
	}
	bc, hc := built[0], built[1]
	opt := diff.Options{BaseDir: bs.display, HeadDir: hs.display, Drain: f.drain}
	if bc != nil && hc != nil {
		b, h := vxlan.FromIntent(bc.Intent.Cluster), vxlan.FromIntent(hc.Intent.Cluster)
		opt.Base, opt.Head = &b, &h
	}
	res := diff.PlansWith(plans[0], plans[1], opt)
	var vxlanErr error
	if hc != nil {
		vxlanErr = g.reportVXLANChange(cmd, hs.name, hc, res.VXLAN)
	}
	for _, s := range []side{bs, hs} {
		if s.note != "" {
			res.Notes = append(res.Notes, s.note)
		}
	}
	if len(f.inventory) > 0 && f.withAccess {
		switch {
		case bs.absent || hs.absent:
			res.Notes = append(res.Notes, "access changes are not shown: the intent exists on one side only")
		case bc == nil || hc == nil:
			res.Notes = append(res.Notes, "access changes are not shown: they need both sides as intent directories (a plan directory has no pod labels)")
		default:
			if res.Access, err = accessDelta(bc, hc, bs.display, hs.display); err != nil {
				return err
			}
		}
	}
	if err := writeDiff(cmd, g, res); err != nil {
		return err
	}
	if vxlanErr != nil {
		return vxlanErr
	}
	if f.detailed && res.HasChanges() {
		return &exitError{code: exitChanges}
	}
	return nil
}

// writeDiff prints res in the format -o names.
func writeDiff(cmd *cobra.Command, g *globalFlags, res *diff.Result) error {
	out := cmd.OutOrStdout()
	var err error
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
	return nil
}

// reportVXLANChange reports rule vxlan-vni-change for ch, the change of
// the cluster's VXLAN identity, on stderr with the build's findings;
// exit 1 if head's cluster.constraints make it an error.
func (g *globalFlags) reportVXLANChange(cmd *cobra.Command, name string, head *compiler.Result, ch *vxlan.Change) error {
	rules, err := intent.Catalog()
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	f := check.VXLANChange(head.Intent, ch, check.NewCatalog(rules))
	if len(f) == 0 {
		return nil
	}
	return g.stderrReporter(cmd).report(name, head, f)
}

// side is one side of a diff: a directory, or nothing (absent) when the
// intent does not exist there, as before it is added or after it is
// removed; note then says so to the reader.
type side struct {
	dir, name string
	// display is the intent directory as the reader knows it, which
	// source positions are shown relative to: DIR for both sides of
	// --base (the base is DIR at REF, read into a temporary directory).
	display string
	absent  bool
	note    string
}

// accessDelta compares the access models of two compiled intents.
func accessDelta(b, h *compiler.Result, bName, hName string) (*access.Delta, error) {
	bm, err := modelOf(b, bName)
	if err != nil {
		return nil, err
	}
	hm, err := modelOf(h, hName)
	if err != nil {
		return nil, err
	}
	d, err := access.Diff(bm, hm)
	if err != nil {
		return nil, &exitError{code: exitInvalid, err: fmt.Errorf("access delta: %v", err)}
	}
	return d, nil
}

// sidesPlans returns the plans of both sides: none for an absent side, a
// plan directory's decoded and verified, an intent directory's built (with
// the build). Intent directories on both sides are built at once
// (compiler.BuildEach: the inventory read once, the compiles side by
// side); their findings are reported, and a failure returned, in the order
// of the sides, base first, as if one were built after the other.
func sidesPlans(cmd *cobra.Command, g *globalFlags, sides [2]side, inventory []string) ([2][]*plan.NodePlan, [2]*compiler.Result, error) {
	var plans [2][]*plan.NodePlan
	var built [2]*compiler.Result
	var planDir [2]bool
	var planErr [2]error
	var dirs []string
	var of []int // the side of each of dirs
	for i, s := range sides {
		if s.absent {
			continue
		}
		if _, p, ok, err := compiler.ReadPlanDir(s.dir); ok {
			planDir[i], plans[i], planErr[i] = true, p, err
			continue
		}
		dirs, of = append(dirs, s.dir), append(of, i)
	}
	var builds [2]compiler.Built
	seen := map[string]bool{}
	for j, b := range compiler.BuildEach(dirs, inputLimits.options(inventory)) {
		builds[of[j]] = b
	}
	for i, s := range sides {
		switch {
		case s.absent:
		case planDir[i]:
			if planErr[i] != nil {
				return plans, built, &exitError{code: exitInvalid, err: fmt.Errorf("%s: %v", s.name, planErr[i])}
			}
		default:
			// A finding of a file both sides read (the inventory) is
			// reported once, with the first side's.
			b := builds[i]
			b.Findings = slices.DeleteFunc(slices.Clone(b.Findings), func(f diag.Finding) bool {
				return f.Severity < diag.Error && seen[f.String()]
			})
			for _, f := range b.Findings {
				seen[f.String()] = true
			}
			res, err := g.built(cmd, s.name, b)
			if err != nil {
				return plans, built, err
			}
			plans[i], built[i] = res.Plans, res
		}
	}
	return plans, built, nil
}

// dirSides resolves the plain form, diff BASE HEAD. A BASE that does not
// exist is the state before the intent was added: every node is created.
// A HEAD that does not exist is taken as the intent removed only on git's
// word, when HEAD's commit has the directory and the work tree does not (a
// deletion not yet committed): a mistyped HEAD must not show every node
// being removed.
func dirSides(baseDir, headDir string) (side, side, error) {
	bs, hs := side{dir: baseDir, name: baseDir, display: baseDir}, side{dir: headDir, name: headDir, display: headDir}
	bAbsent, err := absent(baseDir)
	if err != nil {
		return bs, hs, err
	}
	hAbsent, err := absent(headDir)
	if err != nil {
		return bs, hs, err
	}
	if bAbsent && hAbsent {
		return bs, hs, &exitError{code: exitUsage, err: fmt.Errorf("neither %s nor %s exists: check the paths", baseDir, headDir)}
	}
	if bAbsent {
		bs.absent, bs.note = true, fmt.Sprintf("%s does not exist: every node of %s is created", baseDir, headDir)
	}
	if hAbsent {
		g, err := gitPathOf(headDir)
		ok := false
		if err == nil {
			ok, err = g.existsAt("HEAD")
		}
		if err != nil || !ok {
			return bs, hs, &exitError{code: exitUsage, err: fmt.Errorf(
				"%s does not exist; a HEAD that does not exist means the intent is removed only when git's HEAD commit has it and the work tree does not (an uncommitted deletion), which is not so here; check the path, or diff a committed removal with --base GIT-REF %s",
				headDir, headDir)}
		}
		hs.absent, hs.note = true, fmt.Sprintf("%s is deleted in the work tree (git's HEAD commit has it): every node of %s is removed", headDir, baseDir)
	}
	return bs, hs, nil
}

// gitSides resolves diff --base REF DIR: the base side is DIR as it was at
// ref, read from git's objects without touching the work tree; the head
// side is DIR in the work tree. DIR absent at ref (git lists no such path
// in ref's tree) means every node is created; DIR absent from the work
// tree but present at ref means every node is removed. Any other git
// failure (no repository, no such ref) is an error, as is DIR on neither
// side.
func gitSides(ref, dir string) (side, side, func(), error) {
	bs, hs := side{name: dir + "@" + ref, display: dir}, side{dir: dir, name: dir, display: dir}
	none := func() {}
	gp, err := gitPathOf(dir)
	if err != nil {
		return bs, hs, none, &exitError{code: exitInvalid, err: fmt.Errorf("--base needs DIR inside a git repository: %v", err)}
	}
	if _, err := git(gp.root, "rev-parse", "--verify", "--quiet", ref+"^{commit}"); err != nil {
		return bs, hs, none, &exitError{code: exitInvalid, err: fmt.Errorf("--base %s: no such commit", ref)}
	}
	atRef, err := gp.existsAt(ref)
	if err != nil {
		return bs, hs, none, &exitError{code: exitInvalid, err: fmt.Errorf("--base %s: %v", ref, err)}
	}
	hAbsent, err := absent(dir)
	if err != nil {
		return bs, hs, none, err
	}
	switch {
	case !atRef && hAbsent:
		return bs, hs, none, &exitError{code: exitUsage, err: fmt.Errorf("%s exists neither in the work tree nor at %s: check the path", dir, ref)}
	case !atRef:
		bs.absent, bs.note = true, fmt.Sprintf("%s did not exist at %s: every node is created", dir, ref)
		return bs, hs, none, nil
	case hAbsent:
		hs.absent, hs.note = true, fmt.Sprintf("%s does not exist in the work tree (it did at %s): every node is removed", dir, ref)
	}
	tmp, cleanup, err := gp.archive(ref)
	if err != nil {
		return bs, hs, none, &exitError{code: exitInvalid, err: fmt.Errorf("--base %s: %v", ref, err)}
	}
	bs.dir = tmp
	return bs, hs, cleanup, nil
}

// absent reports whether path does not exist; any other failure to stat
// it is a usage error.
func absent(path string) (bool, error) {
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, fs.ErrNotExist):
		return true, nil
	}
	return false, &exitError{code: exitUsage, err: err}
}

// gitPath is a path in a git work tree, which need not exist.
type gitPath struct {
	root string // the work tree's top level
	rel  string // the path below root, slash-separated; "." for root
}

// gitPathOf finds the work tree of path from its nearest existing
// ancestor, so that a path deleted from the work tree still has one.
func gitPathOf(path string) (gitPath, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return gitPath{}, err
	}
	existing, rest := abs, ""
	for {
		if st, err := os.Stat(existing); err == nil && st.IsDir() {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			return gitPath{}, fmt.Errorf("no directory of %s exists", path)
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	// git prints the top level with symlinks resolved: resolve ours too.
	if real, err := filepath.EvalSymlinks(existing); err == nil {
		existing = real
	}
	top, err := git(existing, "rev-parse", "--show-toplevel")
	if err != nil {
		return gitPath{}, err
	}
	root := strings.TrimSpace(string(top))
	rel, err := filepath.Rel(root, filepath.Join(existing, rest))
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return gitPath{}, fmt.Errorf("%s is outside the work tree %s", path, root)
	}
	return gitPath{root: root, rel: filepath.ToSlash(rel)}, nil
}

// existsAt reports whether the commit ref has a directory at the path:
// git ls-tree lists the entry when it exists and nothing, successfully,
// when it does not. That positive answer is what tells "not there" from a
// git failure. A file at the path is an error.
func (gp gitPath) existsAt(ref string) (bool, error) {
	if gp.rel == "." {
		return true, nil
	}
	out, err := git(gp.root, "--literal-pathspecs", "ls-tree", ref+"^{commit}", "--", gp.rel)
	if err != nil {
		return false, err
	}
	line := strings.TrimSpace(string(out))
	if line == "" {
		return false, nil
	}
	if f := strings.Fields(line); len(f) < 2 || f[1] != "tree" {
		return false, fmt.Errorf("%s is not a directory at %s", gp.rel, ref)
	}
	return true, nil
}

// archive writes the path as it was at ref into a temporary directory, from
// git's objects (git archive): the work tree and the index are untouched.
// It returns the directory that holds the path's contents.
func (gp gitPath) archive(ref string) (string, func(), error) {
	archive, err := git(gp.root, "--literal-pathspecs", "archive", "--format=tar", ref, "--", gp.rel)
	if err != nil {
		return "", nil, err
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
	return filepath.Join(tmp, filepath.FromSlash(gp.rel)), cleanup, nil
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
