package main

import (
	"crypto/ed25519"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/plan"
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

// sign signs each plan and route table head with the key, if there is
// one: a plan names its head by key, not digest, so the head's signature
// is what proves its shards (which it names by digest); chunks are named
// by digest from the signed plans. Otherwise the files keep the
// signatures compile --sign-key wrote beside them, each checked to sign
// its file: one left from other bytes would only be refused by every
// agent. dir names the plan directory in messages.
func (s *signKey) sign(dir string, files []compiler.File) error {
	for i, f := range files {
		if s.key != nil {
			if f.IsPlan() || f.Kind == plan.KindRouteTable {
				files[i].Signature = plan.Sign(f.Data, s.key)
			}
			continue
		}
		if f.Signature == nil {
			continue
		}
		if _, err := plan.SignerOf(f.Data, f.Signature); err != nil {
			return fmt.Errorf("%s: %s: %v: compile again with --sign-key, or publish with --sign-key", dir, plan.SignatureFile(f.Name), err)
		}
	}
	return nil
}

// signedBy is ", signed by SHA256:..." for a signed file, "" otherwise.
func signedBy(f compiler.File) string {
	if f.Signature == nil {
		return ""
	}
	fp, err := plan.SignerOf(f.Data, f.Signature)
	if err != nil {
		return ""
	}
	return ", signed by " + fp
}
