// Package kubetest is the integration tests' side of the real
// kube-apiserver and etcd that `make test-integration` starts
// (hack/kube-test-env.sh): the server's kubeconfig and configuration,
// clients, and names unique to a run, so that the tests of several
// packages can share one server. Only tests (build tag integration)
// import it.
//
// Without $KUBECONFIG a test fails rather than skips: a skipped
// integration suite is one nobody notices is not running.
package kubetest

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Kubeconfig returns the path of the test API server's kubeconfig,
// $KUBECONFIG, for a test that hands it to a command (--kubeconfig).
func Kubeconfig(t testing.TB) string {
	t.Helper()
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		t.Fatal("KUBECONFIG is not set: integration tests need a real kube-apiserver (run make test-integration, or hack/kube-test-env.sh start)")
	}
	return path
}

// Config returns the test API server's admin configuration. Its client
// rate limit is raised far above client-go's default of 5 QPS: the tests
// create objects quickly, and a throttled client makes them slow, not more
// realistic.
func Config(t testing.TB) *rest.Config {
	t.Helper()
	path := Kubeconfig(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("load KUBECONFIG %s: %v", path, err)
	}
	cfg.QPS, cfg.Burst = 2000, 4000
	return cfg
}

// Client returns a clientset for cfg.
func Client(t testing.TB, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// seq tells apart names made within one tick of a coarse clock.
var seq atomic.Uint64

// UniqueName returns prefix with a suffix unique to this run (the clock,
// and a count), a DNS-1123 label when prefix is one of at most 52
// characters.
func UniqueName(prefix string) string {
	return fmt.Sprintf("%s-%010x", prefix, (uint64(time.Now().UnixNano())+seq.Add(1))&0xffffffffff)
}
