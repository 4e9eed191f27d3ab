//go:build integration

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/fleet"
	"github.com/hnsplan/hnsplan/internal/kubetest"
)

// TestPublish publishes the bundled calico-vxlan example to the real API
// server of $KUBECONFIG (hack/kube-test-env.sh start, or any
// throw-away cluster: it writes hnsplan-system), reads the ConfigMaps back
// and checks them against what compile writes; publishing again changes
// nothing; --prune deletes the plan ConfigMaps of nodes that are gone and
// nothing else.
//
//	go test -tags integration -run Publish ./cmd/hnsplan/
func TestPublish(t *testing.T) {
	kubetest.OwnSystemNamespace(t) // publish prunes the parts nothing names: no test may write there meanwhile
	kubeconfig, cfg := kubetest.Kubeconfig(t), kubetest.Config(t)
	cs := kubetest.Client(t, cfg)
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(publishNamespace)

	// Start from no plan ConfigMaps, so that the test can run again.
	if err := cms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: labelManagedBy + "=hnsplan"}); err != nil && !strings.Contains(err.Error(), "not found") {
		t.Fatal(err)
	}

	const example = "../../examples/calico-vxlan"
	plans := t.TempDir()
	mustRun(t, 0, "compile", example, "-o", plans)
	want := map[string][]byte{} // node -> plan file, as compile wrote it
	idx := readIndex(t, plans)
	for _, e := range idx.Plans {
		data, err := os.ReadFile(filepath.Join(plans, e.File))
		if err != nil {
			t.Fatal(err)
		}
		want[e.Node] = data
	}
	if len(want) == 0 {
		t.Fatal("the example compiled to no plan")
	}

	// First publish, from the intent: every ConfigMap is created.
	out := mustRun(t, 0, "publish", example, "--kubeconfig", kubeconfig)
	for node := range want {
		if !strings.Contains(out, fmt.Sprintf("configmap %s/plan-%s: created (sha256:", publishNamespace, node)) {
			t.Errorf("first publish: no created line for %s:\n%s", node, out)
		}
	}
	if !strings.Contains(out, fmt.Sprintf("published %d plans and %s to %s on %s: %d created, 0 updated, 0 unchanged", len(want), plural(len(idx.Parts), "part"), publishNamespace, cfg.Host, len(want)+len(idx.Parts))) {
		t.Errorf("first publish: summary wrong:\n%s", out)
	}
	checkParts(t, ctx, cs, plans, idx.Parts)
	if _, err := cs.CoreV1().Namespaces().Get(ctx, publishNamespace, metav1.GetOptions{}); err != nil {
		t.Fatalf("namespace: %v", err)
	}
	checkConfigMaps(t, ctx, cs, want)

	// Again, from the plan directory: the same bytes, nothing changes.
	out = mustRun(t, 0, "publish", plans, "--kubeconfig", kubeconfig)
	if n := len(want) + len(idx.Parts); strings.Count(out, ": unchanged (sha256:") != n || strings.Contains(out, ": created") || strings.Contains(out, ": updated") || !strings.Contains(out, fmt.Sprintf("0 created, 0 updated, %d unchanged", n)) {
		t.Errorf("second publish changed something:\n%s", out)
	}

	// A plan that changes is updated (a stale digest annotation stands
	// for an old plan).
	cm, err := cms.Get(ctx, fleet.ConfigMapName(idx.Plans[0].Node), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Annotations[annotationDigest] = "sha256:old"
	cm.Data[publishKey] = "{}"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	out = mustRun(t, 0, "publish", plans, "--kubeconfig", kubeconfig)
	if !strings.Contains(out, fmt.Sprintf("plan-%s: updated", idx.Plans[0].Node)) || !strings.Contains(out, "0 created, 1 updated") {
		t.Errorf("publish over an edited plan did not update it:\n%s", out)
	}
	checkConfigMaps(t, ctx, cs, want)

	// A plan ConfigMap of a node that is gone is reported stale, and
	// deleted with --prune; a ConfigMap hnsplan does not manage is kept.
	gone := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: fleet.ConfigMapName("win-gone"), Namespace: publishNamespace,
			Labels: map[string]string{labelManagedBy: "hnsplan", labelNode: "win-gone"}},
		Data: map[string]string{publishKey: "{}"},
	}
	foreign := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: fleet.ConfigMapName("foreign"), Namespace: publishNamespace},
		Data:       map[string]string{"x": "y"},
	}
	for _, c := range []*corev1.ConfigMap{gone, foreign} {
		if _, err := cms.Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = cms.Delete(context.Background(), foreign.Name, metav1.DeleteOptions{}) })
	out = mustRun(t, 0, "publish", plans, "--kubeconfig", kubeconfig)
	if !strings.Contains(out, "plan-win-gone: stale, no plan for node win-gone (--prune deletes it)") || !strings.Contains(out, ", 1 stale") {
		t.Errorf("publish without --prune did not report the stale plan:\n%s", out)
	}
	out = mustRun(t, 0, "publish", plans, "--kubeconfig", kubeconfig, "--prune")
	if !strings.Contains(out, "plan-win-gone: pruned") || !strings.Contains(out, ", 1 pruned") || strings.Contains(out, "foreign") {
		t.Errorf("publish --prune:\n%s", out)
	}
	if _, err := cms.Get(ctx, gone.Name, metav1.GetOptions{}); err == nil {
		t.Error("--prune left the stale plan ConfigMap")
	}
	if _, err := cms.Get(ctx, foreign.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("--prune deleted a ConfigMap hnsplan does not manage: %v", err)
	}
	checkConfigMaps(t, ctx, cs, want)

	// --context picks a context that the kubeconfig does not have: usage
	// of the kubeconfig fails with exit 1 and says so.
	_, stderr := runCLI(t, 1, "publish", plans, "--kubeconfig", kubeconfig, "--context", "no-such-context")
	if !strings.Contains(stderr, "no-such-context") {
		t.Errorf("--context no-such-context: %s", stderr)
	}
}

func checkConfigMaps(t *testing.T, ctx context.Context, cs kubernetes.Interface, want map[string][]byte) {
	t.Helper()
	for node, data := range want {
		cm, err := cs.CoreV1().ConfigMaps(publishNamespace).Get(ctx, "plan-"+node, metav1.GetOptions{})
		if err != nil {
			t.Errorf("node %s: %v", node, err)
			continue
		}
		got := cm.Data[publishKey]
		if got != string(data) {
			t.Errorf("node %s: ConfigMap data is not the plan file compile writes (%d vs %d bytes)", node, len(got), len(data))
		}
		p, err := plan.Decode([]byte(got), node)
		if err != nil {
			t.Errorf("node %s: %v", node, err)
			continue
		}
		if cm.Annotations[annotationDigest] != p.Digest {
			t.Errorf("node %s: digest annotation %q, plan digest %q", node, cm.Annotations[annotationDigest], p.Digest)
		}
		if cm.Labels[labelManagedBy] != "hnsplan" || cm.Labels[labelNode] != node {
			t.Errorf("node %s: labels %v", node, cm.Labels)
		}
		owned := false
		for _, m := range cm.ManagedFields {
			owned = owned || (m.Manager == fleet.FieldManager && m.Operation == metav1.ManagedFieldsOperationApply)
		}
		if !owned {
			t.Errorf("node %s: not applied by field manager %s: %v", node, fleet.FieldManager, cm.ManagedFields)
		}
	}
}

// checkParts checks that each part of the plan directory dir is the
// ConfigMap named as the part, holding its file byte for byte, labelled
// and annotated.
func checkParts(t *testing.T, ctx context.Context, cs kubernetes.Interface, dir string, parts []plan.IndexPart) {
	t.Helper()
	if len(parts) == 0 {
		t.Error("the plans name no part")
	}
	for _, e := range parts {
		data, err := os.ReadFile(filepath.Join(dir, e.File))
		if err != nil {
			t.Fatal(err)
		}
		cm, err := cs.CoreV1().ConfigMaps(publishNamespace).Get(ctx, e.Name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("part %s: %v", e.Name, err)
			continue
		}
		if cm.Data[partKey] != string(data) || cm.Annotations[annotationDigest] != e.Digest ||
			cm.Labels[labelManagedBy] != "hnsplan" || cm.Labels[labelPart] != strings.ToLower(e.Kind) {
			t.Errorf("part %s: ConfigMap labels %v, annotations %v, %d bytes of %s; want the file's %d bytes", e.Name, cm.Labels, cm.Annotations, len(cm.Data[partKey]), partKey, len(data))
		}
	}
}

func readIndex(t *testing.T, dir string) plan.Index {
	t.Helper()
	files, _, ok, err := compiler.ReadPlanDir(dir)
	if err != nil || !ok {
		t.Fatalf("read %s: ok=%v err=%v", dir, ok, err)
	}
	var idx plan.Index
	for _, f := range files {
		if f.IsPlan() {
			idx.Plans = append(idx.Plans, plan.IndexEntry{Node: f.Node, File: f.Name, Digest: f.Digest})
		} else {
			idx.Parts = append(idx.Parts, plan.IndexPart{Name: f.Part, Kind: f.Kind, File: f.Name, Digest: f.Digest})
		}
	}
	return idx
}

func runCLI(t *testing.T, code int, args ...string) (string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if got := run(args, &stdout, &stderr); got != code {
		t.Fatalf("hnsplan %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, code, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String()
}

func mustRun(t *testing.T, code int, args ...string) string {
	t.Helper()
	out, _ := runCLI(t, code, args...)
	return out
}
