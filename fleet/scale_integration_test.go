//go:build integration

package fleet

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/internal/kubetest"
	"github.com/hnsplan/hnsplan/internal/synth"
)

// scaleSize is the synthetic cluster the scale test publishes: the
// issue's 4,500 Windows and 500 Linux nodes, or $HNSPLAN_PUBLISH_WINDOWS
// and $HNSPLAN_PUBLISH_LINUX of them.
func scaleSize(t testing.TB) synth.Size {
	t.Helper()
	s := synth.Size{Windows: 4500, Linux: 500, Pools: 200}
	for env, n := range map[string]*int{"HNSPLAN_PUBLISH_WINDOWS": &s.Windows, "HNSPLAN_PUBLISH_LINUX": &s.Linux} {
		if v := os.Getenv(env); v != "" {
			var err error
			if *n, err = strconv.Atoi(v); err != nil || *n < 1 {
				t.Fatalf("%s=%q: want a number of nodes", env, v)
			}
		}
	}
	return s
}

// compileSynth compiles a synthetic intent of size s into the
// ConfigMaps publish writes.
func compileSynth(t testing.TB, s synth.Size) []*Object {
	t.Helper()
	dir := t.TempDir()
	if err := synth.Write(dir, s); err != nil {
		t.Fatal(err)
	}
	res, findings, err := compiler.Build(dir, compiler.Options{})
	if err != nil || findings.HasErrors() || !res.Compiled() {
		t.Fatalf("compile %+v: %v %v", s, err, findings)
	}
	files, err := compiler.EncodePlans(res.Plans)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(files, res.Plans)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// countingTransport counts the requests that write (POST, PUT, PATCH,
// DELETE) by method and object, and the reads.
type countingTransport struct {
	next   http.RoundTripper
	mu     sync.Mutex
	writes []string // "PATCH .../configmaps/plan-win-0001"
	reads  int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		c.reads++
	} else {
		c.writes = append(c.writes, r.Method+" "+r.URL.Path)
	}
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

// take returns and forgets what was counted.
func (c *countingTransport) take() (writes []string, reads int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	writes, reads, c.writes, c.reads = c.writes, c.reads, nil, 0
	return writes, reads
}

// countingClient is a client of the test API server, without a
// client-side rate limit (publish --qps 0), that counts its requests.
func countingClient(t testing.TB) (kubernetes.Interface, *countingTransport, string) {
	t.Helper()
	cfg := kubetest.Config(t)
	cfg.QPS = -1 // no client-side limit: measure the server
	ct := &countingTransport{}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { ct.next = rt; return ct }
	return kubetest.Client(t, cfg), ct, cfg.Host
}

// scaleNamespace makes a namespace of its own for a scale run (publish
// creates it), so that thousands of plan ConfigMaps do not meet the other
// tests' in hnsplan-system; it is deleted at the end.
func scaleNamespace(t testing.TB, cs kubernetes.Interface) string {
	t.Helper()
	ns := kubetest.UniqueName("hnsplan-scale")
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return ns
}

func clearPublished(t testing.TB, cs kubernetes.Interface, ns string) {
	t.Helper()
	err := cs.CoreV1().ConfigMaps(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: LabelManagedBy + "=hnsplan"})
	if err != nil && !strings.Contains(err.Error(), "not found") {
		t.Fatal(err)
	}
}

// TestPublishScale publishes a whole synthetic cluster (4,500 Windows and
// 500 Linux nodes: a plan per Windows node, the route table's head and
// shards) to the real API server and logs the objects written per
// second; publishing it again writes nothing; a node added to the intent
// writes at most 3 objects: its plan, its shard and the head.
//
//	go test -tags integration -run PublishScale -v ./fleet/
func TestPublishScale(t *testing.T) {
	s := scaleSize(t)
	cs, ct, host := countingClient(t)
	opts := Options{Namespace: scaleNamespace(t, cs), Host: host}
	ctx := context.Background()

	t0 := time.Now()
	objs := compileSynth(t, s)
	t.Logf("compiled %d Windows + %d Linux nodes into %d objects in %v", s.Windows, s.Linux, len(objs), time.Since(t0).Round(time.Millisecond))
	ct.take()

	t1 := time.Now()
	if err := Publish(ctx, cs, objs, opts); err != nil {
		t.Fatal(err)
	}
	d := time.Since(t1)
	writes, reads := ct.take()
	t.Logf("first publish: %d objects in %v: %.0f objects/s (%d writes, %d reads, %d requests in flight)",
		len(objs), d.Round(time.Millisecond), float64(len(objs))/d.Seconds(), len(writes), reads, DefaultWorkers)
	if cms, w := countConfigMaps(t, cs, opts.Namespace), configMapWrites(writes); w != len(objs) || cms != len(objs) {
		t.Errorf("first publish: %d writes to ConfigMaps, %d ConfigMaps, for %d objects", w, cms, len(objs))
	}

	t2 := time.Now()
	if err := Publish(ctx, cs, objs, opts); err != nil {
		t.Fatal(err)
	}
	writes, reads = ct.take()
	t.Logf("publishing the same again: %d writes, %d reads, %v", len(writes), reads, time.Since(t2).Round(time.Millisecond))
	if len(writes) != 0 {
		t.Errorf("publishing the same again wrote %v", writes)
	}

	grown := s
	grown.Windows++
	objs2 := compileSynth(t, grown)
	t3 := time.Now()
	if err := Publish(ctx, cs, objs2, opts); err != nil {
		t.Fatal(err)
	}
	writes, _ = ct.take()
	t.Logf("one Windows node added: %d writes in %v: %v", len(writes), time.Since(t3).Round(time.Millisecond), writes)
	if len(writes) > 3 {
		t.Errorf("one node added: %d writes, want at most 3 (its plan, its shard, the head)", len(writes))
	}
	for _, w := range writes {
		if !strings.HasPrefix(w, "PATCH ") {
			t.Errorf("one node added: %s; want only applies", w)
		}
	}
}

func configMapWrites(writes []string) int {
	n := 0
	for _, w := range writes {
		if strings.Contains(w, "/configmaps/") {
			n++
		}
	}
	return n
}

func countConfigMaps(t testing.TB, cs kubernetes.Interface, ns string) int {
	t.Helper()
	list, err := cs.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{LabelSelector: LabelManagedBy + "=hnsplan"})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// BenchmarkPublish publishes the synthetic cluster of TestPublishScale
// to the real API server from nothing, each round (the ConfigMaps are
// deleted between rounds, untimed), and reports objects/s.
//
//	go test -tags integration -run '^$' -bench Publish -benchtime 3x ./fleet/
func BenchmarkPublish(b *testing.B) {
	objs := compileSynth(b, scaleSize(b))
	cs, ct, host := countingClient(b)
	opts := Options{Namespace: scaleNamespace(b, cs), Host: host}
	ctx := context.Background()
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		clearPublished(b, cs, opts.Namespace)
		ct.take()
		b.StartTimer()
		t0 := time.Now()
		if err := Publish(ctx, cs, objs, opts); err != nil {
			b.Fatal(err)
		}
		total += time.Since(t0)
	}
	b.ReportMetric(float64(len(objs)*b.N)/total.Seconds(), "objects/s")
	b.ReportMetric(float64(len(objs)), "objects")
}
