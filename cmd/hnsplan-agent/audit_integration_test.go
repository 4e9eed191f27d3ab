//go:build integration

package main

import (
	"io"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hnsplan/hnsplan/applier/audit"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// TestRunAuditAgainstAPIServer: `run` against a real kube-apiserver
// reports what the CNI leaves in HNS — an endpoint whose pod is gone and
// a stale one on a live pod's address, seeded into the in-memory HNS —
// as the audit command names them: the metrics, /status, the Node
// annotation hnsplan.io/audit, and one HNSAuditProblems Event however
// many passes see them; nothing is removed (no --clean-orphans); once the
// CNI cleans up, one HNSAuditResolved Event.
func TestRunAuditAgainstAPIServer(t *testing.T) {
	e := newRunEnv(t, "win-audit")
	kubeconfig, cs, ctx, node, ns, must := e.kubeconfig, e.cs, e.ctx, e.node, e.ns, e.must
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
	must(err)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "192.168.0.5", PodIPs: []corev1.PodIP{{IP: "192.168.0.5"}}}
	_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	must(err)

	p := samplePlan()
	p.Node, p.Cluster = node, node
	p.Endpoints = []plan.Endpoint{{Pod: ns + "/web", IpConfigurations: []plan.IpConfig{{IpAddress: netip.MustParseAddr("192.168.0.5"), PrefixLength: 26}}}}
	setRoutes(p, p.RemoteSubnetRoutes())
	e.publish(p)

	h := hnsmem.New(hnsmem.ManagementAddress(netip.MustParseAddr("10.240.0.21")))
	listen := freeAddr(t)
	e.run(&runFlags{node: node, planSource: "configmap", kubeconfig: kubeconfig, listen: listen, client: h,
		stateDir: filepath.Join(t.TempDir(), "state"), resync: time.Second, simulateCNI: true, drainTimeout: 2 * time.Second})
	waitNode := e.waitNode
	waitNode("converged and clean", func(n *corev1.Node) bool {
		return n.Annotations[kube.AnnotationState] == "converged" && n.Annotations[kube.AnnotationAudit] == "clean"
	})

	// The CNI leaves an endpoint whose pod is gone, and a stale one on
	// the live pod's address.
	must(h.Seed(&hns.State{Endpoints: []hns.Endpoint{
		{Name: "gone_Calico", Network: "Calico", IP: netip.MustParsePrefix("192.168.0.40/26")},
		{Name: "stale_Calico", Network: "Calico", IP: netip.MustParsePrefix("192.168.0.5/26")},
	}}))
	n := waitNode("the audit's annotation", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[kube.AnnotationAudit], "2 problems: ")
	})
	if a := n.Annotations[kube.AnnotationAudit]; !strings.Contains(a, "duplicate-ip 1 (Calico 192.168.0.5)") || !strings.Contains(a, "orphan-endpoint 1 (gone_Calico 192.168.0.40)") {
		t.Errorf("annotation %s: %q", kube.AnnotationAudit, a)
	}
	time.Sleep(3500 * time.Millisecond) // three more passes (--resync 1s)
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get("http://" + listen + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	m := get("/metrics")
	for _, line := range []string{`hnsplan_hns_audit_findings{kind="orphan-endpoint"} 1`, `hnsplan_hns_audit_findings{kind="duplicate-ip"} 1`, "hnsplan_hns_load_balancers 0"} {
		if !strings.Contains(m, line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	st, err := getStatus(listen)
	if err != nil {
		t.Fatal(err)
	}
	if st.Audit == nil || st.Audit.PodsFrom != "cluster" || st.Audit.Finding(audit.KindOrphan).Count != 1 || st.Audit.Finding(audit.KindDuplicateIP).Count != 1 {
		t.Errorf("/status audit %+v", st.Audit)
	}
	if h.Held().Endpoint("gone_Calico") == nil {
		t.Error("the orphan was removed without --clean-orphans")
	}
	events := func(reason string) []string {
		t.Helper()
		list, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + node + ",reason=" + reason})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range list.Items {
			for range max(e.Count, 1) { // a repeated Event is counted on one object
				out = append(out, e.Type+" "+e.Message)
			}
		}
		return out
	}
	if ev := events("HNSAuditProblems"); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning HNS audit: 2 problems") {
		t.Errorf("HNSAuditProblems events %q, want one over several passes", ev)
	}

	// The CNI cleans up.
	must(h.RemoveEndpoint("gone_Calico"))
	must(h.RemoveEndpoint("stale_Calico"))
	waitNode("the audit clean again", func(n *corev1.Node) bool { return n.Annotations[kube.AnnotationAudit] == "clean" })
	deadline := time.Now().Add(10 * time.Second)
	for len(events("HNSAuditResolved")) == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if ev := events("HNSAuditResolved"); len(ev) != 1 || !strings.HasPrefix(ev[0], "Normal HNS audit: clean") {
		t.Errorf("HNSAuditResolved events %q, want one", ev)
	}
}
