package hns

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// The ACLs AKS's conflist gives every Azure CNI endpoint (AgentBaker
// Set-AzureCNIConfig; hnswin/testdata/real/08-endpoint-v2-azurecni-aks.json).
var aksACLs = []plan.ACL{
	{Protocols: "6", Action: "Block", Direction: "Out", RemoteAddresses: "168.63.129.16/32", RemotePorts: "80", RuleType: "Switch", Priority: 200},
	{Protocols: "6", Action: "Block", Direction: "Out", RemoteAddresses: "168.63.129.16/32", RemotePorts: "32526", RuleType: "Switch", Priority: 200},
	{Protocols: "256", Action: "Allow", Direction: "In", RuleType: "Switch", Priority: 65500},
	{Protocols: "256", Action: "Allow", Direction: "Out", RuleType: "Switch", Priority: 65500},
}

// podPolicy is the list the agent renders for the web pod.
var podPolicy = []plan.ACL{
	{Id: "host-in", Protocols: "256", Action: "Allow", Direction: "In", RuleType: "Host"},
	{Id: "allow-host-to-endpoint", Protocols: "256", Action: "Allow", Direction: "In", RemoteAddresses: "10.224.0.33/32", RuleType: "Switch", Priority: 900},
	{Id: "knp.web.allow-http-in0-0", Protocols: "6", Action: "Allow", Direction: "In", LocalPorts: "80", RuleType: "Switch", Priority: 1000},
	{Id: "tier-default-end-in-0", Protocols: "256", Action: "Block", Direction: "In", RuleType: "Switch", Priority: 1001},
	{Id: "host-out", Protocols: "256", Action: "Allow", Direction: "Out", RuleType: "Host"},
	{Id: "profile-out-0", Protocols: "256", Action: "Allow", Direction: "Out", RuleType: "Switch", Priority: 1000},
}

func matcher(t *testing.T, patterns ...string) *plan.NetworkMatcher {
	t.Helper()
	m, err := plan.NewNetworkMatcher(patterns)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// aksNode is a node as Azure CNI leaves it: the network azure, two pod
// endpoints with the CNI's policies and AKS's ACLs, kube-proxy's remote
// endpoint, and a network the plan does not match.
func aksNode() *State {
	cni := []plan.Policy{
		plan.NewPolicy(plan.OutBoundNAT{Exceptions: []netip.Prefix{pfx("10.224.0.0/12")}}),
		plan.NewPolicy(plan.SDNRoute{DestinationPrefix: pfx("10.0.0.0/16"), NeedEncap: true}),
		{Type: "L2Driver", Settings: plan.Raw{Type: "L2Driver", JSON: []byte("{}")}},
	}
	return &State{
		Networks: []Network{
			{Name: "azure", Type: "L2Bridge", Subnets: []Subnet{{Prefix: pfx("10.224.0.0/16"), Gateway: addr("10.224.0.1")}}},
			{Name: "nat", Type: "NAT"},
		},
		Endpoints: []Endpoint{
			{ID: "e1", Name: "d0946d95-eth0", Network: "azure", IP: pfx("10.224.0.40/16"), Policies: cni, ACLs: slices.Clone(aksACLs)},
			{ID: "e2", Name: "5a1b2c3d-eth0", Network: "azure", IP: pfx("10.224.0.41/16"), Policies: cni, ACLs: slices.Clone(aksACLs)},
			{ID: "e3", Name: "remote", Network: "azure", IP: pfx("10.224.0.99/16"), Remote: true},
			{ID: "e4", Name: "nat-ep", Network: "nat", IP: pfx("172.29.0.5/20")},
		},
	}
}

func foreignWant(t *testing.T) *Want {
	return &Want{Foreign: matcher(t, "azure.*"),
		PodACLs:  map[netip.Addr][]plan.ACL{addr("10.224.0.40"): CanonicalACLs(podPolicy), addr("10.224.0.41"): {}},
		PodNames: map[netip.Addr]string{addr("10.224.0.40"): "web/web-1", addr("10.224.0.41"): "web/idle"}}
}

// TestDiffForeign: on a network another program owns the agent writes the
// pod endpoints' ACLs only: its list plus the owner's ACLs that it keeps;
// nothing for an endpoint whose list already is that, none for remote
// endpoints or endpoints of other networks, never a network or endpoint op.
func TestDiffForeign(t *testing.T) {
	have, want := aksNode(), foreignWant(t)
	got := Diff(have, want)
	if len(got) != 1 {
		t.Fatalf("ops %v, want one ACL op (the idle pod's list is the CNI's already)", got)
	}
	op := got[0]
	if op.Kind != KindACL || op.Action != Update || op.Name != "d0946d95-eth0" || op.ID != "e1" || op.Network != "azure" {
		t.Fatalf("op %s", op)
	}
	wantACLs := CanonicalACLs(slices.Concat(aksACLs, podPolicy))
	if diff := cmp.Diff(wantACLs, op.ACLs); diff != "" {
		t.Errorf("ACLs (-want +got):\n%s", diff)
	}
	// HNS now holds that: nothing to do.
	have.Endpoints[0].ACLs = slices.Clone(op.ACLs)
	slices.Reverse(have.Endpoints[0].ACLs) // a set
	if again := Diff(have, want); len(again) != 0 {
		t.Errorf("after the write: %v, want none", again)
	}
	// The policy goes: the agent's ACLs go, AKS's stay.
	want.PodACLs[addr("10.224.0.40")] = []plan.ACL{}
	got = Diff(have, want)
	if len(got) != 1 || !slices.Equal(got[0].ACLs, CanonicalACLs(aksACLs)) {
		t.Errorf("without a policy: %v, want AKS's ACLs back alone", got)
	}
	// A network the patterns do not match is not the agent's.
	want.Foreign = matcher(t, "vpc.*")
	if got := Diff(have, want); len(got) != 0 {
		t.Errorf("networks vpc.*: %v, want no op on azure", got)
	}
}

// TestSplitForeignACLs: which of another writer's ACLs the agent keeps.
func TestSplitForeignACLs(t *testing.T) {
	npmAllow := plan.ACL{Id: "azure-acl-web-allow", Protocols: "6", Action: "Allow", Direction: "In", RuleType: "Switch", Priority: 222}
	npmNode := plan.ACL{Id: "azure-acl-node", Protocols: "256", Action: "Allow", Direction: "In", RemoteAddresses: "10.224.0.33", RuleType: "Switch", Priority: 201}
	npmBlock := plan.ACL{Id: "azure-acl-web-block", Protocols: "256", Action: "Block", Direction: "In", RuleType: "Switch", Priority: 3000}
	hostAt1000 := plan.ACL{Protocols: "", Action: "Allow", Direction: "In", RuleType: "Host", Priority: 1000} // our host rule, read back with HNS's default
	hostBlock := plan.ACL{Protocols: "6", Action: "Block", Direction: "Out", RuleType: "Host", Priority: 5}
	read := slices.Concat(aksACLs, []plan.ACL{npmAllow, npmNode, npmBlock, hostAt1000, hostBlock}, podPolicy)
	keep, drop := SplitForeignACLs(read)
	if diff := cmp.Diff(slices.Concat(aksACLs, []plan.ACL{hostBlock}), keep); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]plan.ACL{npmAllow, npmNode}, drop); diff != "" {
		t.Errorf("dropped (-want +got):\n%s", diff)
	}

	// Diff says what it drops.
	have, want := aksNode(), foreignWant(t)
	have.Endpoints[1].ACLs = append(have.Endpoints[1].ACLs, npmAllow)
	got := Diff(have, want)
	var reason string
	for _, op := range got {
		if op.Name == "5a1b2c3d-eth0" {
			reason = op.Reason
			if !slices.Equal(op.ACLs, CanonicalACLs(aksACLs)) {
				t.Errorf("ACLs %v, want AKS's alone", op.ACLs)
			}
		}
	}
	if !strings.Contains(reason, "drops 1 Allow ACL(s) of another writer that would decide before the policy: azure-acl-web-allow (In priority 222)") {
		t.Errorf("reason %q", reason)
	}
}

// TestForeignSharedAddress: two endpoints holding one pod's address (a
// stale one left by a CNI) both get its ACLs, by ID, and are reported.
func TestForeignSharedAddress(t *testing.T) {
	have, want := aksNode(), foreignWant(t)
	stale := have.Endpoints[0]
	stale.ID, stale.Name = "e9", "0badcafe-eth0"
	have.Endpoints = append(have.Endpoints, stale)
	var ids []string
	for _, op := range Diff(have, want) {
		ids = append(ids, op.ID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"e1", "e9"}) {
		t.Errorf("ACL ops on %v, want e1 and e9", ids)
	}
	got := SharedAddresses(have, want)
	if names := got[addr("10.224.0.40")]; len(got) != 1 || len(names) != 2 {
		t.Errorf("shared %v", got)
	}
}
