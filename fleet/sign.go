package fleet

import (
	"crypto/ed25519"
	"fmt"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// Sign signs each plan and route table head of files with key, if there
// is one: a plan names its head by key, not digest, so the head's
// signature is what proves its shards (which it names by digest); chunks
// are named by digest from the signed plans. Without a key the files keep
// the signatures compile --sign-key wrote beside them, each checked to
// sign its file: one left from other bytes would only be refused by every
// agent. dir names the plan directory in messages.
func Sign(dir string, files []compiler.File, key ed25519.PrivateKey) error {
	for i, f := range files {
		if key != nil {
			if f.IsPlan() || f.Kind == plan.KindRouteTable {
				files[i].Signature = plan.Sign(f.Data, key)
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

// SignedBy is ", signed by SHA256:..." for a signed file, "" otherwise.
func SignedBy(f compiler.File) string {
	if f.Signature == nil {
		return ""
	}
	fp, err := plan.SignerOf(f.Data, f.Signature)
	if err != nil {
		return ""
	}
	return ", signed by " + fp
}
