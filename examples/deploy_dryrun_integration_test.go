//go:build integration

package examples_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hnsplan/hnsplan/internal/kubetest"
)

// TestDeployKustomizationDryRun server-side applies every object of the
// kustomize base (deploy/kustomization.yaml's resources, images as
// kustomize sets them) with dryRun=All, as `kubectl apply -k deploy
// --server-side --dry-run=server` does: the API server validates and
// admits each one, the DaemonSet's HostProcess pod template included,
// and stores nothing. The namespace alone is applied for real first:
// the API server refuses even a dry run of an object in a namespace
// that does not exist. Then one pod of the DaemonSet's template is
// created, dry run, in that namespace, so that Pod Security admission
// judges it against the namespace's enforced level (it only warns about
// a DaemonSet).
func TestDeployKustomizationDryRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := kubetest.Config(t)
	mapper, dyn := kubetest.ApplyClients(t, cfg)

	byFile := deployObjects(t)
	for _, o := range byFile["deploy/namespace.yaml"] {
		applyObject(t, ctx, dyn, mapper, "deploy/namespace.yaml", o)
	}
	var ds *appsv1.DaemonSet
	n := 0
	for _, file := range slices.Sorted(maps.Keys(byFile)) {
		for _, obj := range byFile[file] {
			opts := metav1.ApplyOptions{FieldManager: "hnsplan-deploy-dryrun", Force: true, DryRun: []string{metav1.DryRunAll}}
			if err := serverSideApply(t, ctx, dyn, mapper, file, obj, opts); err != nil {
				t.Errorf("dry run: %v", err)
			}
			n++
			if d, ok := obj.(*appsv1.DaemonSet); ok {
				ds = d
			}
		}
	}
	t.Logf("%d objects of %d files applied, dry run", n, len(byFile))
	if ds == nil {
		t.Fatal("the base has no DaemonSet")
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: kubetest.UniqueName("hnsplan-agent-dryrun"), Namespace: ds.Namespace,
			Labels: ds.Spec.Template.Labels, Annotations: ds.Spec.Template.Annotations,
		},
		Spec: *ds.Spec.Template.Spec.DeepCopy(),
	}
	cs := kubetest.Client(t, cfg)
	if _, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("a pod of the DaemonSet's template is not admitted in %s: %v", pod.Namespace, err)
	}
}
