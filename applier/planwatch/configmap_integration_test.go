//go:build integration

package planwatch_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/internal/kubetest"
)

// kubeClient connects to the kube-apiserver of KUBECONFIG (make
// test-integration starts one) and makes sure the plans' namespace exists.
func kubeClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		// Not a skip: a run with -tags integration that tests nothing
		// must not look green.
		t.Fatal("KUBECONFIG is not set: make test-integration starts a kube-apiserver and sets it")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("KUBECONFIG %s: %v", path, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: planwatch.ConfigMapNamespace}}
	if _, err := client.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", planwatch.ConfigMapNamespace, err)
	}
	return client
}

// uniqueNode returns a node name no other test run on the same apiserver
// has used.
func uniqueNode() string {
	return fmt.Sprintf("win-it-%x", time.Now().UnixNano())
}

func TestConfigMapAPIServer(t *testing.T) {
	kubetest.ShareSystemNamespace(t)
	client := kubeClient(t)
	node := uniqueNode()
	t.Cleanup(func() {
		// Leave the shared apiserver as found, apart from the namespace.
		// (t.Context is already canceled when cleanups run.)
		for _, n := range []string{node, node + "-other"} {
			client.CoreV1().ConfigMaps(planwatch.ConfigMapNamespace).Delete(context.Background(), planwatch.ConfigMapName(n), metav1.DeleteOptions{})
		}
	})
	// The real apiserver has resource versions: no change between list
	// and watch is lost, so there is nothing to wait for.
	runCMScenario(t, client, node, time.Second, nil)
}

// TestPartsAPIServer: the consistency rule over real part ConfigMaps,
// found by the label-selected informer.
func TestPartsAPIServer(t *testing.T) {
	kubetest.ShareSystemNamespace(t)
	client := kubeClient(t)
	node := uniqueNode()
	pub := &cmPub{client: client, node: node, resync: time.Second}
	t.Cleanup(pub.cleanup)
	// Parts are named after their content, the cluster's name in it: a
	// cluster of this run's own keeps them apart from other runs'.
	runParts(t, node, node, pub, 1500*time.Millisecond, nil)
}
