//go:build integration

package main

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hnsplan/hnsplan/applier/control"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
)

// TestRunSuspended runs the agent against a real kube-apiserver with its
// node suspended in hnsplan-system/hnsplan-control before it starts: it
// writes nothing to HNS and reports suspended on its Node; unsuspended,
// it applies the plan; a reconcile request is recorded as an Event.
func TestRunSuspended(t *testing.T) {
	e := newRunEnv(t, "win-susp")
	kubeconfig, cs, ctx, node, must := e.kubeconfig, e.cs, e.ctx, e.node, e.must
	cms := cs.CoreV1().ConfigMaps(control.Namespace)
	_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: control.Name}}, metav1.CreateOptions{})
	must(err)
	setKey := func(key string, value any) {
		t.Helper()
		patch := fmt.Sprintf(`{"data":{%q:%s}}`, key, value)
		_, err := cms.Patch(ctx, control.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		must(err)
	}
	defer func() {
		for _, k := range []string{control.SuspendKey(node), control.ReconcileKey(node)} {
			cms.Patch(context.Background(), control.Name, types.MergePatchType, []byte(fmt.Sprintf(`{"data":{%q:null}}`, k)), metav1.PatchOptions{})
		}
	}()
	setKey(control.SuspendKey(node), fmt.Sprintf("%q", control.Value{At: time.Now(), Reason: "test"}.Format()))

	p := samplePlan()
	p.Node, p.Cluster, p.Endpoints = node, node, nil
	setRoutes(p, p.RemoteSubnetRoutes())
	e.publish(p)

	h := hnsmem.New(hnsmem.ManagementAddress(netip.MustParseAddr("10.240.0.21")))
	e.run(&runFlags{node: node, planSource: "configmap", kubeconfig: kubeconfig, listen: freeAddr(t), client: h,
		stateDir: filepath.Join(t.TempDir(), "state"), resync: time.Minute})
	waitNode := func(what string, ok func(*corev1.Node) bool) { e.waitNode(what, ok) }
	waitEvent := func(reason string) {
		t.Helper()
		for ctx.Err() == nil {
			ev, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + node + ",reason=" + reason})
			if err == nil && len(ev.Items) > 0 {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("no %s Event on %s", reason, node)
	}
	waitNode("state suspended", func(n *corev1.Node) bool {
		return n.Annotations["hnsplan.io/state"] == "suspended" && strings.Contains(n.Annotations["hnsplan.io/last-error"], control.SuspendKey(node)+" since")
	})
	waitEvent("AgentSuspended")
	time.Sleep(500 * time.Millisecond) // passes the plan and the caches trigger
	if n := h.MutatingCalls(); n != 0 {
		t.Fatalf("suspended: %d HNS writes, want none:\n%s", n, h)
	}

	setKey(control.SuspendKey(node), "null")
	waitNode("the plan applied", func(n *corev1.Node) bool {
		return n.Annotations["hnsplan.io/state"] == "converged" && n.Annotations["hnsplan.io/applied-digest"] == p.Digest
	})
	if h.MutatingCalls() == 0 {
		t.Error("converged with no HNS write")
	}
	setKey(control.ReconcileKey(node), fmt.Sprintf("%q", control.Value{At: time.Now().Add(time.Second)}.Format()))
	waitEvent("ReconcileRequested")
}
