package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/vxlan"
)

// build builds dir with opt (compiler.Build) for a command that goes on
// with its plans: it prints what needs attention, the errors and warnings,
// to stderr (infos are vet's to list), and fails if any finding is an
// error, with the summary line vet prints — "NAME: invalid: 1 error, 2
// warnings" — so that every command that compiles fails in the same words
// and never with a result. name is how dir is called in that line.
func build(cmd *cobra.Command, g *globalFlags, dir, name string, opt compiler.Options) (*compiler.Result, error) {
	res, findings, err := compiler.Build(dir, opt)
	return g.built(cmd, name, compiler.Built{Result: res, Findings: findings, Err: err})
}

// built is build's end, for a build already made.
func (g *globalFlags) built(cmd *cobra.Command, name string, b compiler.Built) (*compiler.Result, error) {
	if b.Err != nil {
		return nil, loadError(b.Err)
	}
	if err := g.stderrReporter(cmd).report(name, b.Result, b.Findings); err != nil {
		return nil, err
	}
	return b.Result, nil
}

// loadError is the exit of a build that could not load its input: a path
// that cannot be read is a usage error, anything else (a CUE evaluation
// over its budget, the rule catalog) a failure.
func loadError(err error) error {
	var pe *intent.PathError
	if errors.As(err, &pe) {
		return &exitError{code: exitUsage, err: err}
	}
	return &exitError{code: exitInvalid, err: err}
}

func newCompileCmd(g *globalFlags) *cobra.Command {
	var inventory []string
	var outDir string
	var updateLock, allowRemovals bool
	var sk signKey
	cmd := &cobra.Command{
		Use:   "compile DIR -o OUTDIR",
		Short: "Compile the intent into one HNS plan per Windows node",
		Long: `compile vets the intent in DIR and, if it has no error, writes one plan per Windows
node (<node>.json), the parts the plans share (_<part>.json: the route table's head and
shards, the policy program's chunks; see docs/plan-format.md) and their index (_index.json)
into OUTDIR, all or nothing: each file is written to a temporary file first, and renamed
into place (atomically) only when all are written, the parts before the plans. Plans that
the previous index listed for nodes that are gone, and parts no plan names any more, are
removed, and each is named on stdout; compile removes no other file, whatever the index says.
A compile that would remove more than half of the existing plans (and at least two) is
refused, with nothing written, unless --allow-removals is given. Compiling twice gives
byte-identical files.

Blocks the compiler allocates are pinned by hnsplan.lock.json beside the intent;
--update-lock writes it (keeping every existing entry). Commit it.

--sign-key KEY signs each plan with an OpenSSH ed25519 private key: the signature is
written beside the plan as <plan>.sig (an SSH signature, namespace hnsplan-plan), and an
agent given --trusted-keys applies only plans signed by a key it trusts. Without
--sign-key, signatures left by an earlier signed compile are removed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCompile(cmd, g, args[0], inventory, outDir, updateLock, allowRemovals, &sk)
		},
	}
	cmd.Flags().StringVarP(&outDir, "output", "o", "", "directory to write the plans into")
	cmd.Flags().StringArrayVar(&inventory, "inventory", nil, "live-state file (kubectl get ... -o yaml); repeatable")
	cmd.Flags().BoolVar(&updateLock, "update-lock", false, "write "+intent.LockFile+" beside the intent with the allocated blocks")
	cmd.Flags().BoolVar(&allowRemovals, "allow-removals", false, "remove the plans of more than half the nodes, if the intent really drops them")
	sk.register(cmd)
	return cmd
}

// runCompile compiles dir into outDir, as compile's flags say.
func runCompile(cmd *cobra.Command, g *globalFlags, dir string, inventory []string, outDir string, updateLock, allowRemovals bool, sk *signKey) error {
	if outDir == "" {
		return errors.New("compile needs -o OUTDIR, the directory to write the plans into")
	}
	if err := sk.load(); err != nil {
		return err
	}
	opt := inputLimits.options(inventory)
	opt.UpdateLock = updateLock
	c, err := build(cmd, g, dir, dir, opt)
	if err != nil {
		return err
	}
	stale, err := compiler.StalePlans(outDir, c.Plans)
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	if err := checkRemovals(dir, outDir, stale, allowRemovals); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	removed, err := compiler.WritePlans(outDir, c.Intent.Cluster.Name, c.Plans, sk.signer())
	removedPlans := 0
	for _, name := range removed {
		if strings.HasPrefix(name, "_") { // plan.PartFileName: no node name starts with '_'
			fmt.Fprintf(out, "%s: removed %s: no plan names this shared part any more\n", dir, filepath.Join(outDir, name))
			continue
		}
		removedPlans++
		fmt.Fprintf(out, "%s: removed %s: its node is no longer a Windows node of the intent\n", dir, filepath.Join(outDir, name))
	}
	if err == nil && updateLock {
		err = compiler.WriteFileAtomic(filepath.Join(dir, intent.LockFile), c.IPAM.Lock.Encode())
	}
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	msg := fmt.Sprintf("%s: wrote %s and %s to %s", dir, plural(len(c.Plans), "plan"), plan.IndexFile, outDir)
	if fp := sk.fingerprint(); fp != "" {
		msg += "; signed with " + fp
	}
	if removedPlans > 0 {
		msg += "; removed " + plural(removedPlans, "plan")
	}
	if updateLock {
		msg += "; updated " + intent.LockFile
	}
	_, err = fmt.Fprintln(out, msg)
	return err
}

// checkRemovals refuses a compile that would remove more than half of the
// plans in outDir, and at least two: that is far more often an intent that
// lost a file (or its nodes) than a cluster that lost half its Windows
// nodes, and an agent whose plan is removed stops getting updates.
func checkRemovals(dir, outDir string, r compiler.Removals, allow bool) error {
	n := len(r.Stale)
	if allow || n < 2 || 2*n <= r.Existing {
		return nil
	}
	nodes := make([]string, n)
	for i, e := range r.Stale {
		nodes[i] = e.Node
	}
	return &exitError{code: exitInvalid, err: fmt.Errorf(
		"compile would remove %d of the %d plans in %s (%s): more than half, which is more often an intent that lost a file or its nodes than nodes really gone; nothing written or removed. Check the intent (hnsplan diff %s %s shows the change); if these nodes are gone, run again with --allow-removals",
		n, r.Existing, outDir, shortNames(nodes, 10), outDir, dir)}
}

// shortNames joins names, the first max of them and a count of the rest.
func shortNames(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
}

func newPlanCmd(g *globalFlags) *cobra.Command {
	var inventory []string
	var node string
	var drain time.Duration
	cmd := &cobra.Command{
		Use:   "plan DIR",
		Short: "Print the HNS plan of each Windows node (a dry run)",
		Long: `plan compiles the intent in DIR and prints what each Windows node's HNS will hold,
grouped like Get-HnsNetwork. With --inventory it also renders the nodes' pod endpoints
and fills in what only the live cluster knows (tunnel MACs, Linux nodes' blocks, DNS).
Findings go to stderr.

When the inventory's live FelixConfiguration default (or, with flannel-vxlan, the
Nodes' flannel backend annotations) has another VXLAN VNI or port than the intent, the
text output starts with that change, as diff shows it: the Linux side and the window
during which nodes on the old and the new values cannot reach each other (estimated
with --drain-time); the warning vxlan-vni-change says it on stderr whatever the output.`,
		Example: `  hnsplan plan examples/calico-vxlan --node win-1
  hnsplan plan examples/calico-vxlan --inventory live.yaml -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput(cmd, "text", "json", "yaml"); err != nil {
				return err
			}
			c, err := build(cmd, g, args[0], args[0], inputLimits.options(inventory))
			if err != nil {
				return err
			}
			plans := c.Plans
			if node != "" {
				plans = nil
				for _, p := range c.Plans {
					if p.Node == node {
						plans = append(plans, p)
					}
				}
				if len(plans) == 0 {
					return &exitError{code: exitUsage, err: fmt.Errorf("no plan for node %q: it is not a Windows node of %s", node, args[0])}
				}
			}
			files, err := compiler.EncodePlans(plans) // sets digests
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			if ch, src := vxlan.LiveChange(c.Intent, vxlan.Options{Drain: drain}); ch != nil && g.output == "text" {
				w, pos := cmd.OutOrStdout(), src.VNIPos
				if ch.VNI == nil {
					pos = src.PortPos
				}
				fmt.Fprintf(w, "The live cluster is not on the intent's VXLAN %s (%s, %s): applying these plans is this change:\n", ch.Values(), src.What, pos)
				for _, l := range ch.Lines() {
					fmt.Fprintln(w, l)
				}
				fmt.Fprintln(w)
			}
			if err := printPlans(cmd.OutOrStdout(), g.output, plans, files); err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&inventory, "inventory", nil, "live-state file (kubectl get ... -o yaml); repeatable")
	cmd.Flags().StringVar(&node, "node", "", "print only this node's plan")
	cmd.Flags().DurationVar(&drain, "drain-time", vxlan.DefaultDrain, "how long a Windows node's pods take to leave (their terminationGracePeriodSeconds): the window of a VXLAN VNI or port change the inventory shows is estimated from it")
	g.outputFlag(cmd, "text", "json", "yaml")
	return cmd
}

// printPlans prints plans as text (each assembled with its routes and
// program, as a reader sees it), or their files as json or yaml. One
// plan prints as its plan file alone, byte for byte; several print with
// the shared parts they name after them (files holds the parts first,
// as compiler.EncodePlans returns them): json as {"plans": [...],
// "parts": [...]}, yaml as one document per plan, then per part.
func printPlans(w io.Writer, format string, plans []*plan.NodePlan, files []compiler.File) error {
	var planFiles, partFiles []compiler.File
	for _, f := range files {
		if f.IsPlan() {
			planFiles = append(planFiles, f)
		} else {
			partFiles = append(partFiles, f)
		}
	}
	if len(planFiles) == 1 {
		partFiles = nil
	}
	switch format {
	case "json":
		if len(planFiles) == 1 {
			_, err := w.Write(planFiles[0].Data)
			return err
		}
		var b bytes.Buffer
		list := func(name string, files []compiler.File) {
			fmt.Fprintf(&b, "  %q: [", name)
			for i, f := range files {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString("\n    ")
				b.Write(bytes.ReplaceAll(bytes.TrimSpace(f.Data), []byte("\n"), []byte("\n    ")))
			}
			if len(files) > 0 {
				b.WriteString("\n  ")
			}
			b.WriteString("]")
		}
		b.WriteString("{\n")
		list("plans", planFiles)
		b.WriteString(",\n")
		list("parts", partFiles)
		b.WriteString("\n}\n")
		_, err := w.Write(b.Bytes())
		return err
	case "yaml":
		for i, f := range append(planFiles, partFiles...) {
			if i > 0 {
				if _, err := io.WriteString(w, "---\n"); err != nil {
					return err
				}
			}
			if err := jsonToYAML(w, f.Data); err != nil {
				return err
			}
		}
		return nil
	}
	for i, p := range plans {
		if i > 0 {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		if err := plan.WriteText(w, p); err != nil {
			return err
		}
	}
	return nil
}

// jsonToYAML re-emits a JSON document as block-style YAML, keeping the
// order of its fields.
func jsonToYAML(w io.Writer, data []byte) error {
	var n yaml.Node
	if err := yaml.Unmarshal(data, &n); err != nil {
		return err
	}
	var unflow func(*yaml.Node)
	unflow = func(n *yaml.Node) {
		n.Style &^= yaml.FlowStyle
		if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
			n.Style &^= yaml.DoubleQuotedStyle
		}
		for _, c := range n.Content {
			unflow(c)
		}
	}
	unflow(&n)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return err
	}
	return enc.Close()
}
