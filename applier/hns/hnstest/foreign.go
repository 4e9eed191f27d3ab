package hnstest

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// checkForeign is the contract a policy-only agent relies on: on an
// L2Bridge network another program made (as Azure CNI makes "azure"), an
// endpoint with that program's policies — OutBoundNAT with exceptions,
// SDNRoute with NeedEncap, a policy type hnsplan does not know (L2Driver)
// — and ACLs of its own, an ACL op that keeps those ACLs and adds others
// changes no other policy of the endpoint, whatever the list: each reads
// back exactly as it read before the first write; the ACLs read back as
// hns.EquivalentACLs says HNS may echo them.
func checkForeign(s *suite, pl *place) error {
	n := &hns.Network{Name: pl.prefix + "-azure", Type: "L2Bridge", NonPersistent: s.o.NonPersistent,
		Subnets: []hns.Subnet{{Prefix: pl.subnet, Gateway: addr(pl.subnet, 1)}}}
	if err := s.apply(createNetwork(n)); err != nil {
		return err
	}
	owner := []plan.ACL{
		{Protocols: "6", Action: "Block", Direction: "Out", RemoteAddresses: "168.63.129.16/32", RemotePorts: "80", RuleType: "Switch", Priority: 200},
		{Protocols: "256", Action: "Allow", Direction: "In", RuleType: "Switch", Priority: 65500},
		{Protocols: "256", Action: "Allow", Direction: "Out", RuleType: "Switch", Priority: 65500},
	}
	policies := []plan.Policy{
		plan.NewPolicy(plan.OutBoundNAT{Exceptions: []netip.Prefix{netip.MustParsePrefix("10.224.0.0/12"), netip.MustParsePrefix("10.0.0.0/16")}}),
		plan.NewPolicy(plan.SDNRoute{DestinationPrefix: netip.MustParsePrefix("10.0.0.0/16"), NeedEncap: true}),
		{Type: "L2Driver", Settings: plan.Raw{Type: "L2Driver", JSON: []byte("{}")}},
	}
	for _, a := range owner {
		policies = append(policies, plan.NewPolicy(a))
	}
	e := &hns.Endpoint{Name: pl.prefix + "-eth0", Network: n.Name, IP: netip.PrefixFrom(addr(pl.subnet, 40), 24), Policies: policies}
	if err := s.apply(createEndpoint(e)); err != nil {
		return err
	}
	before, err := s.readEndpoint(e.Name)
	if err != nil || before == nil {
		return fmt.Errorf("read endpoint %s: %v", e.Name, err)
	}
	ours := []plan.ACL{
		{Id: "hnstest-host-in", Protocols: "256", Action: "Allow", Direction: "In", RuleType: "Host"},
		{Id: "hnstest-web", Protocols: "6", Action: "Allow", Direction: "In", LocalPorts: "80", RuleType: "Switch", Priority: 1000},
		{Id: "hnstest-end-in", Protocols: "256", Action: "Block", Direction: "In", RuleType: "Switch", Priority: 1001},
	}
	for _, step := range []struct {
		acls []plan.ACL
		when string
	}{
		{slices.Concat(owner, ours), "after adding the agent's ACLs to the owner's"},
		{slices.Concat(owner, ours[1:]), "after changing them"},
		{owner, "after removing the agent's"},
	} {
		if err := s.apply(hns.Op{Action: hns.Update, Kind: hns.KindACL, Name: e.Name, ID: before.ID, Network: n.Name, ACLs: step.acls}); err != nil {
			return err
		}
		got, err := s.readEndpoint(e.Name)
		if err != nil || got == nil {
			return fmt.Errorf("%s: read endpoint %s: %v", step.when, e.Name, err)
		}
		if !samePolicyList(before.Policies, got.Policies) {
			return fmt.Errorf("%s: the owner's policies changed: read %v before the first ACL write, %v now", step.when, describePolicies(before.Policies), describePolicies(got.Policies))
		}
		if !hns.EquivalentACLs(step.acls, got.ACLs) {
			return fmt.Errorf("%s: ACLs %v, want %v", step.when, got.ACLs, step.acls)
		}
		if got.IP != before.IP || got.Network != before.Network || got.ID != before.ID {
			return fmt.Errorf("%s: the endpoint itself changed: %+v, was %+v", step.when, got, before)
		}
	}
	return nil
}

// samePolicyList compares two policy lists as sets, each policy in full.
func samePolicyList(a, b []plan.Policy) bool {
	da, db := describePolicies(a), describePolicies(b)
	slices.Sort(da)
	slices.Sort(db)
	return slices.Equal(da, db)
}

func describePolicies(ps []plan.Policy) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = fmt.Sprintf("%s %+v", p.Type, p.Settings)
		if r, ok := p.Settings.(plan.Raw); ok {
			out[i] = p.Type + " " + string(r.JSON)
		}
	}
	return out
}
