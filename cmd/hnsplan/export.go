package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/compiler/calicoexport"
)

func newExportCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write resources that match the intent, for other tools to apply",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return errors.New("export needs a kind: hnsplan export calico DIR [-o OUTDIR]")
		},
	}
	cmd.AddCommand(newExportCalicoCmd(g))
	return cmd
}

func newExportCalicoCmd(g *globalFlags) *cobra.Command {
	var outDir, as string
	cmd := &cobra.Command{
		Use:   "calico DIR [-o OUTDIR] [--as apply|patch]",
		Short: "Write the Calico resources that match the intent, to apply without dropping what they do not hold",
		Long: `export calico vets the intent in DIR and, if it has no error, writes the Calico resources
that match it: the IPAMConfiguration and FelixConfiguration "default", the
BGPConfiguration "default" if the intent has a bgp section, and one IPPool per pool, by
name. With the tigera-operator (operatorManaged, or an Installation in the intent) the
pools and service CIDRs go into the operator's Installation "default" instead, and no
IPPool is written: the operator manages the pools and would revert one.

Each resource holds hnsplan's settings only, so it must be applied so that it sets
them and leaves every other field as it is:

  --as apply (default)  YAML for server-side apply with the field manager hnsplan:
                        kubectl apply --server-side --field-manager=hnsplan -f calico.yaml
  --as patch            a shell script of kubectl merge patches (kubectl patch --type
                        merge), creating missing IPPools; calicoctl patch equivalents
                        are in comments

Never apply it with calicoctl apply or kubectl replace: a replace drops every field the
file does not hold (a FelixConfiguration's other settings, the Installation's). Without -o
the export goes to stdout; -o OUTDIR writes OUTDIR/` + calicoexport.FileName + ` (or ` + calicoexport.PatchFileName + `),
replacing it at once. The output is byte-identical from run to run, and the YAML, added
to the intent directory, agrees with the CUE: vet stays clean and the plans do not change.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			form, name := calicoexport.Apply, calicoexport.FileName
			switch as {
			case "apply":
			case "patch":
				form, name = calicoexport.Patch, calicoexport.PatchFileName
			default:
				return &exitError{code: exitUsage, err: fmt.Errorf("--as %q: give apply (YAML for server-side apply) or patch (a script of merge patches)", as)}
			}
			c, err := build(cmd, g, args[0], args[0], inputLimits.options(nil))
			if err != nil {
				return err
			}
			data, err := calicoexport.Export(c.Intent.Cluster, form)
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			if outDir == "" {
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			if err := writeFileAtomic(filepath.Join(outDir, name), data); err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", filepath.Join(outDir, name))
			return nil
		},
	}
	cmd.Flags().StringVarP(&outDir, "output-dir", "o", "", "directory to write "+calicoexport.FileName+" (or "+calicoexport.PatchFileName+") into (created if missing); default: stdout")
	cmd.Flags().StringVar(&as, "as", "apply", "how the export is to be applied: apply (YAML for kubectl apply --server-side --field-manager=hnsplan) or patch (a script of merge patches)")
	return cmd
}

// writeFileAtomic writes data to name through a temporary file in the same
// directory, renamed into place: a reader sees the old file or the new one.
func writeFileAtomic(name string, data []byte) error {
	dir := filepath.Dir(name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".export-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a successful rename, there is nothing to remove
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}
