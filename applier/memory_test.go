//go:build linux

package applier_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// Issue 16's agent at scale: a node with 5,000 routes in a cluster of
// 5,000 nodes and 50,000 pods stays within 150 MiB of RSS.
const (
	memNodes    = 5000
	memPods     = 50000
	memNodePods = 110 // on the agent's own node, win-1
	memBudget   = 150 << 20
)

// memResult is what the memory child measures.
type memResult struct {
	Pods, Nodes, Routes    int
	HeapInuseAfterGC       uint64 // bytes, after the passes and a GC
	HeapPeak               uint64 // bytes: the largest HeapInuse seen at a sample point
	VmHWMKiB, VmRSSKiB     uint64 // peak and final resident set
	SyncHWMKiB             uint64 // peak resident set when the caches have synced
	SyncHeapInuse          uint64 // bytes, when the caches have synced (after a GC)
	SyncMillis             int64  // informers' initial streaming
	FreshCPUMillis         int64  // the fresh node's two passes (network+routes+host endpoint; ACLs)
	SteadyCPUMillis        int64  // one pass with nothing to do, mean of the steady passes
	SteadyAllocBytes       uint64 // allocated by one steady pass (mean)
	SteadyPasses, Mutating int
}

// BenchmarkAgentMemory runs the agent's work for one node of issue 16's
// cluster in a fresh process (so the resident set is the agent's): its
// informers (applier/kube, with their transforms) fill from an API that
// streams 50,000 pods (110 on this node), 5,001 nodes and 100 namespaces
// as a real kube-apiserver does for client-go's watch-list (objects one
// at a time, each transformed before it is stored), through a fake
// clientset whose objects are made on the fly and not kept; the plan is
// read from a compiled plan directory (format 2: the plan, its 64 route
// table shards and its program chunk) with 5,000 remote nodes; the
// reconciler converges the node over the in-memory HNS (which is in the
// same process: its state counts too), then makes steady passes as the
// agent does on every cluster change (ClusterOf, Pass).
//
// Metrics: peak-rss-MiB (VmHWM, the whole run) and rss-MiB (VmRSS at the
// end), heap-MiB (HeapInuse after a GC), sync-s, fresh-cpu-s,
// pass-cpu-s and pass-alloc-MiB of one steady pass. It fails above
// 150 MiB peak RSS. Run with -benchtime 1x.
func BenchmarkAgentMemory(b *testing.B) {
	dir := memPlanDir(b)
	var r memResult
	for b.Loop() {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAgentMemoryChild$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "HNSPLAN_AGENT_MEMORY_DIR="+dir)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			b.Fatalf("memory child: %v\n%s", err, out.String())
		}
		r = parseMemResult(b, out.Bytes())
		for line := range strings.SplitSeq(out.String(), "\n") {
			if rest, ok := strings.CutPrefix(line, "SAMPLE "); ok {
				b.Log(rest) // after the sync, then after each pass
			}
		}
	}
	const mib = 1 << 20
	b.Logf("%+v", r)
	b.ReportMetric(float64(r.VmHWMKiB)/1024, "peak-rss-MiB")
	b.ReportMetric(float64(r.VmRSSKiB)/1024, "rss-MiB")
	b.ReportMetric(float64(r.HeapInuseAfterGC)/mib, "heap-MiB")
	b.ReportMetric(float64(r.SyncMillis)/1000, "sync-s")
	b.ReportMetric(float64(r.FreshCPUMillis)/1000, "fresh-cpu-s")
	b.ReportMetric(float64(r.SteadyCPUMillis)/1000, "pass-cpu-s")
	b.ReportMetric(float64(r.SteadyAllocBytes)/mib, "pass-alloc-MiB")
	if r.VmHWMKiB*1024 > memBudget {
		b.Errorf("peak RSS %.1f MiB with %d pods and %d routes, want ≤ %d MiB", float64(r.VmHWMKiB)/1024, r.Pods, r.Routes, memBudget/mib)
	}
}

func parseMemResult(t testing.TB, out []byte) memResult {
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "AGENTMEMORY "); ok {
			var r memResult
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	t.Fatalf("the memory child printed no result:\n%s", out)
	return memResult{}
}

// memPlanDir compiles the perf intent and writes win-1's plan with a
// route table of memNodes remote nodes, as compile writes plan
// directories (parts first).
func memPlanDir(t testing.TB) string {
	src, inv := writeIntent(t, t.TempDir(), memNodePods, 80)
	ex := compile(t, src, inv)
	p := withTable(ex.plans["win-1"], scaleNodes(memNodes))
	dir := filepath.Join(t.TempDir(), "plans")
	if _, err := compiler.WritePlans(dir, p.Cluster, []*plan.NodePlan{p}, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAgentMemoryChild is BenchmarkAgentMemory's child process; it does
// nothing unless the benchmark starts it.
func TestAgentMemoryChild(t *testing.T) {
	dir := os.Getenv("HNSPLAN_AGENT_MEMORY_DIR")
	if dir == "" {
		t.Skip("BenchmarkAgentMemory's child process")
	}
	if os.Getenv("HNSPLAN_AGENT_MEMORY_PROFILE") != "" {
		// Sample finely: at the default rate (one sample per 512 KiB) the
		// caches' small objects are counted to a few MiB at best.
		runtime.MemProfileRate = 4096
	}
	var r memResult
	var heapPeak uint64
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heapPeak = max(heapPeak, ms.HeapInuse)
		fmt.Printf("SAMPLE heap in use %.1f MiB, VmHWM %d KiB, RssAnon %d KiB, RssFile %d KiB, Sys %.1f MiB (stacks %.1f, GC %.1f, other %.1f, heap idle %.1f, released %.1f)\n", float64(ms.HeapInuse)/(1<<20), procStatus(t, "VmHWM"),
			procStatus(t, "RssAnon"), procStatus(t, "RssFile"), float64(ms.Sys)/(1<<20), float64(ms.StackSys)/(1<<20), float64(ms.GCSys)/(1<<20), float64(ms.OtherSys+ms.MSpanSys+ms.MCacheSys+ms.BuckHashSys)/(1<<20), float64(ms.HeapIdle)/(1<<20), float64(ms.HeapReleased)/(1<<20))
	}
	_, plans, ok, err := compiler.ReadPlanDir(dir)
	if err != nil || !ok || len(plans) != 1 {
		t.Fatalf("read %s: %d plans, %v, %v", dir, len(plans), ok, err)
	}
	p := plans[0]
	r.Routes = len(p.RemoteSubnetRoutes())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cs := streamingClientset{fake.NewClientset()}
	cs.stream("pods", memPods, func(i int) any { return memPod(i) })
	cs.stream("nodes", memNodes+1, func(i int) any { return memNode(i) })
	cs.stream("namespaces", 100, func(i int) any {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns-%02d", i), ResourceVersion: "1",
			Labels: map[string]string{"kubernetes.io/metadata.name": fmt.Sprintf("ns-%02d", i), "team": "bench"}}}
	})
	k := kube.New(cs, nil, "win-1")
	t0 := time.Now()
	k.Start(ctx)
	if !k.WaitForSync(ctx) {
		t.Fatal("the caches did not sync")
	}
	r.SyncMillis = time.Since(t0).Milliseconds()
	sample()
	r.SyncHWMKiB = procStatus(t, "VmHWM")
	runtime.GC()
	var msSync runtime.MemStats
	runtime.ReadMemStats(&msSync)
	r.SyncHeapInuse = msSync.HeapInuse

	// HNSPLAN_AGENT_MEMORY_PROFILE=dir: allocation profiles after the
	// sync, after each fresh pass and around the steady passes (compare
	// two with pprof -base).
	profile := func(name string) {
		if d := os.Getenv("HNSPLAN_AGENT_MEMORY_PROFILE"); d != "" {
			f, err := os.Create(filepath.Join(d, name))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	profile("sync.pprof")
	h := hnsmem.New()
	rec := &applier.Reconciler{HNS: h}
	rec.SetPlan(p)
	var clusters applier.ClusterCache // as the agent makes its passes' Clusters
	pass := func() applier.Status {
		c, ok := clusters.Of(k)
		if !ok {
			t.Fatal("the caches are not synced")
		}
		r.Pods = len(c.Pods)
		st, err := rec.Pass(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		sample()
		return st
	}
	cpu0 := cpuTime(t)
	pass() // network, routes, host endpoint
	fresh := cpuTime(t) - cpu0
	profile("routes.pprof")
	c, _ := clusters.Of(k) // as the next pass will: no second copy of the pods
	if n := cni(t, h, p, c); n != memNodePods {
		t.Fatalf("%d pods on win-1, want %d", n, memNodePods)
	}
	c = nil
	cpu0 = cpuTime(t)
	if st := pass(); st.Ops != memNodePods { // the pods' ACL lists
		t.Fatalf("%+v, want %d ACL lists", st, memNodePods)
	}
	r.FreshCPUMillis = (fresh + cpuTime(t) - cpu0).Milliseconds()
	profile("acls.pprof")
	if got := len(heldRoutes(t, h, p)); got != r.Routes || got != memNodes {
		t.Fatalf("HNS holds %d routes, the plan %d, want %d", got, r.Routes, memNodes)
	}
	h.ResetCalls()
	profile("before.pprof")
	defer profile("after.pprof")
	r.SteadyPasses = 5
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0 = cpuTime(t)
	for range r.SteadyPasses {
		if st := pass(); st.Ops != 0 {
			t.Fatalf("a steady pass: %+v", st)
		}
	}
	r.SteadyCPUMillis = (cpuTime(t) - cpu0).Milliseconds() / int64(r.SteadyPasses)
	runtime.ReadMemStats(&ms1)
	r.SteadyAllocBytes = (ms1.TotalAlloc - ms0.TotalAlloc) / uint64(r.SteadyPasses)
	r.Mutating = h.MutatingCalls()
	r.Nodes = len(k.Nodes())
	r.HeapPeak = heapPeak
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.HeapInuseAfterGC = ms.HeapInuse
	r.VmHWMKiB, r.VmRSSKiB = procStatus(t, "VmHWM"), procStatus(t, "VmRSS")
	out, _ := json.Marshal(r)
	fmt.Printf("AGENTMEMORY %s\n", out)
	runtime.KeepAlive(k)
	runtime.KeepAlive(h)
}

func procStatus(t testing.TB, field string) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			v, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// streamingClientset is a fake clientset that says it speaks watch-list,
// as a real API server does, so that client-go's reflectors stream the
// initial objects (each transformed as it arrives) instead of listing
// them all at once.
type streamingClientset struct{ *fake.Clientset }

func (streamingClientset) IsWatchListSemanticsUnSupported() bool { return false }

// stream answers watches of resource with n objects made by obj(i), sent
// one at a time and kept nowhere, then the bookmark that ends the initial
// events; lists (a reflector falling back) get them all at once.
func (cs streamingClientset) stream(resource string, n int, obj func(int) any) {
	cs.PrependWatchReactor(resource, func(clienttesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFake()
		go func() {
			for i := range n {
				w.Add(obj(i).(kruntime.Object))
			}
			end := obj(0).(kruntime.Object)
			m, _ := meta.Accessor(end)
			m.SetResourceVersion("2")
			m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
			w.Action(watch.Bookmark, end)
		}()
		return true, w, nil
	})
	cs.PrependReactor("list", resource, func(clienttesting.Action) (bool, kruntime.Object, error) {
		switch resource {
		case "pods":
			l := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "2"}}
			for i := range n {
				l.Items = append(l.Items, *obj(i).(*corev1.Pod))
			}
			return true, l, nil
		case "nodes":
			l := &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: "2"}}
			for i := range n {
				l.Items = append(l.Items, *obj(i).(*corev1.Node))
			}
			return true, l, nil
		default:
			l := &corev1.NamespaceList{ListMeta: metav1.ListMeta{ResourceVersion: "2"}}
			for i := range n {
				l.Items = append(l.Items, *obj(i).(*corev1.Namespace))
			}
			return true, l, nil
		}
	})
}

// memNode is node i of the cluster: win-1 for i == memNodes, else
// scaleNode(i)'s, with what a kubelet reports (images, conditions, node
// info) that the informer's transform drops.
func memNode(i int) *corev1.Node {
	name, addr, mac := "win-1", "10.240.0.21", "0E-2A-0A-F0-00-15"
	if i < memNodes {
		n := scaleNode(i)
		name, addr, mac = n.Node, n.Address.String(), n.TunnelMAC
	}
	var images []corev1.ContainerImage
	for j := range 30 {
		images = append(images, corev1.ContainerImage{Names: []string{fmt.Sprintf("registry.example.com/team/image-%d@sha256:%064x", j, j), fmt.Sprintf("registry.example.com/team/image-%d:v1.%d", j, j)}, SizeBytes: 123456789})
	}
	now := metav1.Now()
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1",
			Labels: map[string]string{"kubernetes.io/os": "windows", "kubernetes.io/hostname": name, "node.kubernetes.io/instance-type": "Standard_D8s_v5", "topology.kubernetes.io/zone": "westeurope-1"},
			Annotations: map[string]string{kube.AnnotationTunnelMAC: mac, kube.AnnotationTunnelAddr: addr,
				"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
		Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24", ProviderID: "azure:///subscriptions/x/resourceGroups/y/providers/Microsoft.Compute/virtualMachineScaleSets/z/virtualMachines/" + strconv.Itoa(i)},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}, {Type: corev1.NodeHostName, Address: name}},
			Images:    images,
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: now, LastTransitionTime: now, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
			},
			NodeInfo: corev1.NodeSystemInfo{KernelVersion: "10.0.20348.1000", OSImage: "Windows Server 2022 Datacenter", ContainerRuntimeVersion: "containerd://1.7.20", KubeletVersion: "v1.33.1", OperatingSystem: "windows", Architecture: "amd64"},
		},
	}
}

// memPod is pod i of the cluster, as a kubelet and controllers leave it
// (spec, status, annotations, an owner; managed fields aside, which the
// protobuf the agent asks for carries too but the fake does not make):
// the first memNodePods are win-1's, in its block (192.168.0.3 on, as
// writeIntent's inventory), in namespace shop with writeIntent's labels;
// the others are spread over the remote nodes and 100 namespaces, 500
// apps.
func memPod(i int) *corev1.Pod {
	app := fmt.Sprintf("svc-%d", i%500)
	ns, node := fmt.Sprintf("ns-%02d", i%100), scaleNode(i%memNodes).Node
	ip := netip.AddrFrom4([4]byte{10, byte(128 + i/65536), byte(i / 256), byte(i)})
	name := fmt.Sprintf("%s-7d9f8b6c4-%05d", app, i)
	labels := map[string]string{"app": app, "app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "shop",
		"pod-template-hash": "7d9f8b6c4", "tier": []string{"web", "api", "db"}[i%3], "version": "v1.4.2"}
	if i < memNodePods {
		app = "web"
		if i < 5 {
			app = "api"
		}
		ns, node, name = "shop", "win-1", fmt.Sprintf("p%03d", i)
		ip = netip.AddrFrom4([4]byte{192, 168, 0, byte(3 + i)})
		labels = map[string]string{"app": app}
	}
	ports := []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}
	if i%2 == 0 {
		ports = append(ports, corev1.ContainerPort{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP})
	}
	now := metav1.Now()
	yes := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, ResourceVersion: "1", Labels: labels,
			Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090", "kubectl.kubernetes.io/restartedAt": "2026-11-20T10:00:00Z"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-7d9f8b6c4",
				UID: "4d5e6f70-0000-4000-8000-000000000001", Controller: &yes, BlockOwnerDeletion: &yes}},
		},
		Spec: corev1.PodSpec{
			NodeName: node, ServiceAccountName: app, NodeSelector: map[string]string{"kubernetes.io/os": "windows"},
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example.com/shop/" + app + ":v1.4.2", Ports: ports,
				Args: []string{"--listen=:8080", "--metrics=:9090"},
				Env:  []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "REGION", Value: "westeurope"}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "C:\\config"}},
			}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip.String(), PodIPs: []corev1.PodIP{{IP: ip.String()}}, HostIP: "172.20.41.103", StartTime: &now,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Image: "registry.example.com/shop/" + app + ":v1.4.2",
				ContainerID: fmt.Sprintf("containerd://%064x", i), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}},
		},
	}
}
