//go:build windows && integration

// These tests change the HNS of the host they run on. They need an
// elevated shell on Windows Server 2019 or later with the Containers
// feature, and create only objects named hnsplan-it-<random>, which they
// delete. Run them with:
//
//	go test -tags integration -run Integration ./applier/hns/hnswin/

package hnswin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"reflect"
	"testing"

	"github.com/Microsoft/hcsshim"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

func newClient(t *testing.T, opts ...Option) *Client {
	t.Helper()
	c, err := New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f, err := c.Features(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("HNS %s: %+v", f.Version, f)
	if !f.RemoteRoute {
		t.Skip("this HNS has no RemoteSubnetRoute policies")
	}
	return c
}

func apply(t *testing.T, c *Client, op hns.Op) {
	t.Helper()
	if err := c.Apply(context.Background(), op); err != nil {
		t.Fatalf("Apply(%s): %v", op, err)
	}
}

func snapshot(t *testing.T, c *Client) *hns.State {
	t.Helper()
	st, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return st
}

// overlay creates an Overlay network with VNI 4096 on prefix and deletes
// it when the test ends.
func overlay(t *testing.T, c *Client, prefix string) *hns.Network {
	t.Helper()
	p := netip.MustParsePrefix(prefix)
	n := &hns.Network{
		Name:          fmt.Sprintf("hnsplan-it-%08x", rand.Uint32()),
		Type:          "Overlay",
		Subnets:       []hns.Subnet{{Prefix: p, Gateway: p.Addr().Next(), VNI: 4096}},
		VXLANPort:     4789,
		HostRoute:     true,
		NonPersistent: true, // gone after a reboot, should cleanup not run
	}
	apply(t, c, hns.Op{Action: hns.Create, Kind: hns.KindNetwork, Name: n.Name, NetworkSpec: n})
	t.Cleanup(func() {
		op := hns.Op{Action: hns.Delete, Kind: hns.KindNetwork, Name: n.Name}
		if err := c.Apply(context.Background(), op); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return n
}

// endpoint creates e and deletes it when the test ends.
func endpoint(t *testing.T, c *Client, e *hns.Endpoint) {
	t.Helper()
	apply(t, c, hns.Op{Action: hns.Create, Kind: hns.KindEndpoint, Name: e.Name, Network: e.Network, EndpointSpec: e})
	t.Cleanup(func() {
		op := hns.Op{Action: hns.Delete, Kind: hns.KindEndpoint, Name: e.Name, Network: e.Network}
		if err := c.Apply(context.Background(), op); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
}

func TestIntegrationOverlay(t *testing.T) {
	c := newClient(t)
	n := overlay(t, c, "10.250.1.0/24")

	got := snapshot(t, c).Network(n.Name)
	if got == nil {
		t.Fatalf("network %s is not in the snapshot", n.Name)
	}
	if got.Type != n.Type || !reflect.DeepEqual(got.Subnets, n.Subnets) || got.VXLANPort != 4789 || !got.HostRoute || !got.NonPersistent {
		t.Errorf("network read back as %+v, want %+v", *got, *n)
	}
	t.Logf("HNS added provider address %s, DR MAC %s", got.ProviderAddress, got.DRMAC)

	// The host endpoint, with a policy an ACL update must keep.
	nat := plan.NewPolicy(plan.OutBoundNAT{Exceptions: []netip.Prefix{netip.MustParsePrefix("10.250.0.0/16")}})
	e := &hns.Endpoint{
		Name:     n.Name + "_host",
		Network:  n.Name,
		IP:       netip.MustParsePrefix("10.250.1.2/24"),
		MAC:      "0E-2A-0A-FA-01-02",
		Policies: []plan.Policy{nat},
	}
	endpoint(t, c, e)
	ge := snapshot(t, c).Endpoint(e.Name)
	if ge == nil {
		t.Fatalf("endpoint %s is not in the snapshot", e.Name)
	}
	if ge.Network != n.Name || ge.IP != e.IP || ge.MAC != e.MAC || !reflect.DeepEqual(ge.Policies, e.Policies) || len(ge.ACLs) != 0 {
		t.Errorf("endpoint read back as %+v, want %+v", *ge, *e)
	}

	t.Run("RemoteSubnetRoute", func(t *testing.T) {
		r := hns.RemoteRoute{Prefix: netip.MustParsePrefix("10.250.2.0/24"), VNI: 4096,
			ProviderAddress: netip.MustParseAddr("192.0.2.2"), DRMAC: "0E-2A-C0-00-02-02"}
		add := hns.Op{Action: hns.Create, Kind: hns.KindRoute, Name: r.Prefix.String(), Network: n.Name, RouteSpec: &r}
		apply(t, c, add)
		apply(t, c, add) // a retry changes nothing
		if got := snapshot(t, c).Network(n.Name).RemoteRoutes; !reflect.DeepEqual(got, []hns.RemoteRoute{r}) {
			t.Errorf("routes after adding %+v: %+v", r, got)
		}
		apply(t, c, hns.Op{Action: hns.Delete, Kind: hns.KindRoute, Name: r.Prefix.String(), Network: n.Name, RouteSpec: &r})
		if got := snapshot(t, c).Network(n.Name).RemoteRoutes; len(got) != 0 {
			t.Errorf("routes after removing it: %+v", got)
		}

		big := r
		big.VNI = 70000
		err := c.Apply(context.Background(), hns.Op{Action: hns.Create, Kind: hns.KindRoute, Name: big.Prefix.String(), Network: n.Name, RouteSpec: &big})
		if hns.Code(err) != hns.CodeInvalidPolicy {
			t.Errorf("route with VNI 70000: %v, want code %#x", err, hns.CodeInvalidPolicy)
		}
	})

	// An ACL update in each form keeps the endpoint's other policies.
	for _, form := range []ACLForm{ACLFormV2, ACLFormV1} {
		t.Run("ACL-"+string(form), func(t *testing.T) {
			c := newClient(t, WithACLForm(form))
			// Every field set, so that HNS has no default to fill in.
			acls := []plan.ACL{
				{Id: "it-allow-web", Protocols: "6", Action: "Allow", Direction: "In", LocalAddresses: "10.250.1.2",
					RemoteAddresses: "10.250.0.0/16", LocalPorts: "80,443", RuleType: "Switch", Priority: 200},
				{Id: "it-deny-in", Protocols: "256", Action: "Block", Direction: "In", RuleType: "Switch", Priority: 65500},
				{Id: "it-allow-out", Protocols: "17", Action: "Allow", Direction: "Out", RemotePorts: "53", RuleType: "Switch", Priority: 300},
			}
			apply(t, c, hns.Op{Action: hns.Update, Kind: hns.KindACL, Name: e.Name, Network: n.Name, ACLs: acls})
			got := snapshot(t, c).Endpoint(e.Name)
			if !reflect.DeepEqual(hns.CanonicalACLs(got.ACLs), hns.CanonicalACLs(acls)) {
				t.Errorf("ACLs read back:\n got %+v\nwant %+v", hns.CanonicalACLs(got.ACLs), hns.CanonicalACLs(acls))
			}
			if !reflect.DeepEqual(got.Policies, e.Policies) {
				t.Errorf("the ACL update lost the other policies: %+v, want %+v", got.Policies, e.Policies)
			}

			apply(t, c, hns.Op{Action: hns.Update, Kind: hns.KindACL, Name: e.Name, Network: n.Name, ACLs: nil})
			got = snapshot(t, c).Endpoint(e.Name)
			if len(got.ACLs) != 0 || !reflect.DeepEqual(got.Policies, e.Policies) {
				t.Errorf("after clearing the ACLs: ACLs %+v, policies %+v", got.ACLs, got.Policies)
			}
		})
	}

	// An endpoint another CNI made through HNS v1, with flat v1 policies
	// (Calico's vxlan pod endpoint: PA, OutBoundNAT ExceptionList, ROUTE),
	// keeps them through an ACL update in each form: what the package
	// documentation says is unverified until this runs on a host.
	t.Run("ACL-on-v1-endpoint", func(t *testing.T) {
		pa := got.ProviderAddress
		if !pa.IsValid() {
			t.Skip("HNS gave the network no provider address")
		}
		v1ep := v1PodEndpoint(t, n.Name, netip.MustParseAddr("10.250.1.9"), pa)
		before := readV1Policies(t, v1ep.Id)
		for _, form := range []ACLForm{ACLFormV2, ACLFormV1} {
			c := newClient(t, WithACLForm(form))
			acls := []plan.ACL{{Id: "it-deny-in-" + string(form), Protocols: "256", Action: "Block", Direction: "In", RuleType: "Switch", Priority: 65500}}
			op := hns.Op{Action: hns.Update, Kind: hns.KindACL, Name: v1ep.Name, ID: v1ep.Id, Network: n.Name, ACLs: acls}
			if err := c.Apply(context.Background(), op); err != nil {
				t.Errorf("%s: Apply(%s): %v", form, op, err) // the other form still runs
				continue
			}
			after := readV1Policies(t, v1ep.Id)
			keptBefore, _ := keptPolicies(before)
			keptAfter, err := keptPolicies(after)
			if err != nil {
				t.Fatal(err)
			}
			if len(keptAfter) != len(keptBefore) {
				t.Errorf("%s: the endpoint's non-ACL policies were\n%s\nand are now\n%s", form, keptBefore, keptAfter)
				continue
			}
			for i := range keptBefore {
				if !bytes.Equal(keptBefore[i], keptAfter[i]) {
					if sameJSON(keptBefore[i], keptAfter[i]) {
						t.Logf("%s: policy %d reads back as the same JSON in other bytes: %s, was %s", form, i, keptAfter[i], keptBefore[i])
					} else {
						t.Errorf("%s: policy %d is now %s, was %s", form, i, keptAfter[i], keptBefore[i])
					}
				}
			}
			if count := len(after) - len(keptAfter); count != len(acls) {
				t.Errorf("%s: %d ACL policies after the update, want %d: %s", form, count, len(acls), after)
			}
			t.Logf("%s: v1 policies after the update: %s", form, after)
		}
	})
}

func TestIntegrationHostAttach(t *testing.T) {
	c := newClient(t)
	n := overlay(t, c, "10.250.3.0/24")
	e := &hns.Endpoint{Name: n.Name + "_host", Network: n.Name, IP: netip.MustParsePrefix("10.250.3.2/24"), HostAttached: true}
	endpoint(t, c, e)
	if got := snapshot(t, c).Endpoint(e.Name); got == nil || !got.HostAttached {
		t.Fatalf("endpoint read back as %+v, want it attached to the host", got)
	}
	apply(t, c, hns.Op{Action: hns.Create, Kind: hns.KindEndpoint, Name: e.Name, Network: n.Name, EndpointSpec: e}) // a retry changes nothing
}

func TestIntegrationDeleteMissing(t *testing.T) {
	c := newClient(t)
	name := fmt.Sprintf("hnsplan-it-%08x", rand.Uint32())
	for _, op := range []hns.Op{
		{Action: hns.Delete, Kind: hns.KindEndpoint, Name: name + "_host", Network: name},
		{Action: hns.Delete, Kind: hns.KindRoute, Name: "10.250.9.0/24", Network: name},
		{Action: hns.Delete, Kind: hns.KindNetwork, Name: name},
	} {
		apply(t, c, op) // deleting what is not there succeeds
	}
	err := c.Apply(context.Background(), hns.Op{Action: hns.Update, Kind: hns.KindACL, Name: name + "_pod", Network: name})
	if !hns.IsNotFound(err) {
		t.Errorf("ACL update of a missing endpoint: %v, want a not-found error", err)
	}
}

// v1PodEndpoint creates, through HNS v1, a pod endpoint on the network
// named network as Calico's CNI makes one on a VXLAN network (flat v1
// policies: PA, OutBoundNAT with an ExceptionList, ROUTE with NeedEncap),
// and deletes it when the test ends.
func v1PodEndpoint(t *testing.T, network string, ip, pa netip.Addr) *hcsshim.HNSEndpoint {
	t.Helper()
	nw, err := hcsshim.GetHNSNetworkByName(network)
	if err != nil {
		t.Fatalf("hcsshim.GetHNSNetworkByName(%q): %v", network, err)
	}
	ep := &hcsshim.HNSEndpoint{
		Name:           fmt.Sprintf("%s_v1pod", network),
		VirtualNetwork: nw.Id,
		IPAddress:      net.IP(ip.AsSlice()),
		PrefixLength:   24,
		Policies: []json.RawMessage{
			json.RawMessage(fmt.Sprintf(`{"Type":"PA","PA":%q}`, pa)),
			json.RawMessage(`{"Type":"OutBoundNAT","ExceptionList":["10.250.0.0/16","10.96.0.0/12"]}`),
			json.RawMessage(`{"Type":"ROUTE","DestinationPrefix":"10.96.0.0/12","NeedEncap":true}`),
		},
	}
	created, err := ep.Create()
	if err != nil {
		t.Fatalf("HNSEndpoint.Create: %v", err)
	}
	t.Cleanup(func() {
		if _, err := created.Delete(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return created
}

// readV1Policies reads an endpoint's policies through HNS v1, as HNS wrote
// them.
func readV1Policies(t *testing.T, id string) []json.RawMessage {
	t.Helper()
	ep, err := hcsshim.GetHNSEndpointByID(id)
	if err != nil {
		t.Fatalf("hcsshim.GetHNSEndpointByID(%s): %v", id, err)
	}
	return ep.Policies
}
