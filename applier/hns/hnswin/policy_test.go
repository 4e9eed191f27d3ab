package hnswin

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

func raw(typ, settings string) rawPolicy {
	return rawPolicy{Type: typ, Settings: json.RawMessage(settings)}
}

// An Overlay network as flannel and HNS leave it (research §2, §4).
var overlayPolicies = []rawPolicy{
	raw("VxlanPort", `{"Port":4789}`),
	raw("HostRoute", `{}`),
	raw("RemoteSubnetRoute", `{"DestinationPrefix":"10.244.2.0/24","IsolationId":4096,"ProviderAddress":"192.168.0.11","DistributedRouterMacAddress":"0e-2a-0a-f4-02-01"}`),
	raw("ProviderAddress", `{"ProviderAddress":"192.168.0.10"}`),
	raw("DrMacAddress", `{"Address":"0E-2A-C0-A8-00-0A"}`),
	raw("AutomaticDNS", `{"Enable":true}`),
}

func TestReadNetPolicy(t *testing.T) {
	n := hns.Network{Name: "flannel.4096", Type: "Overlay"}
	for _, p := range overlayPolicies {
		if err := readNetPolicy(&n, p); err != nil {
			t.Fatal(err)
		}
	}
	want := hns.Network{Name: "flannel.4096", Type: "Overlay", VXLANPort: 4789, HostRoute: true,
		RemoteRoutes: []hns.RemoteRoute{{Prefix: netip.MustParsePrefix("10.244.2.0/24"), VNI: 4096,
			ProviderAddress: netip.MustParseAddr("192.168.0.11"), DRMAC: "0E-2A-0A-F4-02-01"}},
		ProviderAddress: netip.MustParseAddr("192.168.0.10"), DRMAC: "0E-2A-C0-A8-00-0A"}
	if !reflect.DeepEqual(n, want) {
		t.Errorf("readNetPolicy:\n got %+v\nwant %+v", n, want)
	}

	// A VNI above 16 bits, which only the HNS schema allows, is read.
	if err := readNetPolicy(&n, raw("RemoteSubnetRoute", `{"DestinationPrefix":"10.244.3.0/24","IsolationId":70000,"ProviderAddress":"192.168.0.12"}`)); err != nil {
		t.Fatal(err)
	}
	if got := n.RemoteRoutes[1].VNI; got != 70000 {
		t.Errorf("VNI read as %d, want 70000", got)
	}
	if err := readNetPolicy(&n, raw("NetAdapterName", `{"NetworkAdapterName":"Ethernet 2"}`)); err != nil || n.AdapterName != "Ethernet 2" {
		t.Errorf("NetAdapterName read as %q, %v", n.AdapterName, err)
	}

	for _, bad := range []rawPolicy{
		raw("RemoteSubnetRoute", `{"DestinationPrefix":"10.244.2.0/33"}`),
		raw("ProviderAddress", `{"ProviderAddress":"nope"}`),
		raw("VxlanPort", `{"Port":"x"}`),
	} {
		if err := readNetPolicy(&hns.Network{}, bad); err == nil {
			t.Errorf("readNetPolicy(%s %s) succeeded, want an error", bad.Type, bad.Settings)
		}
	}
}

func TestReadSubnetVNI(t *testing.T) {
	vni, err := readSubnetVNI([]json.RawMessage{
		json.RawMessage(`{"Type":"VLAN","Settings":{"IsolationId":7}}`),
		json.RawMessage(`{"Type":"VSID","Settings":{"IsolationId":4096}}`),
	})
	if err != nil || vni != 4096 {
		t.Errorf("readSubnetVNI = %d, %v; want 4096", vni, err)
	}
	if vni, err := readSubnetVNI(nil); err != nil || vni != 0 {
		t.Errorf("readSubnetVNI(nil) = %d, %v; want 0", vni, err)
	}
}

func TestNetPolicies(t *testing.T) {
	n := &hns.Network{Type: "Overlay", VXLANPort: 4789, HostRoute: true, AdapterName: "Ethernet"}
	got, err := netPolicies(n, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []rawPolicy{raw("VxlanPort", `{"Port":4789}`), raw("HostRoute", `{}`), raw("NetAdapterName", `{"NetworkAdapterName":"Ethernet"}`)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("netPolicies = %s, want %s", got, want)
	}

	// Without the VxlanPort feature, 4789 is implied and others refused.
	got, err = netPolicies(n, false)
	if err != nil || len(got) != 2 || got[0].Type != "HostRoute" {
		t.Errorf("netPolicies without VxlanPort = %s, %v; want HostRoute and NetAdapterName", got, err)
	}
	_, err = netPolicies(&hns.Network{Type: "Overlay", VXLANPort: 4790}, false)
	if hns.Code(err) != codeRequestUnsupported {
		t.Errorf("port 4790 without VxlanPort: %v, want code %#x", err, codeRequestUnsupported)
	}

	m := hns.Network{Type: "Overlay"}
	impliedVXLANPort(&m, false)
	if m.VXLANPort != 4789 {
		t.Errorf("implied port %d, want 4789", m.VXLANPort)
	}
	for _, m := range []hns.Network{{Type: "Overlay"}, {Type: "L2Bridge"}} {
		impliedVXLANPort(&m, m.Type == "Overlay")
		if m.VXLANPort != 0 {
			t.Errorf("%s: implied port %d, want none", m.Type, m.VXLANPort)
		}
	}
}

func TestNetPolicyDelta(t *testing.T) {
	have := []rawPolicy{
		raw("VxlanPort", `{"Port":4789}`),
		raw("NetAdapterName", `{"NetworkAdapterName":"Ethernet"}`),
		raw("ProviderAddress", `{"ProviderAddress":"192.168.0.10"}`),
		raw("RemoteSubnetRoute", `{"DestinationPrefix":"10.244.2.0/24"}`),
	}
	want := &hns.Network{Type: "Overlay", VXLANPort: 4789, HostRoute: true, AdapterName: "Ethernet 2"}
	add, remove, err := netPolicyDelta(have, want, true)
	if err != nil {
		t.Fatal(err)
	}
	wantAdd := []rawPolicy{raw("HostRoute", `{}`), raw("NetAdapterName", `{"NetworkAdapterName":"Ethernet 2"}`)}
	wantRemove := []rawPolicy{have[1]} // exactly as read; others' policies stay
	if !reflect.DeepEqual(add, wantAdd) || !reflect.DeepEqual(remove, wantRemove) {
		t.Errorf("netPolicyDelta:\n add %s, want %s\n remove %s, want %s", add, wantAdd, remove, wantRemove)
	}

	// Settings compare by value: key case, order and zero values do not count.
	have = []rawPolicy{raw("HostRoute", `{"Unused":0}`), raw("VxlanPort", `{"port":4789}`)}
	add, remove, err = netPolicyDelta(have, &hns.Network{VXLANPort: 4789, HostRoute: true}, true)
	if err != nil || len(add)+len(remove) != 0 {
		t.Errorf("netPolicyDelta of equal policies = add %s, remove %s, %v; want nothing", add, remove, err)
	}
}

func TestFindRoutes(t *testing.T) {
	r := hns.RemoteRoute{Prefix: netip.MustParsePrefix("10.244.2.0/24"), VNI: 4096,
		ProviderAddress: netip.MustParseAddr("192.168.0.11"), DRMAC: "0E-2A-0A-F4-02-01"}
	found, err := findRoutes(overlayPolicies, r, false)
	if err != nil || len(found) != 1 || !reflect.DeepEqual(found[0], overlayPolicies[2]) {
		t.Errorf("findRoutes = %s, %v; want the policy as read", found, err)
	}
	other := r
	other.ProviderAddress = netip.MustParseAddr("192.168.0.99")
	if found, _ := findRoutes(overlayPolicies, other, false); len(found) != 0 {
		t.Errorf("findRoutes matched a route to another VTEP: %s", found)
	}
	if found, _ := findRoutes(overlayPolicies, other, true); len(found) != 1 {
		t.Errorf("findRoutes by prefix found %d routes, want 1", len(found))
	}
}

func TestCheckVNI16(t *testing.T) {
	if err := checkVNI16(65535); err != nil {
		t.Errorf("checkVNI16(65535) = %v", err)
	}
	if err := checkVNI16(65536); hns.Code(err) != hns.CodeInvalidPolicy {
		t.Errorf("checkVNI16(65536) = %v, want code %#x", err, hns.CodeInvalidPolicy)
	}
}

func TestEndpointPolicies(t *testing.T) {
	read := []rawPolicy{
		raw("ProviderAddress", `{"ProviderAddress":"192.168.0.10"}`),
		raw("OutBoundNAT", `{"Exceptions":["10.244.0.0/16","10.96.0.0/12"],"VirtualIP":"","Flags":0}`),
		// VirtualIP is not in plan.OutBoundNAT: kept raw, or re-sending loses it.
		raw("OutBoundNAT", `{"VirtualIP":"10.0.0.4","Exceptions":["10.244.0.0/16"]}`),
		// NextHop is not in plan.SDNRoute.
		raw("SDNRoute", `{"DestinationPrefix":"10.96.0.0/12","NextHop":"10.244.1.1","NeedEncap":true}`),
		raw("SDNRoute", `{"DestinationPrefix":"10.96.0.0/12","NeedEncap":true}`),
		raw("PortName", `{"Name": "x"}`),
		raw("Iov", ``),
		raw("ACL", `{"Id":"a","Action":"Allow","Direction":"In","Priority":100}`),
	}
	policies, acls, err := readEndpointPolicies(read)
	if err != nil {
		t.Fatal(err)
	}
	wantPolicies := []plan.Policy{
		plan.NewPolicy(plan.ProviderAddress{ProviderAddress: netip.MustParseAddr("192.168.0.10")}),
		plan.NewPolicy(plan.OutBoundNAT{Exceptions: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.96.0.0/12")}}),
		plan.NewPolicy(plan.Raw{Type: "OutBoundNAT", JSON: json.RawMessage(`{"VirtualIP":"10.0.0.4","Exceptions":["10.244.0.0/16"]}`)}),
		plan.NewPolicy(plan.Raw{Type: "SDNRoute", JSON: json.RawMessage(`{"DestinationPrefix":"10.96.0.0/12","NextHop":"10.244.1.1","NeedEncap":true}`)}),
		plan.NewPolicy(plan.SDNRoute{DestinationPrefix: netip.MustParsePrefix("10.96.0.0/12"), NeedEncap: true}),
		plan.NewPolicy(plan.Raw{Type: "PortName", JSON: json.RawMessage(`{"Name":"x"}`)}),
		plan.NewPolicy(plan.Raw{Type: "Iov", JSON: json.RawMessage(`{}`)}),
	}
	wantACLs := []plan.ACL{{Id: "a", Action: "Allow", Direction: "In", Priority: 100}}
	if !reflect.DeepEqual(policies, wantPolicies) {
		t.Errorf("policies:\n got %#v\nwant %#v", policies, wantPolicies)
	}
	if !reflect.DeepEqual(acls, wantACLs) {
		t.Errorf("ACLs = %+v, want %+v", acls, wantACLs)
	}

	// Sending them back: every value HNS gave is there; ACLs come last.
	sent, err := endpointPolicies(policies, acls)
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != len(read) {
		t.Fatalf("sent %d policies, want %d", len(sent), len(read))
	}
	for i, p := range read {
		if sent[i].Type != p.Type || !sameJSON(sent[i].Settings, p.Settings) {
			t.Errorf("policy %d sent as %s %s, read as %s %s", i, sent[i].Type, sent[i].Settings, p.Type, p.Settings)
		}
	}

	// An ACL among the policies is sent in the ACL wire form.
	sent, err = endpointPolicies([]plan.Policy{plan.NewPolicy(plan.ACL{Id: "b", Action: "Block", Direction: "Out"})}, nil)
	if err != nil || string(sent[0].Settings) != `{"Id":"b","Action":"Block","Direction":"Out"}` {
		t.Errorf("ACL policy sent as %s, %v", sent, err)
	}
	if _, err := endpointPolicies([]plan.Policy{{}}, nil); err == nil {
		t.Error("a policy without a type was sent")
	}
}

func TestSubsumes(t *testing.T) {
	for _, tt := range []struct {
		got, have string
		want      bool
	}{
		{`{"A":1}`, `{"A":1,"B":"","C":[],"D":{"E":0},"F":false,"G":null}`, true},
		{`{"a":"x"}`, `{"A":"x"}`, true},
		{`{"A":"x"}`, `{"A":"y"}`, false},
		{`{}`, `{"A":[1]}`, false},
		{`{"A":1.0}`, `{"A":1}`, false}, // as written: HNS never writes 1.0
		{`[]`, `{}`, false},
		{``, `{}`, true},
	} {
		if got := subsumes(json.RawMessage(tt.got), json.RawMessage(tt.have)); got != tt.want {
			t.Errorf("subsumes(%s, %s) = %v, want %v", tt.got, tt.have, got, tt.want)
		}
	}
}

// TestRouteBatch: a batch adds what is not there and removes what is,
// as read (the MAC in HNS's lower case), and sends nothing for routes
// already as wanted, so that a retried batch sends only what is left.
func TestRouteBatch(t *testing.T) {
	there := hns.RemoteRoute{Prefix: netip.MustParsePrefix("10.244.2.0/24"), VNI: 4096,
		ProviderAddress: netip.MustParseAddr("192.168.0.11"), DRMAC: "0E-2A-0A-F4-02-01"}
	moved := there
	moved.ProviderAddress = netip.MustParseAddr("192.168.0.99")
	fresh := hns.RemoteRoute{Prefix: netip.MustParsePrefix("10.244.3.0/24"), VNI: 4096,
		ProviderAddress: netip.MustParseAddr("192.168.0.12"), DRMAC: "0E-2A-0A-F4-03-01"}
	batch := []hns.RemoteRoute{there, moved, fresh, fresh}

	add, drop, err := routeBatch(overlayPolicies, batch, false)
	if err != nil || len(drop) != 0 || !reflect.DeepEqual(add, []hns.RemoteRoute{moved, fresh}) {
		t.Errorf("add batch = %v, %s, %v; want the two routes not there, once each", add, drop, err)
	}
	add, drop, err = routeBatch(overlayPolicies, batch, true)
	if err != nil || len(add) != 0 || !reflect.DeepEqual(drop, []rawPolicy{overlayPolicies[2]}) {
		t.Errorf("remove batch = %v, %s, %v; want the one route there, as read", add, drop, err)
	}
	bad := append(slices.Clone(overlayPolicies), raw("RemoteSubnetRoute", `{"DestinationPrefix":"nope"}`))
	if _, _, err := routeBatch(bad, batch, false); err == nil {
		t.Error("a route policy HNS holds that cannot be read: no error")
	}
}
