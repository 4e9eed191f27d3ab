package applier_test

import (
	"context"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/hns/hnswin"
	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

const (
	aksExample   = "../examples/aks-azure-cni"
	aksInventory = "../examples/inventory/aks-azure-cni.yaml"
	aksCapture   = "../examples/inventory/aks-azure-cni-akswin000000.capture.json"
	aksNode      = "akswin000000"
)

// aksHNS is an in-memory HNS as Azure CNI leaves akswin000000 (the
// example's capture).
func aksHNS(t testing.TB, opts ...hnsmem.Option) *hnsmem.HNS {
	t.Helper()
	b, err := os.ReadFile(aksCapture)
	if err != nil {
		t.Fatal(err)
	}
	st, err := hnswin.DecodeCapture(b)
	if err != nil {
		t.Fatal(err)
	}
	h := hnsmem.New(opts...)
	if err := h.Seed(st); err != nil {
		t.Fatal(err)
	}
	h.ResetCalls()
	return h
}

// aclsOf is the endpoint at address a: its ACLs, and how many hold a.
func aclsOf(h *hnsmem.HNS, a string) ([]plan.ACL, int) {
	var acls []plan.ACL
	n := 0
	for _, e := range h.Held().Endpoints {
		if e.IP.Addr().String() == a && !e.Remote {
			acls, n = e.ACLs, n+1
		}
	}
	return acls, n
}

// planACLs is the compiled ACL list of the plan's pod at address a.
func planACLs(p *plan.NodePlan, a string) []plan.ACL {
	for _, e := range p.Endpoints {
		if e.IpConfigurations[0].IpAddress.String() == a {
			var out []plan.ACL
			for _, pol := range e.Policies {
				out = append(out, pol.Settings.(plan.ACL))
			}
			return out
		}
	}
	return nil
}

// TestPolicyOnlyPass: with the live cluster, a policy-only pass renders
// the node's pods' ACLs as the compiler did, writes each pod endpoint's
// list once (its own plus AKS's Blocks and its Allows after 65000), then
// nothing; it never collects an endpoint no pod explains, replaces
// nothing, and says which pods have no endpoint.
func TestPolicyOnlyPass(t *testing.T) {
	ex := compile(t, aksExample, aksInventory)
	p := ex.plans[aksNode]
	ex.cluster.NodeAddr = netip.MustParseAddr("10.224.0.33") // the Node's InternalIP
	h := aksHNS(t)
	r := &applier.Reconciler{HNS: h, GC: &applier.GC{Grace: time.Nanosecond, Reachable: func(context.Context) bool { return true }}}
	r.SetPlan(p)
	ctx := context.Background()
	st, err := r.Pass(ctx, ex.cluster)
	if err != nil || st.State != kube.StateConverged || st.Ops != 2 || len(st.Pending) > 0 {
		t.Fatalf("first pass: %+v, %v; want 2 ACL writes, converged", st, err)
	}
	aks := []plan.ACL{
		{Protocols: "6", Action: "Block", Direction: "Out", RemoteAddresses: "168.63.129.16/32", RemotePorts: "80", RuleType: "Switch", Priority: 200},
		{Protocols: "6", Action: "Block", Direction: "Out", RemoteAddresses: "168.63.129.16/32", RemotePorts: "32526", RuleType: "Switch", Priority: 200},
		{Action: "Allow", Direction: "In", Priority: 65500},
		{Action: "Allow", Direction: "Out", Priority: 65500},
	}
	for _, a := range []string{"10.224.0.40", "10.224.0.41"} {
		got, _ := aclsOf(h, a)
		if want := hns.CanonicalACLs(slices.Concat(aks, planACLs(p, a))); !hns.EquivalentACLs(want, got) {
			t.Errorf("%s holds %v, want AKS's and the plan's %v", a, got, want)
		}
	}
	for _, c := range h.Calls() {
		if c.Method != "hcnModifyEndpoint" && !strings.HasPrefix(c.Method, "hcnEnumerate") {
			t.Errorf("call %s", c)
		}
	}

	// The storefront pod is deleted; its endpoint stays until Azure CNI
	// deletes it: the agent never does, however long it waits.
	ex.cluster.Pods = slices.DeleteFunc(slices.Clone(ex.cluster.Pods), func(pod *acl.Pod) bool { return pod.Name == "storefront-7c9f4d8b5-2xkqp" })
	// The orders API's ingress no longer names the storefront's address.
	if st, err = r.Pass(ctx, ex.cluster); err != nil || st.Ops != 1 {
		t.Fatalf("pass after the delete: %+v, %v; want the orders API's list written", st, err)
	}
	h.ResetCalls()
	for range 3 {
		if st, err = r.Pass(ctx, ex.cluster); err != nil || st.Ops != 0 {
			t.Fatalf("later pass: %+v, %v; want nothing to do", st, err)
		}
	}
	if _, n := aclsOf(h, "10.224.0.40"); n != 1 || h.MutatingCalls() != 0 {
		t.Errorf("the endpoint of a deleted pod: %d there, %d mutating calls; want it left to its CNI", n, h.MutatingCalls())
	}

	// A new pod whose endpoint the CNI has not made yet is pending.
	ex.cluster.Pods = append(ex.cluster.Pods, &acl.Pod{Namespace: "shop", Name: "storefront-new", IP: netip.MustParseAddr("10.224.0.42"), Labels: map[string]string{"app": "storefront"}})
	ex.cluster.PodNode = func(pod *acl.Pod) string {
		if pod.Name == "storefront-new" || strings.HasPrefix(pod.Name, "orders-api-84d6c9f7b-vt5rj") {
			return aksNode
		}
		return ""
	}
	if st, err = r.Pass(ctx, ex.cluster); err != nil || len(st.Pending) != 1 || !strings.Contains(st.Pending[0], "pod shop/storefront-new (10.224.0.42): no endpoint on the networks \"azure.*\" yet") {
		t.Errorf("pending %q, %v", st.Pending, err)
	}
}

// TestPolicyOnlySharedAddress: a stale endpoint holding a live pod's
// address (Azure/AKS#5653) gets the pod's ACLs beside the pod's own, and
// the status names both.
func TestPolicyOnlySharedAddress(t *testing.T) {
	ex := compile(t, aksExample, aksInventory)
	p := ex.plans[aksNode]
	h := aksHNS(t, hnsmem.WithQuirks(hnsmem.QuirkDuplicateEndpointIPs))
	if err := h.AddPodEndpoint("azure", "0badcafe-eth0", netip.MustParsePrefix("10.224.0.40/16"), "", nil); err != nil {
		t.Fatal(err)
	}
	r := &applier.Reconciler{HNS: h}
	r.SetPlan(p)
	st, err := r.Pass(context.Background(), ex.cluster)
	if err != nil || st.Ops != 3 {
		t.Fatalf("%+v, %v; want 3 ACL writes", st, err)
	}
	for _, e := range h.Held().Endpoints {
		if e.IP.Addr().String() == "10.224.0.40" && !hns.EquivalentACLs(hns.CanonicalACLs(slices.Concat(keepOf(t, e.Name, h), planACLs(p, "10.224.0.40"))), e.ACLs) {
			t.Errorf("%s: %v", e.Name, e.ACLs)
		}
	}
	if len(st.Notes) != 1 || !strings.Contains(st.Notes[0], "address 10.224.0.40 of pod shop/storefront-7c9f4d8b5-2xkqp is held by 2 endpoints (0badcafe-eth0, ") {
		t.Errorf("notes %q", st.Notes)
	}
}

// keepOf is what the agent keeps of the owner's ACLs of the endpoint
// named name as the seed made it.
func keepOf(t *testing.T, name string, h *hnsmem.HNS) []plan.ACL {
	t.Helper()
	if name == "0badcafe-eth0" {
		return nil // made without ACLs
	}
	b, _ := os.ReadFile(aksCapture)
	st, err := hnswin.DecodeCapture(b)
	if err != nil {
		t.Fatal(err)
	}
	keep, _ := hns.SplitForeignACLs(st.Endpoint(name).ACLs)
	return keep
}

// TestPolicyOnlyCompetitors: Azure NPM's Windows agent and Calico's on the
// node stop every write; flanneld does not on a flannel-vxlan node, where
// it owns the network beside the agent.
func TestPolicyOnlyCompetitors(t *testing.T) {
	ex := compile(t, aksExample, aksInventory)
	p := ex.plans[aksNode]
	for _, c := range []kube.Competitor{kube.AzureNPM, kube.CalicoNodeWindows, kube.Flanneld} {
		h := aksHNS(t)
		r := &applier.Reconciler{HNS: h}
		r.SetPlan(p)
		cl := *ex.cluster
		cl.Competitors = []applier.Competing{{What: c, Pod: "kube-system/x"}}
		st, err := r.Pass(context.Background(), &cl)
		if err != nil || st.State != kube.StateConflict || h.MutatingCalls() != 0 || !strings.Contains(st.LastError, c.String()) {
			t.Errorf("%s on the node: %+v, %v, %d calls; want a conflict and nothing written", c, st, err, h.MutatingCalls())
		}
	}
	fl := compile(t, "../examples/flannel-vxlan", "../examples/inventory/flannel-vxlan.yaml")
	r := &applier.Reconciler{HNS: hnsmem.New()}
	r.SetPlan(fl.plans["win-1"])
	cl := *fl.cluster
	cl.Competitors = []applier.Competing{{What: kube.Flanneld, Pod: "kube-flannel/kube-flannel-ds-windows-amd64-q2x9z"}}
	if st, err := r.Pass(context.Background(), &cl); err != nil || st.State == kube.StateConflict {
		t.Errorf("flanneld beside a flannel-vxlan plan: %+v, %v; want it the agent's partner", st, err)
	}
}

// TestPolicyOnlyReplaceJournal: a replace journalled for an earlier plan
// that owned the network is not run by a policy-only plan: the pass
// fails, saying what to do, and writes nothing.
func TestPolicyOnlyReplaceJournal(t *testing.T) {
	ex := compile(t, aksExample, aksInventory)
	h := aksHNS(t)
	r := &applier.Reconciler{HNS: h, Replacer: inProgress{}}
	r.SetPlan(ex.plans[aksNode])
	st, err := r.Pass(context.Background(), ex.cluster)
	if err == nil || !strings.Contains(err.Error(), "a network replace begun for an earlier plan is journalled") || h.MutatingCalls() != 0 {
		t.Errorf("%+v, %v, %d calls", st, err, h.MutatingCalls())
	}
}

type inProgress struct{}

func (inProgress) Replace(context.Context, *plan.NodePlan, *hns.Want, string) (kube.NodeState, error) {
	panic("a policy-only pass ran a replace")
}
func (inProgress) InProgress() bool { return true }

// TestAgentPollsEndpoints: the CNI remakes a pod's endpoint on the same
// address (a sandbox restarted): nothing changes in the cluster, and the
// agent's endpoint poll finds the new endpoint and programs it.
func TestAgentPollsEndpoints(t *testing.T) {
	res, findings, err := compiler.Build(aksExample, compiler.Options{Inventory: []string{aksInventory}})
	if err != nil || findings.HasErrors() {
		t.Fatal(err, findings)
	}
	if _, err := compiler.EncodePlans(res.Plans); err != nil {
		t.Fatal(err)
	}
	var p *plan.NodePlan
	for _, q := range res.Plans {
		if q.Node == aksNode {
			p = q
		}
	}
	var pods []kube.Pod
	for _, ip := range res.Intent.Inventory.Pods {
		if ip.Spec.HostNetwork || ip.Status.PodIP == "" {
			continue
		}
		kp := kube.Pod{Namespace: ip.Namespace, Name: ip.Name, Node: ip.Spec.NodeName, Labels: ip.Labels, Phase: string(ip.Status.Phase),
			IPs: []netip.Addr{netip.MustParseAddr(ip.Status.PodIP)}}
		for _, c := range ip.Spec.Containers {
			for _, port := range c.Ports {
				kp.Ports = append(kp.Ports, kube.Port{Name: port.Name, Port: port.ContainerPort, Protocol: string(port.Protocol)})
			}
		}
		pods = append(pods, kp)
	}
	h := aksHNS(t)
	k := &fakeKube{synced: true, node: kube.Node{Name: aksNode, Addresses: []kube.NodeAddress{{Type: "InternalIP", Addr: netip.MustParseAddr("10.224.0.33")}}},
		pods: pods, changes: make(chan struct{})}
	src := make(chanSource, 1)
	cfg := agentConfig(t, h, src)
	cfg.Node, cfg.Kube, cfg.EndpointPoll = aksNode, k, 10*time.Millisecond
	a, err := applier.NewAgent(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	src <- p
	programmed := func(name string) bool {
		e := h.Held().Endpoint(name)
		return e != nil && slices.ContainsFunc(e.ACLs, func(x plan.ACL) bool { return x.Id == "tier-default-end-in-0" })
	}
	old := h.Held().Endpoint("dce91caa-eth0") // the storefront's
	waitFor(t, "the first pass", func() bool { return programmed(old.Name) })

	if err := h.RemoveEndpoint(old.Name); err != nil {
		t.Fatal(err)
	}
	if err := h.AddPodEndpoint("azure", "7e57c0de-eth0", old.IP, "", old.Policies); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the remade endpoint's ACLs", func() bool { return programmed("7e57c0de-eth0") })
	cancel()
	<-done
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
