//go:build integration

package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/fleet"
	"github.com/hnsplan/hnsplan/internal/kubetest"
)

// TestPublishSigned: a signed compile published from its plan directory
// puts each signature under plan.json.sig, verifiable with the key;
// publishing the same again changes nothing; an unsigned publish takes
// the signature away (server-side apply drops the key the field manager
// no longer sends), so no stale signature is left beside a new plan.
//
//	go test -tags integration -run PublishSigned ./cmd/hnsplan/
func TestPublishSigned(t *testing.T) {
	kubetest.OwnSystemNamespace(t) // publish prunes the parts nothing names: no test may write there meanwhile
	kubeconfig := kubetest.Kubeconfig(t)
	cs := kubetest.Client(t, kubetest.Config(t))
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(publishNamespace)
	if err := cms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: labelManagedBy + "=hnsplan"}); err != nil && !strings.Contains(err.Error(), "not found") {
		t.Fatal(err)
	}

	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "ci")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	key := filepath.Join(dir, "ci")
	if err := os.WriteFile(key, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	ring := plan.Keyring{{Key: pub}}

	const example = "../../examples/calico-vxlan"
	plans := filepath.Join(dir, "plans")
	mustRun(t, 0, "compile", example, "-o", plans, "--sign-key", key)
	out := mustRun(t, 0, "publish", plans, "--kubeconfig", kubeconfig)
	if !strings.Contains(out, "signed by "+plan.Fingerprint(pub)) {
		t.Errorf("publish does not say who signed:\n%s", out)
	}
	idx := readIndex(t, plans)
	signatures := func() map[string]string {
		got := map[string]string{}
		for _, e := range idx.Plans {
			cm, err := cms.Get(ctx, fleet.ConfigMapName(e.Node), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if sig, ok := cm.Data[publishSigKey]; ok {
				got[e.Node] = sig
				if _, err := ring.Verify([]byte(cm.Data[publishKey]), []byte(sig)); err != nil {
					t.Errorf("node %s: the published signature does not verify: %v", e.Node, err)
				}
			}
		}
		return got
	}
	if got := signatures(); len(got) != len(idx.Plans) {
		t.Fatalf("%d of %d ConfigMaps carry %s", len(got), len(idx.Plans), publishSigKey)
	}
	// The route table's head is signed too; shards and chunks are not.
	heads := map[string]bool{}
	for _, e := range idx.Parts {
		cm, err := cms.Get(ctx, e.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sig, ok := cm.Data[partSigKey]
		if ok != (e.Kind == plan.KindRouteTable) {
			t.Errorf("part %s (%s): signed %v", e.Name, e.Kind, ok)
		}
		if ok {
			heads[e.Name] = true
			if _, err := ring.Verify([]byte(cm.Data[partKey]), []byte(sig)); err != nil {
				t.Errorf("part %s: the published signature does not verify: %v", e.Name, err)
			}
		}
	}
	if len(heads) == 0 {
		t.Error("no route table head was published")
	}
	out = mustRun(t, 0, "publish", plans, "--kubeconfig", kubeconfig)
	if strings.Count(out, ": unchanged (") != len(idx.Plans)+len(idx.Parts) {
		t.Errorf("publishing the same signed plans again changed something:\n%s", out)
	}

	// Unsigned: the same plans, no signature: each signed ConfigMap is
	// updated and loses its signature.
	mustRun(t, 0, "compile", example, "-o", plans)
	out = mustRun(t, 0, "publish", plans, "--kubeconfig", kubeconfig)
	if strings.Count(out, ": updated (") != len(idx.Plans)+len(heads) {
		t.Errorf("an unsigned publish over signed ConfigMaps did not update them:\n%s", out)
	}
	if got := signatures(); len(got) != 0 {
		t.Errorf("an unsigned publish left %s on %d ConfigMaps", publishSigKey, len(got))
	}
	for name := range heads {
		if cm, err := cms.Get(ctx, name, metav1.GetOptions{}); err != nil || cm.Data[partSigKey] != "" {
			t.Errorf("part %s: an unsigned publish left its signature (%v)", name, err)
		}
	}
}
