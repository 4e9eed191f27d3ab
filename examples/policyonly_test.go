package examples_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/hns/hnswin"
	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// TestPolicyOnlyExamples: each example whose Windows network a CNI owns,
// compiled with its inventory, applied with the agent's one pass (what
// `hnsplan-agent apply --once` runs) over an in-memory HNS seeded with the
// example's capture of a node as that CNI leaves it: it programs the
// compiled ACLs on the pod endpoints — one call each, the owner's ACLs
// that hnsplan keeps beside them — and changes no network, endpoint,
// route, load balancer or other policy; a second pass makes no call.
func TestPolicyOnlyExamples(t *testing.T) {
	for _, tc := range []struct{ example, node, capture, owner string }{
		{"aks-azure-cni", "akswin000000", "aks-azure-cni-akswin000000.capture.json", "azure-cni"},
		{"eks-vpc-cni", "ip-192-168-96-45.us-west-2.compute.internal", "eks-vpc-cni-ip-192-168-96-45.capture.json", "vpc-cni"},
		{"flannel-vxlan", "win-1", "flannel-vxlan-win-1.capture.json", "flanneld"},
	} {
		t.Run(tc.example, func(t *testing.T) {
			res, findings, err := compiler.Build(tc.example, compiler.Options{Inventory: []string{filepath.Join("inventory", tc.example+".yaml")}})
			if err != nil {
				t.Fatal(err)
			}
			if findings.HasErrors() || !res.Compiled() {
				t.Fatalf("compile: %v", findings)
			}
			var p *plan.NodePlan
			for _, q := range res.Plans {
				if q.Node == tc.node {
					p = q
				}
			}
			if p == nil || p.PolicyOnly == nil || p.PolicyOnly.Owner != tc.owner {
				t.Fatalf("the plan of %s: %+v, want a policy-only plan of %s", tc.node, p, tc.owner)
			}
			if _, err := plan.Encode(p); err != nil {
				t.Fatal(err)
			}
			if err := plan.Validate(p); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join("inventory", tc.capture))
			if err != nil {
				t.Fatal(err)
			}
			seed, err := hnswin.DecodeCapture(b)
			if err != nil {
				t.Fatal(err)
			}
			m := hnsmem.New()
			if err := m.Seed(seed); err != nil {
				t.Fatal(err)
			}
			before := m.Held()
			agent, err := applier.NewAgent(applier.Config{Node: tc.node, HNS: m, StateDir: t.TempDir(), HostRoutes: replace.NewMemRoutes(),
				Plans: &planwatch.File{Path: "plan.json", Node: tc.node}})
			if err != nil {
				t.Fatal(err)
			}
			m.ResetCalls()
			st, err := agent.Once(context.Background(), p, applier.OnceOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if st.State != "converged" || len(st.Pending) > 0 || len(st.Notes) > 0 {
				t.Fatalf("status %+v", st)
			}
			if got := m.MutatingCalls(); got != len(p.Endpoints) {
				t.Errorf("%d mutating calls, want one per pod endpoint (%d)", got, len(p.Endpoints))
			}
			for _, c := range m.Calls() {
				if c.Err == nil && c.Method != "hcnModifyEndpoint" && c.Method != "hcnEnumerateNetworks" && c.Method != "hcnEnumerateEndpoints" && c.Method != "hcnEnumerateLoadBalancers" {
					t.Errorf("call %s: a policy-only pass modifies endpoints' ACLs only", c)
				}
			}
			after := m.Held()
			checkOnlyACLs(t, p, before, after)

			m.ResetCalls()
			if st, err := agent.Once(context.Background(), p, applier.OnceOptions{}); err != nil || st.Ops != 0 || m.MutatingCalls() != 0 {
				t.Errorf("second pass: %d ops, %d mutating calls, %v; want none", st.Ops, m.MutatingCalls(), err)
			}
		})
	}
}

// checkOnlyACLs compares HNS after the pass with HNS before: the same
// networks (routes, policies, everything), load balancers and endpoints
// but for the ACLs of the plan's pods' endpoints, which hold the plan's
// ACLs and the owner's that hnsplan keeps.
func checkOnlyACLs(t *testing.T, p *plan.NodePlan, before, after *hns.State) {
	t.Helper()
	if !reflect.DeepEqual(before.Networks, after.Networks) {
		t.Errorf("networks changed:\n%v\nwere\n%v", after.Networks, before.Networks)
	}
	if !reflect.DeepEqual(before.LoadBalancers, after.LoadBalancers) {
		t.Errorf("load balancers changed")
	}
	if len(before.Endpoints) != len(after.Endpoints) {
		t.Fatalf("%d endpoints, were %d", len(after.Endpoints), len(before.Endpoints))
	}
	want := map[string][]plan.ACL{}
	for _, e := range p.Endpoints {
		var acls []plan.ACL
		for _, pol := range e.Policies {
			acls = append(acls, pol.Settings.(plan.ACL))
		}
		want[e.IpConfigurations[0].IpAddress.String()] = acls
	}
	programmed := 0
	for i := range before.Endpoints {
		b, a := before.Endpoints[i], after.Endpoints[i]
		acls, mine := want[b.IP.Addr().String()]
		mine = mine && !b.Remote
		bACLs, aACLs := b.ACLs, a.ACLs
		b.ACLs, a.ACLs = nil, nil
		if !reflect.DeepEqual(b, a) {
			t.Errorf("endpoint %s changed but its ACLs:\n%+v\nwas\n%+v", b.Name, a, b)
		}
		if !mine {
			if !slices.Equal(bACLs, aACLs) {
				t.Errorf("endpoint %s is not a pod's of the plan and its ACLs changed", b.Name)
			}
			continue
		}
		programmed++
		keep, _ := hns.SplitForeignACLs(bACLs)
		if !hns.EquivalentACLs(hns.CanonicalACLs(slices.Concat(keep, acls)), aACLs) {
			t.Errorf("endpoint %s holds %v, want the owner's %v and the plan's %v", b.Name, aACLs, keep, acls)
		}
	}
	if programmed != len(p.Endpoints) {
		t.Errorf("%d of the plan's %d pod endpoints found in HNS", programmed, len(p.Endpoints))
	}
}
