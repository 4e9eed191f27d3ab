//go:build integration

package planwatch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/internal/kubetest"
)

// TestSignedConfigMapAPIServer: against a real API server (its field
// selector, its watch), a signed plan ConfigMap is refused until the
// trusted-keys ConfigMap lists its signer, taken once it does, and
// refused again once the key is gone.
func TestSignedConfigMapAPIServer(t *testing.T) {
	kubetest.OwnSystemNamespace(t) // it replaces the one trusted-keys ConfigMap
	client := kubeClient(t)
	cms := client.CoreV1().ConfigMaps(planwatch.ConfigMapNamespace)
	node := uniqueNode()
	t.Cleanup(func() {
		cms.Delete(context.Background(), planwatch.ConfigMapName(node), metav1.DeleteOptions{})
		cms.Delete(context.Background(), planwatch.TrustedKeysName, metav1.DeleteOptions{})
	})
	cms.Delete(t.Context(), planwatch.TrustedKeysName, metav1.DeleteOptions{}) // from an earlier run

	key := signingKey(1)
	data, digest := encode(t, node, 1)
	if _, err := cms.Create(t.Context(), planConfigMap(node, data, plan.Sign(data, key)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	trust := planwatch.NewTrust(nil)
	trust.Set(nil, errors.New("not read yet"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&planwatch.TrustedKeys{Client: client, Trust: trust, Resync: time.Second}).Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	ch := start(t, &planwatch.ConfigMap{Client: client, Node: node, Trust: trust, Resync: time.Second})
	expectSkipping(t, ch, want{err: plan.ErrNoTrustedKeys, msg: "does not exist"}, true)

	keys := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: planwatch.TrustedKeysName, Namespace: planwatch.ConfigMapNamespace},
		Data: map[string]string{planwatch.TrustedKeysKey: authorizedKeys(key)}}
	if _, err := cms.Create(t.Context(), keys, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, want{digest: digest})

	keys.Data[planwatch.TrustedKeysKey] = authorizedKeys(signingKey(2))
	if _, err := cms.Update(t.Context(), keys, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, want{err: plan.ErrUntrustedSigner, msg: fp(key)})
}
