//go:build integration

package applier_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/internal/kubetest"
)

// protectWindow is how long a pod endpoint may stay without its pod's
// ACLs in this test, from the CNI making it: the agent's own window,
// measured by BenchmarkTimeToProtect (p99 21 ms at HNS calls of 0 ms), plus
// the real API server's write and watch latency, and a loaded 2-core CI
// machine. The test logs what it measured.
const protectWindow = 5 * time.Second

// TestIntegrationPolicyOnlyAKS: an AKS-shaped node against a real
// kube-apiserver (no Calico CRDs: the BlockAffinity cache reads as empty):
// Azure CNI's network "azure" and, pod by pod, its endpoints; the agent,
// policy only. Pods are created in bursts and some deleted; a freed
// address is reused by a pod of another workload; the agent is stopped,
// pods come and go, and a new agent starts on the same state directory.
// Throughout: every pod endpoint carries its own pod's ACLs within
// protectWindow of the pod's address reaching the API server, the
// endpoint of a deleted pod is left to its CNI, and the agent writes
// nothing but ACL lists: the network, the endpoints and their other
// policies, kube-proxy's remote endpoint and the NAT network are as the
// CNI and kube-proxy made them.
func TestIntegrationPolicyOnlyAKS(t *testing.T) {
	cfg := kubetest.Config(t)
	cs := kubetest.Client(t, cfg)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	node := kubetest.UniqueName("akswin")
	shop, orders, ingress := kubetest.UniqueName("shop"), kubetest.UniqueName("orders"), kubetest.UniqueName("ingress")
	p := compileAKS(t, node, shop, orders, ingress)

	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node,
		Labels: map[string]string{"kubernetes.io/os": "windows"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer cs.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{})
	for _, ns := range []string{shop, orders, ingress} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{"kubernetes.io/metadata.name": ns}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	}

	// Azure CNI's network, the NAT network, kube-proxy's remote endpoint.
	h := aksHNS(t)
	for _, e := range h.Held().Endpoints {
		if err := h.RemoveEndpoint(e.Name); err != nil { // the capture's pods are another run's
			t.Fatal(err)
		}
	}
	if err := h.AddRemoteEndpoint("azure", "remote-ep", netip.MustParsePrefix("10.224.9.9/16"), "02-11-0A-E0-09-09",
		[]plan.Policy{plan.NewPolicy(plan.ProviderAddress{ProviderAddress: netip.MustParseAddr("10.224.0.64")})}); err != nil {
		t.Fatal(err)
	}
	cniPolicies := []plan.Policy{
		plan.NewPolicy(plan.OutBoundNAT{Exceptions: []netip.Prefix{netip.MustParsePrefix("10.224.0.0/16"), netip.MustParsePrefix("10.224.0.0/12")}}),
		plan.NewPolicy(plan.SDNRoute{DestinationPrefix: netip.MustParsePrefix("10.0.0.0/16"), NeedEncap: true}),
		plan.NewPolicy(plan.ACL{Protocols: "6", Action: "Block", Direction: "Out", RemoteAddresses: "168.63.129.16/32", RemotePorts: "80", RuleType: "Switch", Priority: 200}),
		plan.NewPolicy(plan.ACL{Action: "Allow", Direction: "In", Priority: 65500}),
		plan.NewPolicy(plan.ACL{Action: "Allow", Direction: "Out", Priority: 65500}),
	}
	rec := &protectRecorder{HNS: h, done: map[string]time.Time{}}
	before := h.Held()

	w := &aksWorld{t: t, ctx: ctx, cs: cs, h: h, rec: rec, node: node, cni: cniPolicies, made: map[string]time.Time{}}
	// The ingress controller, on a Linux node: the storefront's source.
	w.report(ingress, "ingress-nginx-controller", "ingress-nginx", "aks-nodepool1-x", netip.MustParseAddr("10.224.0.20"))
	state := t.TempDir()
	start := func() (stop func()) {
		plans := make(chanSource, 1)
		plans <- p
		a, err := applier.NewAgent(applier.Config{Node: node, HNS: rec, Plans: plans, StateDir: state, HostRoutes: replace.NewMemRoutes(),
			Listen: "127.0.0.1:0", Kube: kube.New(cs, dyn, node), Reachable: func(context.Context) bool { return true },
			EndpointPoll: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stopRun := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- a.Run(runCtx) }()
		return func() {
			stopRun()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		}
	}
	stop := start()

	// A burst of 20 storefront pods and 10 orders pods.
	for i := range 20 {
		w.start(shop, fmt.Sprintf("storefront-%02d", i), "storefront", w.ip(i))
	}
	for i := range 10 {
		w.start(orders, fmt.Sprintf("orders-api-%02d", i), "orders-api", w.ip(20+i))
	}
	w.checkAll("the first burst")

	// Five storefront pods go: the CNI deletes their endpoints, then the
	// pods are gone. One pod goes while its endpoint stays (a DEL that
	// never reached the CNI): the agent leaves that endpoint alone.
	for i := range 5 {
		w.stop(shop, fmt.Sprintf("storefront-%02d", i), true)
	}
	leaked := w.stop(shop, "storefront-05", false)
	// An orders pod takes a freed address, with a new endpoint.
	w.start(orders, "orders-api-reuse", "orders-api", w.ip(0))
	w.checkAll("after deletes and an address reused")

	// The agent stops; pods come and go; a new agent starts.
	stop()
	for i := range 5 {
		w.start(shop, fmt.Sprintf("storefront-late-%02d", i), "storefront", w.ip(40+i))
	}
	w.stop(orders, "orders-api-09", true)
	restarted := time.Now()
	stop = start()
	w.checkAll("after the agent restarted")
	defer stop()
	if e := h.Held().Endpoint(leaked); e == nil {
		t.Errorf("the endpoint %s of a pod deleted without a DEL was deleted: a policy-only agent never deletes the CNI's endpoints", leaked)
	}

	// Nothing but ACL lists was written.
	after := h.Held()
	for i, n := range before.Networks {
		if !slices.EqualFunc([]hns.Network{n}, []hns.Network{after.Networks[i]}, func(a, b hns.Network) bool { return fmt.Sprint(a) == fmt.Sprint(b) }) {
			t.Errorf("network %s changed: %+v, was %+v", n.Name, after.Networks[i], n)
		}
	}
	if r := after.Endpoint("remote-ep"); r == nil || len(r.ACLs) != 0 || len(r.Policies) != 1 {
		t.Errorf("kube-proxy's remote endpoint: %+v", r)
	}
	for _, c := range h.Calls() {
		if c.Err == nil && c.Method != "hcnModifyEndpoint" && !strings.HasPrefix(c.Method, "hcnEnumerate") && c.Method != "GET /globals/version" {
			t.Errorf("a call that is no ACL write: %s", c)
		}
	}
	w.logWindows(restarted)
}

// compileAKS compiles the AKS example for node, with its namespaces shop,
// orders and ingress-nginx renamed (a run's own), and returns node's plan.
func compileAKS(t *testing.T, node, shop, orders, ingress string) *plan.NodePlan {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"cluster.cue", "policies/namespaces.yaml", "policies/shop.yaml", "policies/orders.yaml", "policies/platform.yaml"} {
		b, err := os.ReadFile(filepath.Join(aksExample, f))
		if err != nil {
			t.Fatal(err)
		}
		// Names that contain the namespaces' names stay as they are.
		s := strings.NewReplacer("orders-api", "orders-api", "shop-aks", "shop-aks", "akswin000000", node,
			"ingress-nginx", ingress, "shop", shop, "orders", orders).Replace(string(b))
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, findings, err := compiler.Build(dir, compiler.Options{})
	if err != nil || findings.HasErrors() || !res.Compiled() {
		t.Fatalf("compile: %v %v", err, findings)
	}
	if _, err := compiler.EncodePlans(res.Plans); err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Plans {
		if p.Node == node {
			return p
		}
	}
	t.Fatalf("no plan for %s", node)
	return nil
}

// aksWorld is the node's CNI and kubelet: it makes pods' endpoints and
// reports their addresses.
type aksWorld struct {
	t    *testing.T
	ctx  context.Context
	cs   kubernetes.Interface
	h    *hnsmem.HNS
	rec  *protectRecorder
	node string
	cni  []plan.Policy

	mu      sync.Mutex
	n       int
	made    map[string]time.Time // endpoint -> when the CNI made it
	timed   map[string]bool      // the endpoints whose window is in windows
	pods    map[string]podRecord // endpoint -> its pod
	windows []time.Duration
}

type podRecord struct {
	ns, name, app string
	ip            netip.Addr
	deleted       bool
}

func (w *aksWorld) ip(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 224, 2, byte(10 + i)}) }

// report is a pod of another node reporting its address.
func (w *aksWorld) report(ns, name, app, node string, ip netip.Addr) {
	w.t.Helper()
	pod, err := w.cs.CoreV1().Pods(ns).Create(w.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app.kubernetes.io/name": app}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip.String(), PodIPs: []corev1.PodIP{{IP: ip.String()}}}
	if _, err := w.cs.CoreV1().Pods(ns).UpdateStatus(w.ctx, pod, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// start is a pod starting: the CNI makes its endpoint, then the kubelet
// reports its address.
func (w *aksWorld) start(ns, name, app string, ip netip.Addr) {
	w.t.Helper()
	w.mu.Lock()
	w.n++
	ep := fmt.Sprintf("%08x-eth0", 0xa0000000+w.n)
	w.mu.Unlock()
	made := time.Now()
	if err := w.h.AddPodEndpoint("azure", ep, netip.PrefixFrom(ip, 16), "", w.cni); err != nil {
		w.t.Fatal(err)
	}
	pod, err := w.cs.CoreV1().Pods(ns).Create(w.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{NodeName: w.node, Containers: []corev1.Container{{Name: "c", Image: "x", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip.String(), PodIPs: []corev1.PodIP{{IP: ip.String()}}}
	if _, err := w.cs.CoreV1().Pods(ns).UpdateStatus(w.ctx, pod, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	w.mu.Lock()
	if w.pods == nil {
		w.pods = map[string]podRecord{}
	}
	w.made[ep], w.pods[ep] = made, podRecord{ns: ns, name: name, app: app, ip: ip}
	w.mu.Unlock()
}

// stop is a pod going: with del, the CNI deletes its endpoint first. It
// returns the endpoint's name.
func (w *aksWorld) stop(ns, name string, del bool) string {
	w.t.Helper()
	w.mu.Lock()
	var ep string
	for e, p := range w.pods {
		if p.ns == ns && p.name == name && !p.deleted {
			ep = e
		}
	}
	r := w.pods[ep]
	r.deleted = true
	w.pods[ep] = r
	w.mu.Unlock()
	if ep == "" {
		w.t.Fatalf("no pod %s/%s", ns, name)
	}
	if del {
		if err := w.h.RemoveEndpoint(ep); err != nil {
			w.t.Fatal(err)
		}
	}
	zero := int64(0)
	if err := w.cs.CoreV1().Pods(ns).Delete(w.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		w.t.Fatal(err)
	}
	return ep
}

// marker is an ACL Id only the lists of pods of app have.
func marker(app string) string {
	return map[string]string{"storefront": "storefront-from-ingress-in0.0-0", "orders-api": "orders-api-in0.0-0"}[app]
}

// checkAll waits until every live pod's endpoint carries its pod's ACLs
// (its app's marker, not another's) and AKS's kept Block and Allows, and
// the CNI's other policies unchanged, each within protectWindow of its
// pod's address reaching the API server.
func (w *aksWorld) checkAll(when string) {
	w.t.Helper()
	w.mu.Lock()
	pods := make(map[string]podRecord, len(w.pods))
	for k, v := range w.pods {
		pods[k] = v
	}
	w.mu.Unlock()
	deadline := time.Now().Add(protectWindow + 10*time.Second)
	for ep, p := range pods {
		if p.deleted {
			continue
		}
		for {
			e := w.h.Held().Endpoint(ep)
			if e != nil && holds(e.ACLs, p.app) {
				w.mu.Lock()
				t, ok := w.rec.programmed(ep)
				if !ok {
					w.t.Errorf("%s: %s (%s/%s) holds its ACLs, written by no one the recorder saw", when, ep, p.ns, p.name)
				} else if d := t.Sub(w.made[ep]); d > protectWindow {
					w.t.Errorf("%s: %s (%s/%s) waited %s for its ACLs, more than %s", when, ep, p.ns, p.name, d, protectWindow)
				} else if !w.timed[ep] {
					if w.timed == nil {
						w.timed = map[string]bool{}
					}
					w.timed[ep] = true
					w.windows = append(w.windows, d)
				}
				w.mu.Unlock()
				if !slices.EqualFunc(e.Policies, w.cni[:2], func(a, b plan.Policy) bool { return plan.Describe(a) == plan.Describe(b) }) {
					w.t.Errorf("%s: %s's other policies changed: %v", when, ep, e.Policies)
				}
				break
			}
			if time.Now().After(deadline) {
				w.t.Fatalf("%s: endpoint %s of pod %s/%s (app %s) holds %v, not its pod's ACLs", when, ep, p.ns, p.name, p.app, e)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// holds says acls are a list of app's pods, with AKS's ACLs kept.
func holds(acls []plan.ACL, app string) bool {
	has := func(id string) bool {
		return slices.ContainsFunc(acls, func(a plan.ACL) bool { return strings.HasSuffix(a.Id, id) })
	}
	other := "orders-api"
	if app == "orders-api" {
		other = "storefront"
	}
	aks := slices.ContainsFunc(acls, func(a plan.ACL) bool { return a.Priority == 200 && a.Action == "Block" }) &&
		slices.ContainsFunc(acls, func(a plan.ACL) bool { return a.Priority == 65500 && a.Direction == "In" })
	return has(marker(app)) && !has(marker(other)) && aks
}

// logWindows logs the windows measured.
func (w *aksWorld) logWindows(restarted time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.windows) == 0 {
		w.t.Error("no window measured")
		return
	}
	slices.Sort(w.windows)
	q := func(f float64) time.Duration { return w.windows[int(f*float64(len(w.windows)-1))] }
	w.t.Logf("time to protect, from the CNI making a pod's endpoint to its ACLs, over %d pod endpoints against the real API server: p50 %s, p99 %s, max %s (those made while the agent was down count from then, before the restart at %s)",
		len(w.windows), q(0.5), q(0.99), q(1), restarted.Format(time.StampMilli))
}
