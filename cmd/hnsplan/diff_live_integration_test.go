//go:build integration

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hnsplan/hnsplan/fleet"
	"github.com/hnsplan/hnsplan/internal/kubetest"
)

// TestDiffLive runs diff --live against the real API server of
// $KUBECONFIG (it writes hnsplan-system): nothing published is every node
// created (exit 2); after publish of the same intent, no changes (exit
// 0), from the intent and from its plan directory; a VNI change is a
// replace of every Windows node's network (exit 2); a plan edited in the
// cluster is one an agent refuses (exit 1, naming it).
//
//	go test -tags integration -run DiffLive ./cmd/hnsplan/
func TestDiffLive(t *testing.T) {
	kubetest.OwnSystemNamespace(t) // it clears hnsplan-system and reads all of it
	kubeconfig, cfg := kubetest.Kubeconfig(t), kubetest.Config(t)
	cs := kubetest.Client(t, cfg)
	ctx := context.Background()
	clearPlans(t, ctx, cs)
	t.Cleanup(func() { clearPlans(t, context.Background(), cs) })

	const example = "../../examples/calico-vxlan"
	live := func(code int, dir string, args ...string) (string, string) {
		t.Helper()
		return runCLI(t, code, append([]string{"diff", "--live", dir, "--kubeconfig", kubeconfig}, args...)...)
	}

	out, _ := live(2, example)
	if !strings.Contains(out, "nothing is published in the cluster ("+fleet.Namespace+" on "+cfg.Host+"): every node is created") {
		t.Errorf("nothing published:\n%s", out)
	}

	mustRun(t, 0, "publish", example, "--kubeconfig", kubeconfig)
	out, _ = live(0, example)
	if !strings.Contains(out, "No changes.") {
		t.Errorf("after publish:\n%s", out)
	}
	plans := t.TempDir()
	mustRun(t, 0, "compile", example, "-o", plans)
	live(0, plans, "-o", "json")

	changed := t.TempDir()
	copyDir(t, example, changed)
	cue := filepath.Join(changed, "cluster.cue")
	text, err := os.ReadFile(cue)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), "vni: 4096") {
		t.Fatal("the example's VNI is no longer 4096: update the test")
	}
	if err := os.WriteFile(cue, []byte(strings.Replace(string(text), "vni: 4096", "vni: 5000", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ = live(2, changed)
	if !strings.Contains(out, "networks to replace") || !strings.Contains(out, "-/+") {
		t.Errorf("VNI change: no replace shown:\n%s", out)
	}
	out, _ = live(2, changed, "-o", "json")
	if !strings.Contains(out, `"action": "replace"`) || !strings.Contains(out, `"vni-changed"`) {
		t.Errorf("VNI change, json:\n%s", out)
	}

	// A plan edited in the cluster: its digest no longer matches.
	list, err := cs.CoreV1().ConfigMaps(fleet.Namespace).List(ctx, metav1.ListOptions{LabelSelector: fleet.LabelNode})
	if err != nil || len(list.Items) == 0 {
		t.Fatalf("no plan ConfigMap published: %v", err)
	}
	cm := list.Items[0]
	node := cm.Labels[fleet.LabelNode]
	edited := strings.Replace(cm.Data[fleet.PlanKey], `4096`, `4097`, 1)
	if edited == cm.Data[fleet.PlanKey] {
		t.Fatal("the plan names no VNI 4096 to edit")
	}
	cm.Data[fleet.PlanKey] = edited
	if _, err := cs.CoreV1().ConfigMaps(fleet.Namespace).Update(ctx, &cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, errOut := live(1, example)
	if !strings.Contains(errOut, "node "+node+": the agent would refuse the published plan") || !strings.Contains(errOut, "digest does not match") {
		t.Errorf("edited plan: stderr\n%s", errOut)
	}
}

// clearPlans deletes the plan and part ConfigMaps of hnsplan-system,
// whoever wrote them, so that a test starts from nothing published.
func clearPlans(t *testing.T, ctx context.Context, cs kubernetes.Interface) {
	t.Helper()
	cms := cs.CoreV1().ConfigMaps(fleet.Namespace)
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		if strings.Contains(err.Error(), "not found") {
			return
		}
		t.Fatal(err)
	}
	for _, cm := range list.Items {
		if strings.HasPrefix(cm.Name, fleet.PlanPrefix) || cm.Labels[fleet.LabelPart] != "" {
			if err := cms.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}
