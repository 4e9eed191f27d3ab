//go:build integration

package control_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hnsplan/hnsplan/applier/control"
	"github.com/hnsplan/hnsplan/internal/kubetest"
)

// TestWatchAPIServer: the watcher sees the ConfigMap appear, change (a
// merge patch, as the CLI writes) and go, and nothing of another
// ConfigMap in its namespace.
//
//	go test -tags integration -run WatchAPIServer ./applier/control/
func TestWatchAPIServer(t *testing.T) {
	cs := kubetest.Client(t, kubetest.Config(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := kubetest.UniqueName("control-test")
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })

	var mu sync.Mutex
	var got []map[string]string
	go control.Watcher{Client: cs, Namespace: ns}.Run(ctx, func(d map[string]string) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, d)
	})
	wait := func(what string, ok func(control.State, int) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			n := len(got)
			var last map[string]string
			if n > 0 {
				last = got[n-1]
			}
			mu.Unlock()
			if ok(control.For(last, "win-1"), n) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: never seen (updates %v)", what, got)
	}
	cms := cs.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plan-win-1"}, Data: map[string]string{"suspend": "x"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: control.Name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("the empty ConfigMap", func(s control.State, n int) bool { return n == 1 && !s.Suspended })
	at := time.Now().Truncate(time.Second)
	patch := `{"data":{"suspend.win-1":"` + control.Value{At: at, Reason: "maintenance"}.Format() + `"}}`
	if _, err := cms.Patch(ctx, control.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("the suspension", func(s control.State, _ int) bool {
		return s.Suspended && s.Key == "suspend.win-1" && s.Reason == "maintenance" && s.Since.Equal(at)
	})
	if err := cms.Delete(ctx, control.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("the deletion", func(s control.State, n int) bool { return !s.Suspended && n >= 3 })
	mu.Lock()
	defer mu.Unlock()
	if got[len(got)-1] != nil {
		t.Errorf("after the deletion: %v, want nil data", got[len(got)-1])
	}
}
