package hnsmem_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"testing"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// TestACLWritesKeepForeignPolicies is the property a policy-only agent
// stands on: over random nodes as a CNI leaves them (endpoints with
// random policies of the CNI's, known types and unknown ones, and ACLs of
// its own at any priority but 0) and random ACL lists of the agent's,
// under every quirk, the writes Diff makes
//
//   - change no policy of an endpoint but its ACLs (held, before any
//     read-side quirk, exactly as the CNI made them);
//   - keep every ACL of the owner's that SplitForeignACLs keeps, and
//     leave none of those it drops;
//   - leave HNS holding the agent's lists (as EquivalentACLs reads them),
//     so that the next Diff makes no op;
//   - touch no endpoint of another network, no remote endpoint, no
//     endpoint whose address is no pod's, and create or delete nothing.
func TestACLWritesKeepForeignPolicies(t *testing.T) {
	ctx := context.Background()
	configs := [][]hnsmem.Quirk{nil}
	for _, q := range hnsmem.Quirks {
		configs = append(configs, []hnsmem.Quirk{q})
	}
	configs = append(configs, hnsmem.Quirks)
	for _, qs := range configs {
		name := "no-quirk"
		if len(qs) == 1 {
			name = string(qs[0])
		} else if len(qs) > 1 {
			name = "all-quirks"
		}
		t.Run(name, func(t *testing.T) {
			writes := 0
			defer func() {
				if writes == 0 {
					t.Error("no ACL write at all: the property was not exercised")
				}
			}()
			for seed := range uint64(60) {
				r := rand.New(rand.NewPCG(seed, 0x5eed))
				m := hnsmem.New(hnsmem.WithQuirks(qs...))
				want := foreignNode(t, r, m)
				before := m.Held()
				for pass := range 3 {
					have, err := m.Snapshot(ctx)
					if err != nil {
						t.Fatal(err)
					}
					ops := hns.Diff(have, want)
					if pass > 0 && len(ops) > 0 {
						t.Fatalf("seed %d: pass %d still makes %d ops, the first %s", seed, pass, len(ops), ops[0])
					}
					writes += len(ops)
					for _, op := range ops {
						if op.Kind != hns.KindACL || op.Action != hns.Update {
							t.Fatalf("seed %d: op %s: a policy-only Diff makes ACL updates only", seed, op)
						}
						if err := m.Apply(ctx, op); err != nil {
							t.Fatalf("seed %d: %s: %v", seed, op, err)
						}
					}
				}
				checkForeignKept(t, seed, before, m.Held(), want)
				// Another random list for the same pods: a policy change.
				for a := range want.PodACLs {
					want.PodACLs[a] = randomOwnACLs(r)
				}
				have, _ := m.Snapshot(ctx)
				for _, op := range hns.Diff(have, want) {
					if err := m.Apply(ctx, op); err != nil {
						t.Fatalf("seed %d: %s: %v", seed, op, err)
					}
				}
				checkForeignKept(t, seed, before, m.Held(), want)
			}
		})
	}
}

// foreignNode seeds m as a CNI leaves a node: the network azure with 1 to
// 6 pod endpoints, a remote endpoint and one of another network, and
// returns what the agent wants of them (a random list for most pods).
func foreignNode(t *testing.T, r *rand.Rand, m *hnsmem.HNS) *hns.Want {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(m.AddNetwork(hns.Network{Name: "azure", Type: "L2Bridge", Subnets: []hns.Subnet{{Prefix: netip.MustParsePrefix("10.224.0.0/16"), Gateway: netip.MustParseAddr("10.224.0.1")}}}))
	must(m.AddNetwork(hns.Network{Name: "other", Type: "L2Bridge", Subnets: []hns.Subnet{{Prefix: netip.MustParsePrefix("10.9.0.0/24"), Gateway: netip.MustParseAddr("10.9.0.1")}}}))
	matcher, err := plan.NewNetworkMatcher([]string{"azure.*"})
	must(err)
	want := &hns.Want{Foreign: matcher, PodACLs: map[netip.Addr][]plan.ACL{}, PodNames: map[netip.Addr]string{}}
	n := 1 + r.IntN(6)
	for i := range n {
		ip := netip.AddrFrom4([4]byte{10, 224, 0, byte(10 + i)})
		must(m.AddPodEndpoint("azure", fmt.Sprintf("%08x-eth0", r.Uint32()), netip.PrefixFrom(ip, 16), "", randomCNIPolicies(r)))
		if r.IntN(5) > 0 { // the others are no pod's: left alone
			want.PodACLs[ip], want.PodNames[ip] = randomOwnACLs(r), fmt.Sprintf("ns/pod-%d", i)
		}
	}
	must(m.AddRemoteEndpoint("azure", "remote", netip.MustParsePrefix("10.224.9.9/16"), "", randomCNIPolicies(r)))
	must(m.AddPodEndpoint("other", "other-ep", netip.MustParsePrefix("10.9.0.10/24"), "", randomCNIPolicies(r)))
	want.PodACLs[netip.MustParseAddr("10.9.0.10")] = randomOwnACLs(r) // on a network the plan does not match
	return want
}

// randomCNIPolicies are a CNI's policies: some of OutBoundNAT, SDNRoute,
// ProviderAddress and types hnsplan does not know, and ACLs of its own
// outside and inside hnsplan's priorities (never 0: a CNI's ACLs carry
// one).
func randomCNIPolicies(r *rand.Rand) []plan.Policy {
	var out []plan.Policy
	if r.IntN(2) == 0 {
		out = append(out, plan.NewPolicy(plan.OutBoundNAT{Exceptions: []netip.Prefix{netip.MustParsePrefix("10.224.0.0/12"), netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(r.IntN(200)), 0, 0}), 16)}}))
	}
	if r.IntN(2) == 0 {
		out = append(out, plan.NewPolicy(plan.SDNRoute{DestinationPrefix: netip.MustParsePrefix("10.0.0.0/16"), NeedEncap: r.IntN(2) == 0}))
	}
	if r.IntN(3) == 0 {
		out = append(out, plan.NewPolicy(plan.ProviderAddress{ProviderAddress: netip.MustParseAddr("10.224.0.33")}))
	}
	raws := []plan.Raw{{Type: "L2Driver", JSON: []byte("{}")}, {Type: "EncapOverhead", JSON: []byte(`{"Overhead":50}`)},
		{Type: "PortMapping", JSON: []byte(`{"Protocol":6,"InternalPort":80,"ExternalPort":` + strconv.Itoa(30000+r.IntN(999)) + `}`)}}
	for _, raw := range raws {
		if r.IntN(2) == 0 {
			out = append(out, plan.Policy{Type: raw.Type, Settings: raw})
		}
	}
	prios := []uint16{100, 200, 201, 222, 899, 3000, 65001, 65498, 65500, 65535}
	for range r.IntN(5) {
		a := plan.ACL{Protocols: []string{"6", "17", "256"}[r.IntN(3)], Action: []string{"Allow", "Block"}[r.IntN(2)], Direction: []string{"In", "Out"}[r.IntN(2)],
			RuleType: "Switch", Priority: prios[r.IntN(len(prios))]}
		if a.Protocols != "256" && r.IntN(2) == 0 {
			a.RemotePorts = strconv.Itoa(1 + r.IntN(65535))
		}
		if r.IntN(2) == 0 {
			a.RemoteAddresses = "168.63.129.16/32"
		}
		if r.IntN(3) == 0 {
			a.Id = fmt.Sprintf("azure-acl-%d", r.IntN(1000))
		}
		out = append(out, plan.NewPolicy(a))
	}
	return out
}

// randomOwnACLs is a list as the renderer makes them: the host rules at 0,
// allow-host-to-endpoint at 900, then rules from 1000 in each direction.
func randomOwnACLs(r *rand.Rand) []plan.ACL {
	if r.IntN(6) == 0 {
		return []plan.ACL{} // no policy: the agent's ACLs go
	}
	out := []plan.ACL{
		{Id: "host-in", Protocols: "256", Action: "Allow", Direction: "In", RuleType: "Host"},
		{Id: "host-out", Protocols: "256", Action: "Allow", Direction: "Out", RuleType: "Host"},
		{Id: "allow-host-to-endpoint", Protocols: "256", Action: "Allow", Direction: "In", RemoteAddresses: "10.224.0.33/32", RuleType: "Switch", Priority: 900},
	}
	for _, dir := range []string{"In", "Out"} {
		n := r.IntN(4)
		for i := range n {
			out = append(out, plan.ACL{Id: fmt.Sprintf("p-%s%d-0", dir, i), Protocols: []string{"6", "17"}[r.IntN(2)], Action: []string{"Allow", "Block"}[r.IntN(2)],
				Direction: dir, RemoteAddresses: fmt.Sprintf("10.%d.0.0/16", r.IntN(255)), RemotePorts: strconv.Itoa(1 + r.IntN(65535)), RuleType: "Switch", Priority: uint16(1000 + i)})
		}
		out = append(out, plan.ACL{Id: "end-" + dir, Protocols: "256", Action: []string{"Allow", "Block"}[r.IntN(2)], Direction: dir, RuleType: "Switch", Priority: uint16(1000 + n)})
	}
	return out
}

// checkForeignKept compares HNS after the agent's writes (after) with
// HNS as the CNI left it (before), endpoint by endpoint (by ID).
func checkForeignKept(t *testing.T, seed uint64, before, after *hns.State, want *hns.Want) {
	t.Helper()
	if len(after.Endpoints) != len(before.Endpoints) || len(after.Networks) != len(before.Networks) {
		t.Fatalf("seed %d: %d networks and %d endpoints, were %d and %d", seed, len(after.Networks), len(after.Endpoints), len(before.Networks), len(before.Endpoints))
	}
	for i := range before.Endpoints {
		b := &before.Endpoints[i]
		a := after.Endpoints[slices.IndexFunc(after.Endpoints, func(e hns.Endpoint) bool { return e.ID == b.ID })]
		if !slices.EqualFunc(b.Policies, a.Policies, func(x, y plan.Policy) bool {
			return plan.Describe(x) == plan.Describe(y) && fmt.Sprint(x) == fmt.Sprint(y)
		}) {
			t.Fatalf("seed %d: endpoint %s: its other policies changed:\n  before %v\n  after  %v", seed, b.Name, b.Policies, a.Policies)
		}
		ours, programmed := want.PodACLs[b.IP.Addr()]
		if b.Remote || b.Network != "azure" || !programmed {
			if !slices.Equal(hns.CanonicalACLs(b.ACLs), hns.CanonicalACLs(a.ACLs)) {
				t.Fatalf("seed %d: endpoint %s is not the agent's to program, and its ACLs changed: %v, were %v", seed, b.Name, a.ACLs, b.ACLs)
			}
			continue
		}
		keep, drop := ownersACLs(b.ACLs)
		for _, k := range keep {
			if !slices.ContainsFunc(a.ACLs, func(x plan.ACL) bool { return sameRule(k, x) }) {
				t.Fatalf("seed %d: endpoint %s lost the owner's ACL %+v: holds %v", seed, b.Name, k, a.ACLs)
			}
		}
		for _, d := range drop {
			if slices.ContainsFunc(a.ACLs, func(x plan.ACL) bool { return sameRule(d, x) }) {
				t.Fatalf("seed %d: endpoint %s keeps an Allow that decides before the policy: %+v", seed, b.Name, d)
			}
		}
		if !hns.EquivalentACLs(hns.CanonicalACLs(slices.Concat(keep, ours)), a.ACLs) {
			t.Fatalf("seed %d: endpoint %s holds %v, want the owner's %v and the agent's %v", seed, b.Name, a.ACLs, keep, ours)
		}
	}
}

// sameRule says two ACLs are one rule, up to what a read-side quirk
// changes of the owner's ACL on its way through the agent (an Id HNS
// does not read back, any protocol spelled "" or "256"): the agent sends
// back what it reads, and cannot keep what HNS does not show it.
func sameRule(a, b plan.ACL) bool {
	anyProto := func(p string) string {
		if p == "256" {
			return ""
		}
		return p
	}
	return a.Action == b.Action && a.Direction == b.Direction && a.RuleType == b.RuleType && a.Priority == b.Priority &&
		anyProto(a.Protocols) == anyProto(b.Protocols) && a.LocalAddresses == b.LocalAddresses && a.RemoteAddresses == b.RemoteAddresses &&
		a.LocalPorts == b.LocalPorts && a.RemotePorts == b.RemotePorts && (a.Id == b.Id || a.Id == "" || b.Id == "")
}

// ownersACLs is the rule the agent keeps an owner's ACLs by, written here
// apart from hns.SplitForeignACLs so that the property checks it: the
// CNI's ACLs in this test are never at hnsplan's priorities 900..65000
// but 3000 (a leftover of Azure NPM's, which the agent replaces); of the
// others, a Block stays, an Allow after 65000 stays (it never decides), an
// Allow before 900 goes (it would decide before the policy).
func ownersACLs(acls []plan.ACL) (keep, drop []plan.ACL) {
	for _, a := range acls {
		switch {
		case a.Priority == 3000:
		case a.Action == "Block", a.Priority > 65000:
			keep = append(keep, a)
		case a.Priority < 900:
			drop = append(drop, a)
		}
	}
	return keep, drop
}
