package main

import (
	"crypto/ed25519"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/fleet"
	"github.com/hnsplan/hnsplan/internal/sshkey"
)

// signKeyHelp is --sign-key's help, the same for compile and publish.
const signKeyHelp = "sign each plan with this OpenSSH ed25519 private key (ssh-keygen -t ed25519 -N ''); the signature goes beside the plan (<plan>.sig) or into its ConfigMap"

// signKey is the --sign-key flag: the key, read before anything is
// compiled, so a bad key fails fast and nothing is written.
type signKey struct {
	path string
	key  ed25519.PrivateKey
}

func (s *signKey) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.path, "sign-key", "", signKeyHelp)
}

// load reads the key, if --sign-key was given. Its error is a usage error.
func (s *signKey) load() error {
	if s.path == "" {
		return nil
	}
	k, err := sshkey.ReadPrivateKey(s.path)
	if err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("--sign-key: %w", err)}
	}
	s.key = k
	return nil
}

// signer signs with the key, or is nil without one.
func (s *signKey) signer() compiler.Signer {
	if s.key == nil {
		return nil
	}
	return func(data []byte) []byte { return plan.Sign(data, s.key) }
}

// fingerprint is the key's, for messages; "" without one.
func (s *signKey) fingerprint() string {
	if s.key == nil {
		return ""
	}
	return plan.Fingerprint(s.key.Public().(ed25519.PublicKey))
}

// sign hands the files to fleet.Sign with the key, if there is one. dir
// names the plan directory in messages.
func (s *signKey) sign(dir string, files []compiler.File) error {
	return fleet.Sign(dir, files, s.key)
}
