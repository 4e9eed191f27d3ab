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
	var outDir string
	cmd := &cobra.Command{
		Use:   "calico DIR [-o OUTDIR]",
		Short: "Write the Calico IPPools, IPAMConfiguration and FelixConfiguration that match the intent",
		Long: `export calico vets the intent in DIR and, if it has no error, writes the Calico resources
that match it as projectcalico.org/v3 YAML: the IPAMConfiguration and FelixConfiguration
"default", the BGPConfiguration "default" if the intent has a bgp section, and one IPPool
per pool, by name. Apply them with kubectl apply -f (with the Calico API server) or
calicoctl apply -f. Without -o they go to stdout; -o OUTDIR writes OUTDIR/` + calicoexport.FileName + `
(replacing it at once). The output is byte-identical from run to run, and added to the
intent directory it agrees with the CUE: vet stays clean and the plans do not change.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := build(cmd, g, args[0], args[0], inputLimits.options(nil))
			if err != nil {
				return err
			}
			data, err := calicoexport.Export(c.Intent.Cluster)
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			if outDir == "" {
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			if err := writeFileAtomic(filepath.Join(outDir, calicoexport.FileName), data); err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", filepath.Join(outDir, calicoexport.FileName))
			return nil
		},
	}
	cmd.Flags().StringVarP(&outDir, "output-dir", "o", "", "directory to write "+calicoexport.FileName+" into (created if missing); default: stdout")
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
