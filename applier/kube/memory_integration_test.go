//go:build integration && linux

package kube

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hnsplan/hnsplan/internal/kubetest"
)

// TestIntegrationPodCacheMemory creates HNSPLAN_PODS pods (default 300;
// HNSPLAN_PODS=50000 for the figure that matters) and measures, in a fresh
// child process per mode so that each RSS is an agent's, the heap and RSS of
// a synced cache with and without the informer transforms. The child uses
// protobuf, as the agent should (see New).
//
//	HNSPLAN_PODS=50000 KUBECONFIG=... go test -tags integration -run PodCacheMemory -v -timeout 30m ./applier/kube/
func TestIntegrationPodCacheMemory(t *testing.T) {
	if mode := os.Getenv("HNSPLAN_MEMORY_CHILD"); mode != "" {
		memoryChild(t, mode)
		return
	}
	n := 300
	if s := os.Getenv("HNSPLAN_PODS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("HNSPLAN_PODS=%q: want a positive integer", s)
		}
	}
	ctx := testCtx(t, 60*time.Minute)
	cfg := kubetest.Config(t)
	cs, _ := clients(t, cfg)
	ns := kubetest.UniqueName("mem")
	createNamespace(t, ctx, cs, ns, map[string]string{"team": "bench"})

	t0 := time.Now()
	createPods(t, ctx, cs, ns, n)
	t.Logf("created %d pods in %v", n, time.Since(t0).Round(time.Second))

	type result struct {
		Mode       string
		Pods       int
		HeapInuse  uint64
		VmRSSKiB   uint64
		SyncMillis int64
		PodsMillis int64
	}
	results := map[string]result{}
	for _, mode := range []string{"transform", "none"} {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestIntegrationPodCacheMemory$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "HNSPLAN_MEMORY_CHILD="+mode, "HNSPLAN_MEMORY_NS="+ns, fmt.Sprintf("HNSPLAN_PODS=%d", n))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("memory child %s: %v\n%s", mode, err, tail(out.String(), 4000))
		}
		sc := bufio.NewScanner(&out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if i := strings.Index(line, "MEMORY "); i >= 0 {
				var r result
				if err := json.Unmarshal([]byte(line[i+len("MEMORY "):]), &r); err != nil {
					t.Fatal(err)
				}
				results[mode] = r
			}
		}
		if _, ok := results[mode]; !ok {
			t.Fatalf("memory child %s printed no result:\n%s", mode, tail(out.String(), 4000))
		}
	}
	const mib = 1 << 20
	for _, mode := range []string{"transform", "none"} {
		r := results[mode]
		t.Logf("%-9s pods=%d heap-inuse=%.1f MiB (%.0f B/pod) VmRSS=%.1f MiB sync=%dms Pods()=%dms",
			mode, r.Pods, float64(r.HeapInuse)/mib, float64(r.HeapInuse)/float64(r.Pods), float64(r.VmRSSKiB)/1024, r.SyncMillis, r.PodsMillis)
	}
	if results["transform"].HeapInuse >= results["none"].HeapInuse {
		t.Errorf("the transform does not reduce the heap: %d >= %d bytes", results["transform"].HeapInuse, results["none"].HeapInuse)
	}
	if n >= 50000 {
		if rss := results["transform"].VmRSSKiB * 1024; rss > 150*mib {
			t.Errorf("VmRSS with %d pods = %.1f MiB, target <= 150 MiB", n, float64(rss)/mib)
		}
	}
}

// createPods creates n realistic pods in ns with 32 workers and sets their
// status as a kubelet would, so that the server stores spec, status and the
// managedFields of two managers.
func createPods(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns string, n int) {
	var next, failed atomic.Int64
	var first sync.Once
	var firstErr error
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || failed.Load() > 0 {
					return
				}
				if err := createRealisticPod(ctx, cs, ns, i); err != nil {
					failed.Add(1)
					first.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("create pods: %v", firstErr)
	}
}

func createRealisticPod(ctx context.Context, cs kubernetes.Interface, ns string, i int) error {
	app := fmt.Sprintf("svc-%d", i%500)
	ports := []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}
	if i%2 == 0 {
		ports = append(ports, corev1.ContainerPort{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP})
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: fmt.Sprintf("%s-7d9f8b6c4-%05d", app, i),
			Labels: map[string]string{
				"app": app, "app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "shop",
				"pod-template-hash": "7d9f8b6c4", "tier": []string{"web", "api", "db"}[i%3], "version": "v1.4.2",
			},
			Annotations: map[string]string{
				"prometheus.io/scrape": "true", "prometheus.io/port": "9090",
				"kubectl.kubernetes.io/restartedAt": "2026-11-20T10:00:00Z",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-7d9f8b6c4",
				UID: "4d5e6f70-0000-4000-8000-000000000001", Controller: ptr(true), BlockOwnerDeletion: ptr(true)}},
		},
		Spec: corev1.PodSpec{
			NodeName:           fmt.Sprintf("%s-node-%03d", ns, i%100),
			ServiceAccountName: app,
			NodeSelector:       map[string]string{"kubernetes.io/os": "windows"},
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example.com/shop/" + app + ":v1.4.2", Ports: ports,
				Args: []string{"--listen=:8080", "--metrics=:9090"},
				Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "REGION", Value: "westeurope"},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
				},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intOrString("http")}}},
				VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "C:\\config"}},
			}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: app + "-config"}}}}},
		},
	}
	got, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{FieldManager: "kube-controller-manager"})
	if err != nil {
		return fmt.Errorf("create pod %s/%s: %w", ns, p.Name, err)
	}
	now := metav1.Now()
	ip := fmt.Sprintf("10.%d.%d.%d", 128+i/65536, i/256%256, i%256)
	got.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, HostIP: "172.20.41.103",
		HostIPs: []corev1.HostIP{{IP: "172.20.41.103"}}, StartTime: &now, QOSClass: corev1.PodQOSBurstable,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Started: ptr(true),
			Image: "registry.example.com/shop/" + app + ":v1.4.2", ImageID: "registry.example.com/shop/" + app + "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			ContainerID: fmt.Sprintf("containerd://%064x", i),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}},
	}
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, got, metav1.UpdateOptions{FieldManager: "kubelet"}); err != nil {
		return fmt.Errorf("set status of pod %s/%s: %w", ns, p.Name, err)
	}
	return nil
}

// memoryChild syncs a cache in this (fresh) process and prints its figures.
func memoryChild(t *testing.T, mode string) {
	ns := os.Getenv("HNSPLAN_MEMORY_NS")
	want, _ := strconv.Atoi(os.Getenv("HNSPLAN_PODS"))
	cfg := kubetest.Config(t)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var opts []Option
	opts = append(opts, WithoutBlockAffinities())
	if mode == "none" {
		opts = append(opts, func(o *options) { o.noTransform = true })
	}
	ctx := testCtx(t, 20*time.Minute)
	t0 := time.Now()
	c := New(cs, nil, ns+"-node-000", opts...)
	c.Start(ctx)
	if !c.WaitForSync(ctx) {
		t.Fatal("cache did not sync")
	}
	got := 0
	for _, o := range c.pods.GetStore().List() {
		if p, _ := podView(o); p.Namespace == ns {
			got++
		}
	}
	if got != want {
		t.Fatalf("cache holds %d pods of %s, want %d", got, ns, want)
	}
	sync := time.Since(t0)
	t1 := time.Now()
	all := c.Pods()
	podsTime := time.Since(t1)
	all = nil
	_ = all
	runtime.GC()
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r := map[string]any{
		"Mode": mode, "Pods": len(c.pods.GetStore().ListKeys()), "HeapInuse": ms.HeapInuse,
		"VmRSSKiB": vmRSSKiB(t), "SyncMillis": sync.Milliseconds(), "PodsMillis": podsTime.Milliseconds(),
	}
	b, _ := json.Marshal(r)
	fmt.Printf("MEMORY %s\n", b)
	runtime.KeepAlive(c)
}

func vmRSSKiB(t *testing.T) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			v, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

func ptr[T any](v T) *T { return &v }
