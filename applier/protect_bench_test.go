package applier_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/hns/hnswin"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// BenchmarkTimeToProtect is how long a new pod of a policy-only node is
// unprotected: from the CNI creating its endpoint (with no ACL of
// hnsplan's) to the agent having programmed the endpoint's ACL list, for
// a burst of 100 pods started at once on akswin000000 of the AKS example.
// The agent runs as the service does: informers over a Kubernetes API (the
// client-go fake, so the API server's own latency is not in it), its
// work-queue loop and its endpoint poll; each pod's status (its address)
// reaches the API at the moment its endpoint exists, so the kubelet's own
// delay in reporting it, the same for every policy engine, is not in it
// either. HNS takes hns per call (hnsmem.Latency): 0 measures the agent's
// own work; 20 ms is a guess at a real ACL write, which docs/aks.md's
// figures say how to confirm, with the agent's writers (4 lists at once)
// and with one at a time (an HNS that serialises its calls). It reports
// the 50th and 99th percentile and the maximum, in milliseconds, over
// every pod of every burst.
func BenchmarkTimeToProtect(b *testing.B) {
	for _, c := range []struct {
		latency time.Duration
		writers int
	}{{0, applier.DefaultACLWriters}, {20 * time.Millisecond, applier.DefaultACLWriters}, {20 * time.Millisecond, 1}} {
		b.Run(fmt.Sprintf("hns=%s/writers=%d", c.latency, c.writers), func(b *testing.B) { timeToProtect(b, c.latency, c.writers, 100) })
	}
}

// protectRecorder is the agent's HNS, timing the first ACL write of each
// endpoint (by name) after its endpoint was made.
type protectRecorder struct {
	*hnsmem.HNS
	mu   sync.Mutex
	done map[string]time.Time
}

func (r *protectRecorder) Apply(ctx context.Context, op hns.Op) error {
	err := r.HNS.Apply(ctx, op)
	if err == nil && op.Kind == hns.KindACL && len(op.ACLs) > 0 {
		r.mu.Lock()
		if _, ok := r.done[op.Name]; !ok {
			r.done[op.Name] = time.Now()
		}
		r.mu.Unlock()
	}
	return err
}

// Endpoints keeps the agent's endpoint poll as cheap as with hnsmem alone.
func (r *protectRecorder) Endpoints(ctx context.Context) ([]hns.Endpoint, error) {
	return r.HNS.Endpoints(ctx)
}

func (r *protectRecorder) programmed(name string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.done[name]
	return t, ok
}

func timeToProtect(b *testing.B, latency time.Duration, writers, burst int) {
	res, findings, err := compiler.Build(aksExample, compiler.Options{Inventory: []string{aksInventory}})
	if err != nil || findings.HasErrors() {
		b.Fatal(err, findings)
	}
	if _, err := compiler.EncodePlans(res.Plans); err != nil {
		b.Fatal(err)
	}
	var p *plan.NodePlan
	for _, q := range res.Plans {
		if q.Node == aksNode {
			p = q
		}
	}
	capture, err := os.ReadFile(aksCapture)
	if err != nil {
		b.Fatal(err)
	}
	seed, err := hnswin.DecodeCapture(capture)
	if err != nil {
		b.Fatal(err)
	}
	cniPolicies := seed.Endpoints[0].Policies // Azure CNI's, with AKS's ACLs
	for _, a := range seed.Endpoints[0].ACLs {
		cniPolicies = append(slices.Clone(cniPolicies), plan.NewPolicy(a))
	}
	seed.Endpoints = nil // a node before the burst: the network alone

	var all []time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		h := hnsmem.New(hnsmem.Latency(latency))
		if err := h.Seed(seed); err != nil {
			b.Fatal(err)
		}
		rec := &protectRecorder{HNS: h, done: map[string]time.Time{}}
		cs := fake.NewClientset(inventoryObjects(res.Intent)...)
		k := kube.New(cs, nil, aksNode)
		src := make(chanSource, 1)
		a, err := applier.NewAgent(applier.Config{Node: aksNode, HNS: rec, Plans: src, StateDir: b.TempDir(), HostRoutes: replace.NewMemRoutes(),
			Listen: "127.0.0.1:0", Kube: k, EndpointPoll: applier.DefaultEndpointPoll, ACLWriters: writers})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		src <- p
		deadline := time.Now().Add(time.Minute)
		for a.Status().State != kube.StateConverged {
			if time.Now().After(deadline) {
				b.Fatalf("the agent did not converge before the burst: %+v", a.Status())
			}
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()

		// The burst: the CNI makes each pod's endpoint, and the pod's
		// address reaches the API at once.
		made := make([]time.Time, burst)
		names := make([]string, burst)
		for j := range burst {
			ip := netip.AddrFrom4([4]byte{10, 224, 1 + byte(j/200), byte(10 + j%200)})
			names[j] = fmt.Sprintf("%08x-eth0", 0xb0000000+i*1000+j)
			made[j] = time.Now()
			if err := h.AddPodEndpoint("azure", names[j], netip.PrefixFrom(ip, 16), "", cniPolicies); err != nil {
				b.Fatal(err)
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("storefront-burst-%d", j), Labels: map[string]string{"app": "storefront"}},
				Spec:   corev1.PodSpec{NodeName: aksNode, Containers: []corev1.Container{{Name: "iis", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip.String(), PodIPs: []corev1.PodIP{{IP: ip.String()}}}}
			if _, err := cs.CoreV1().Pods("shop").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		for j, name := range names {
			for {
				if t, ok := rec.programmed(name); ok {
					all = append(all, t.Sub(made[j]))
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("endpoint %s of the burst was not programmed within a minute: %+v", name, a.Status())
				}
				time.Sleep(100 * time.Microsecond)
			}
		}
		b.StopTimer()
		cancel()
		<-done
		b.StartTimer()
	}
	slices.Sort(all)
	pct := func(q float64) float64 { return float64(all[int(q*float64(len(all)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(pct(1), "max-ms")
}

// inventoryObjects are the intent's inventory as API objects: the cluster
// the fake API server holds.
func inventoryObjects(in *intent.Intent) []runtime.Object {
	var out []runtime.Object
	for i := range in.Inventory.Nodes {
		out = append(out, in.Inventory.Nodes[i].Node.DeepCopy())
	}
	for i := range in.Inventory.Namespaces {
		out = append(out, in.Inventory.Namespaces[i].Namespace.DeepCopy())
	}
	for i := range in.Inventory.Services {
		out = append(out, in.Inventory.Services[i].Service.DeepCopy())
	}
	for i := range in.Inventory.Pods {
		out = append(out, in.Inventory.Pods[i].CoreV1())
	}
	return out
}
