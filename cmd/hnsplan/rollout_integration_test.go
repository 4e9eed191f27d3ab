//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/hnsplan/hnsplan/applier/rollout"
	"github.com/hnsplan/hnsplan/fleet"
	"github.com/hnsplan/hnsplan/internal/kubetest"
)

// TestPublishCanary publishes an intent of three Windows nodes (names
// unique to the run) with --canary 1, then --canary 1 again, then --nodes:
// each writes only its subset's ConfigMaps and leaves the others alone.
//
//	go test -tags integration -run PublishCanary ./cmd/hnsplan/
func TestPublishCanary(t *testing.T) {
	kubetest.OwnSystemNamespace(t) // publish prunes the parts nothing names: no test may write there meanwhile
	kubeconfig, cfg := kubetest.Kubeconfig(t), kubetest.Config(t)
	cs := kubetest.Client(t, cfg)
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(publishNamespace)

	nodes := []string{kubetest.UniqueName("win-a"), kubetest.UniqueName("win-b"), kubetest.UniqueName("win-c")}
	slices.Sort(nodes)
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = cms.Delete(context.Background(), fleet.ConfigMapName(n), metav1.DeleteOptions{})
		}
	})
	dir := t.TempDir()
	var decl strings.Builder
	for i, n := range nodes {
		fmt.Fprintf(&decl, "\t\t%q: {os: \"windows\", address: \"10.240.0.%d/24\", maxPods: 60, windows: build: \"10.0.17763.1432\"}\n", n, 21+i)
	}
	intent := `package cluster

cluster: {
	name:       "canary"
	datastore:  "kubernetes"
	networking: "calico-vxlan"
	serviceCIDRs: ["10.96.0.0/12"]
	ipam: strictAffinity: true
	vxlan: vni: 4096
	pools: default: cidr: "192.168.0.0/16"
	nodes: {
		"linux-1": {os: "linux", address: "10.240.0.10/24"}
` + decl.String() + `	}
}
`
	if err := os.WriteFile(filepath.Join(dir, "cluster.cue"), []byte(intent), 0o644); err != nil {
		t.Fatal(err)
	}
	present := func() []string {
		t.Helper()
		var out []string
		for _, n := range nodes {
			_, err := cms.Get(ctx, fleet.ConfigMapName(n), metav1.GetOptions{})
			switch {
			case err == nil:
				out = append(out, n)
			case !apierrors.IsNotFound(err):
				t.Fatal(err)
			}
		}
		return out
	}

	out := mustRun(t, 0, "publish", dir, "--kubeconfig", kubeconfig, "--canary", "1")
	if got := present(); !slices.Equal(got, nodes[:1]) {
		t.Fatalf("--canary 1 wrote the ConfigMaps of %v, want only %v (the first by name):\n%s", got, nodes[:1], out)
	}
	// The parts (the route table) go with the canary's plan.
	if strings.Count(out, ": held back, would be created (--canary 1, sha256:") != 2 || !regexp.MustCompile(`published 1 of 3 plans and (\d+) of (\d+) parts .*\(--canary 1\): [1-9]\d* created, \d+ updated, \d+ unchanged, 2 held back`).MatchString(out) {
		t.Errorf("--canary 1 output:\n%s", out)
	}

	// Again: the first node's plan is unchanged, so the canary is the next.
	out = mustRun(t, 0, "publish", dir, "--kubeconfig", kubeconfig, "--canary", "1")
	if got := present(); !slices.Equal(got, nodes[:2]) {
		t.Fatalf("the second --canary 1 wrote %v, want %v:\n%s", got, nodes[:2], out)
	}
	if !strings.Contains(out, fleet.ConfigMapName(nodes[0])+": unchanged") || !regexp.MustCompile(`: 1 created, 0 updated, [1-9]\d* unchanged, 1 held back`).MatchString(out) {
		t.Errorf("the second --canary 1 output:\n%s", out)
	}

	// --nodes writes exactly the node named, changed or not.
	cm, err := cms.Get(ctx, fleet.ConfigMapName(nodes[0]), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	version := cm.ResourceVersion
	out = mustRun(t, 0, "publish", dir, "--kubeconfig", kubeconfig, "--nodes", nodes[2])
	if got := present(); !slices.Equal(got, nodes) {
		t.Fatalf("--nodes %s: ConfigMaps of %v:\n%s", nodes[2], got, out)
	}
	if cm, err := cms.Get(ctx, fleet.ConfigMapName(nodes[0]), metav1.GetOptions{}); err != nil || cm.ResourceVersion != version {
		t.Errorf("--nodes %s touched the ConfigMap of %s (err %v)", nodes[2], nodes[0], err)
	}

	// An unknown node is a usage error naming it; nothing is sent.
	_, stderr := runCLI(t, exitUsage, "publish", dir, "--kubeconfig", kubeconfig, "--nodes", "win-nowhere")
	if !strings.Contains(stderr, `no plan for node "win-nowhere"`) {
		t.Errorf("--nodes win-nowhere: %s", stderr)
	}
}

// rolloutFixture plays the agents of three nodes in a namespace of its own
// (so that other tests' slots and plans are not counted): a converged, b
// replacing with the slot, c waiting for its first plan.
type rolloutFixture struct {
	t          *testing.T
	cs         kubernetes.Interface
	kubeconfig string
	ns         string
	a, b, c    string
}

func newRolloutFixture(t *testing.T) *rolloutFixture {
	kubeconfig, cfg := kubetest.Kubeconfig(t), kubetest.Config(t)
	f := &rolloutFixture{t: t, cs: kubetest.Client(t, cfg), kubeconfig: kubeconfig, ns: kubetest.UniqueName("rollout-test"),
		a: kubetest.UniqueName("win-a"), b: kubetest.UniqueName("win-b"), c: kubetest.UniqueName("win-c")}
	ctx := context.Background()
	if _, err := f.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.cs.CoreV1().Namespaces().Delete(context.Background(), f.ns, metav1.DeleteOptions{})
		for _, n := range []string{f.a, f.b, f.c} {
			_ = f.cs.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	for _, n := range []struct {
		name, digest string
		ann          map[string]string
	}{
		{f.a, "sha256:aaaa000000000000000000000000000000000000000000000000000000000001", map[string]string{fleet.AnnotationState: "converged", fleet.AnnotationApplied: "sha256:aaaa000000000000000000000000000000000000000000000000000000000001"}},
		{f.b, "sha256:bbbb000000000000000000000000000000000000000000000000000000000002", map[string]string{fleet.AnnotationState: "replacing", fleet.AnnotationApplied: "sha256:bbbb000000000000000000000000000000000000000000000000000000000001"}},
		{f.c, "sha256:cccc000000000000000000000000000000000000000000000000000000000003", nil},
	} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleet.ConfigMapName(n.name), Namespace: f.ns,
			Labels:      map[string]string{labelManagedBy: "hnsplan", labelNode: n.name},
			Annotations: map[string]string{annotationDigest: n.digest}}, Data: map[string]string{publishKey: "{}"}}
		if _, err := f.cs.CoreV1().ConfigMaps(f.ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Annotations: n.ann}}
		if _, err := f.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.acquire(f.b)
	return f
}

// acquire takes a slot for node, as its agent does before a replace.
func (f *rolloutFixture) acquire(node string) {
	f.t.Helper()
	s := &rollout.Slots{Leases: f.cs.CoordinationV1(), Namespace: f.ns, Holder: node, Max: 1}
	if name, ok, err := s.Acquire(context.Background()); err != nil || !ok || name != rollout.NamePrefix+"0" {
		f.t.Fatalf("%s: acquire: %q %v %v", node, name, ok, err)
	}
}

// annotate sets node's hnsplan.io/ annotations, as its agent does.
func (f *rolloutFixture) annotate(node string, ann map[string]any) {
	f.t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if _, err := f.cs.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *rolloutFixture) run(code int, args ...string) (string, string) {
	f.t.Helper()
	return runCLI(f.t, code, append(args, "--kubeconfig", f.kubeconfig, "--namespace", f.ns)...)
}

// TestRolloutStatusAndResume: status shows each node's published and
// applied digests, state and slot, and exits 0 while the rollout goes on,
// 4 once the slot holder is blocked; resume frees the slot (recording an
// Event), after which status exits 0 again.
//
//	go test -tags integration -run Rollout ./cmd/hnsplan/
func TestRolloutStatusAndResume(t *testing.T) {
	f := newRolloutFixture(t)
	ctx := context.Background()

	out, _ := f.run(0, "rollout", "status")
	row := func(out, node string) []string {
		for line := range strings.Lines(out) {
			if fields := strings.Fields(line); len(fields) > 0 && fields[0] == node {
				return fields
			}
		}
		t.Fatalf("no row for %s:\n%s", node, out)
		return nil
	}
	if got, want := row(out, f.b), []string{f.b, "sha256:bbbb00000000", "sha256:bbbb00000000", "replacing", "hnsplan-rollout-0", "-"}; !slices.Equal(got, want) {
		t.Errorf("row of %s = %q, want %q\n%s", f.b, got, want, out)
	}
	if got, want := row(out, f.a), []string{f.a, "sha256:aaaa00000000", "sha256:aaaa00000000", "converged", "-", "-"}; !slices.Equal(got, want) {
		t.Errorf("row of %s = %q, want %q", f.a, got, want)
	}
	if got, want := row(out, f.c), []string{f.c, "sha256:cccc00000000", "-", "-", "-", "-"}; !slices.Equal(got, want) {
		t.Errorf("row of %s = %q, want %q", f.c, got, want)
	}
	if !strings.Contains(out, "3 nodes: 1 converged, 2 pending, 0 halted; 1 rollout slot held\n") || strings.Contains(out, "rollout halted") {
		t.Errorf("summary:\n%s", out)
	}

	// JSON has the full digests.
	out, _ = f.run(0, "rollout", "status", "-o", "json")
	var st fleet.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(st.Nodes) != 3 || st.Nodes[1].Node != f.b || st.Nodes[1].Published != "sha256:bbbb000000000000000000000000000000000000000000000000000000000002" ||
		st.Nodes[1].Slot != "hnsplan-rollout-0" || st.Nodes[1].Phase != fleet.PhasePending || len(st.Slots) != 1 || st.Slots[0].Holder != f.b {
		t.Errorf("json: %+v", st)
	}

	// b's drain times out: it keeps its slot, and the rollout halts.
	f.annotate(f.b, map[string]any{fleet.AnnotationState: "blocked", fleet.AnnotationLastError: "drain: 2 pods remain after 10m0s\n(PodDisruptionBudget web)"})
	out, _ = f.run(exitHalted, "rollout", "status")
	if got := row(out, f.b); !slices.Equal(got[3:6], []string{"blocked", "hnsplan-rollout-0", "drain:"}) {
		t.Errorf("row of %s = %q", f.b, got)
	}
	if !strings.Contains(out, "3 nodes: 1 converged, 1 pending, 1 halted") ||
		!strings.Contains(out, "rollout halted by "+f.b+": it holds hnsplan-rollout-0 in state blocked; fix the node and run hnsplan-agent replace --retry on it, or hnsplan rollout resume "+f.b) {
		t.Errorf("halted status:\n%s", out)
	}
	f.run(exitHalted, "rollout", "status", "--wait", "--timeout", "30s")

	// resume refuses a node that holds no slot, and frees nothing then.
	_, stderr := f.run(exitInvalid, "rollout", "resume", f.c, f.b)
	if !strings.Contains(stderr, "nothing freed: node "+f.c+" holds no rollout slot in "+f.ns) {
		t.Errorf("resume %s: %s", f.c, stderr)
	}
	f.run(exitHalted, "rollout", "status")

	out, _ = f.run(0, "rollout", "resume")
	if !strings.Contains(out, "node "+f.b+": freed hnsplan-rollout-0 (was blocked: drain: 2 pods remain after 10m0s (PodDisruptionBudget web))") ||
		!strings.Contains(out, "freed 1 rollout slot of 1 node in "+f.ns) {
		t.Errorf("resume:\n%s", out)
	}
	events, err := f.cs.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + f.b})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) != 1 || events.Items[0].Reason != fleet.ReasonRolloutResumed || events.Items[0].InvolvedObject.Kind != "Node" ||
		events.Items[0].InvolvedObject.UID == "" || !strings.Contains(events.Items[0].Message, "freed rollout slot hnsplan-rollout-0") {
		t.Errorf("events on %s: %+v", f.b, events.Items)
	}
	out, _ = f.run(0, "rollout", "status")
	if !strings.Contains(out, "1 converged, 2 pending, 0 halted; 0 rollout slots held") {
		t.Errorf("status after resume:\n%s", out)
	}
	out, _ = f.run(0, "rollout", "resume")
	if out != "no rollout is halted: nothing to free\n" {
		t.Errorf("resume with nothing halted: %q", out)
	}

	// A node whose replace is under way is freed only with --force.
	f.annotate(f.b, map[string]any{fleet.AnnotationState: "replacing", fleet.AnnotationLastError: nil})
	f.acquire(f.b)
	_, stderr = f.run(exitInvalid, "rollout", "resume", f.b)
	if !strings.Contains(stderr, "node "+f.b+" is not halted: it holds hnsplan-rollout-0 in state replacing") {
		t.Errorf("resume of a replacing node: %s", stderr)
	}
	out, _ = f.run(0, "rollout", "resume", f.b, "--force")
	if !strings.Contains(out, "node "+f.b+": freed hnsplan-rollout-0 (was replacing)") {
		t.Errorf("resume --force:\n%s", out)
	}
	if slots, err := rollout.Status(ctx, f.cs.CoordinationV1(), f.ns); err != nil || len(slots) != 0 {
		t.Errorf("slots after resume --force: %v %v", slots, err)
	}
}

// syncBuffer is a bytes.Buffer that a command writes while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRolloutStatusWatch: --watch prints the status again when a node's
// state changes and ends at --timeout; --wait ends as soon as every node
// has converged, and exits 5 at its timeout while a node is pending.
func TestRolloutStatusWatch(t *testing.T) {
	f := newRolloutFixture(t)
	args := []string{"rollout", "status", "--kubeconfig", f.kubeconfig, "--namespace", f.ns, "--interval", "100ms"}

	var stdout, stderr syncBuffer
	done := make(chan int)
	go func() { done <- run(slices.Concat(args, []string{"--watch", "--timeout", "4s"}), &stdout, &stderr) }()
	waitFor := func(what string, cond func(string) bool) {
		t.Helper()
		for deadline := time.Now().Add(3 * time.Second); !cond(stdout.String()); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("--watch did not print %s:\n%s\nstderr:\n%s", what, stdout.String(), stderr.String())
			}
		}
	}
	waitFor("the first status", func(s string) bool { return strings.Contains(s, "1 rollout slot held") })
	f.annotate(f.c, map[string]any{fleet.AnnotationState: "rollout-waiting"})
	waitFor("the change", func(s string) bool { return strings.Contains(s, "rollout-waiting") })
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("--watch exit %d, want 0\nstderr:\n%s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("--watch did not end at its --timeout")
	}
	out := stdout.String()
	if n := strings.Count(out, "NODE "); n != 2 {
		t.Errorf("--watch printed %d tables, want 2 (one per change):\n%s", n, out)
	}

	// --wait times out while nodes are pending: exit 5.
	_, stderrText := runCLI(t, exitTimeout, slices.Concat(args, []string{"--wait", "--timeout", "500ms"})...)
	if !strings.Contains(stderrText, "the rollout is still pending (2 of 3 nodes) after 500ms") {
		t.Errorf("--wait timeout: %s", stderrText)
	}

	// Every node converges (b releases its slot): --wait ends with 0.
	go func() {
		done <- run(slices.Concat(args, []string{"--wait", "--timeout", "20s", "-o", "json"}), &bytes.Buffer{}, &bytes.Buffer{})
	}()
	time.Sleep(300 * time.Millisecond)
	if _, err := rollout.Free(context.Background(), f.cs.CoordinationV1(), f.ns, f.b); err != nil {
		t.Fatal(err)
	}
	f.annotate(f.b, map[string]any{fleet.AnnotationState: "converged", fleet.AnnotationApplied: "sha256:bbbb000000000000000000000000000000000000000000000000000000000002"})
	f.annotate(f.c, map[string]any{fleet.AnnotationState: "converged", fleet.AnnotationApplied: "sha256:cccc000000000000000000000000000000000000000000000000000000000003"})
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("--wait exit %d once converged, want 0", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("--wait did not end once every node converged")
	}
}
