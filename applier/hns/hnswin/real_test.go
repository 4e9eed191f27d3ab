package hnswin

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

func readReal(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "real", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// network is a plan's network, with its host endpoint named name at ip.
func plannedNetwork(n hns.Network, host hns.Endpoint) *hns.Want {
	host.Network = n.Name
	return &hns.Want{Network: n, HostEndpoint: host, PodACLs: map[netip.Addr][]plan.ACL{}}
}

// noOps diffs have against want with no baseline: the codec's tolerance
// alone must make the real document equal to the plan that means it.
func noOps(t *testing.T, have *hns.State, want *hns.Want) {
	t.Helper()
	have.Canonical()
	if ops := hns.Diff(have, want); len(ops) != 0 {
		t.Errorf("%d ops against the equivalent plan: %v\nhave:\n%s", len(ops), ops, have)
	}
}

// TestRealEndpointV2ACL: HNS's v2 echo of ACLs (its key order, no Id,
// Priority a number) is the plan's ACL list.
func TestRealEndpointV2ACL(t *testing.T) {
	e, err := decodeEndpoint(readReal(t, "01-endpoint-v2-acl.json"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.ACLs) != 3 || e.ACLs[0].Id != "" || e.ACLs[0].Priority != 2000 || e.ACLs[2].RemoteAddresses != "169.254.128.1" {
		t.Fatalf("ACLs %+v", e.ACLs)
	}
	planned := []plan.ACL{ // what CNS sent, with the Ids a plan gives
		{Id: "apipa-icmp-out", Protocols: "1", Action: "Block", Direction: "Out", LocalAddresses: "169.254.128.6", RuleType: "Switch", Priority: 2000},
		{Id: "apipa-udp-in", Protocols: "17", Action: "Block", Direction: "In", LocalAddresses: "169.254.128.6", RuleType: "Switch", Priority: 2000},
		{Id: "apipa-dns-in", Protocols: "17", Action: "Allow", Direction: "In", LocalAddresses: "169.254.128.6", RemoteAddresses: "169.254.128.1", RuleType: "Switch", Priority: 1000},
	}
	// The excerpt has no address: the endpoint's is its ACLs' local one.
	e.Network, e.IP = "swift", netip.MustParsePrefix("169.254.128.6/17")
	w := plannedNetwork(hns.Network{Name: "swift", Type: "L2Bridge", Subnets: []hns.Subnet{{Prefix: netip.MustParsePrefix("169.254.128.0/17"), Gateway: netip.MustParseAddr("169.254.128.1")}}},
		hns.Endpoint{Name: "host", IP: netip.MustParsePrefix("169.254.128.2/17")})
	w.PodACLs[e.IP.Addr()] = planned
	have := &hns.State{Networks: []hns.Network{w.Network}, Endpoints: []hns.Endpoint{e, w.HostEndpoint}}
	noOps(t, have, w)
}

// TestRealEndpointV1AzureCNI: the v1 serialiser's spaced colons, escaped
// slash and flat policies read as the plan's typed policies.
func TestRealEndpointV1AzureCNI(t *testing.T) {
	e, err := decodeEndpoint(readReal(t, "02-endpoint-v1-azurecni.json"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.Network != "azure" || e.IP != netip.MustParsePrefix("10.240.0.104/12") || e.MAC != "00-15-5D-DB-DD-36" || e.Remote {
		t.Fatalf("endpoint %+v", e)
	}
	w := plannedNetwork(hns.Network{Name: "azure", Type: "L2Bridge", Subnets: []hns.Subnet{{Prefix: netip.MustParsePrefix("10.240.0.0/12"), Gateway: netip.MustParseAddr("10.240.0.1")}}},
		hns.Endpoint{Name: "d0946d95-eth0", IP: netip.MustParsePrefix("10.240.0.104/12"), MAC: "00-15-5d-db-dd-36", Policies: []plan.Policy{
			plan.NewPolicy(plan.OutBoundNAT{Exceptions: []netip.Prefix{netip.MustParsePrefix("10.240.0.0/12"), netip.MustParsePrefix("10.240.0.0/12")}}),
			plan.NewPolicy(plan.SDNRoute{DestinationPrefix: netip.MustParsePrefix("10.0.0.0/16"), NeedEncap: true}),
			{Type: "L2Driver", Settings: plan.Raw{Type: "L2Driver", JSON: json.RawMessage("{}")}},
		}})
	have := &hns.State{Networks: []hns.Network{w.Network}, Endpoints: []hns.Endpoint{e}}
	noOps(t, have, w)
}

// TestRealEndpointV1CalicoPod: a mixed-case MAC and fields HNS adds.
func TestRealEndpointV1CalicoPod(t *testing.T) {
	e, err := decodeEndpoint(readReal(t, "03-endpoint-v1-calico-overlay-pod.json"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.MAC != "0E-2A-0A-01-12-43" || e.IP.Addr() != netip.MustParseAddr("10.1.18.67") {
		t.Fatalf("endpoint %+v", e)
	}
	n := hns.Network{Name: "Calico", Type: "Overlay", Subnets: []hns.Subnet{{Prefix: netip.MustParsePrefix("10.1.18.64/26"), Gateway: netip.MustParseAddr("10.1.18.65"), VNI: 4096}}}
	// The excerpt is cut before the endpoint's network: with it known,
	// the address takes its subnet's length, as decodeEndpoint does.
	e.Network = "Calico"
	if e.IP, err = readIPConfig("10.1.18.67", 0, []netip.Prefix{n.Subnets[0].Prefix}); err != nil {
		t.Fatal(err)
	}
	w := plannedNetwork(n, hns.Endpoint{Name: e.Name, IP: netip.MustParsePrefix("10.1.18.67/26"), MAC: "0e:2a:0a:01:12:43", Policies: []plan.Policy{
		plan.NewPolicy(plan.OutBoundNAT{Exceptions: []netip.Prefix{netip.MustParsePrefix("10.152.183.0/24"), netip.MustParsePrefix("10.1.0.0/16")}}),
		plan.NewPolicy(plan.SDNRoute{DestinationPrefix: netip.MustParsePrefix("10.152.183.0/24"), NeedEncap: true}),
	}})
	have := &hns.State{Networks: []hns.Network{n}, Endpoints: []hns.Endpoint{e}}
	noOps(t, have, w)
}

// TestRealCalicoDefaultACL: Calico's default deny as HNS reads it back
// (Scope, no Id, "256") is the plan's rule, and the v1 PA and
// ExceptionList are the typed ProviderAddress and OutBoundNAT.
func TestRealCalicoDefaultACL(t *testing.T) {
	var raws []json.RawMessage
	if err := json.Unmarshal(readReal(t, "04-endpoint-v1-calico-default-acl.json"), &raws); err != nil {
		t.Fatal(err)
	}
	var ps []rawPolicy
	for _, r := range raws {
		p, err := readPolicy(r)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	policies, acls, err := readEndpointPolicies(ps)
	if err != nil {
		t.Fatal(err)
	}
	var described []string
	for _, p := range policies {
		described = append(described, plan.Describe(p))
	}
	if got := strings.Join(described, "; "); !strings.Contains(got, "ProviderAddress 10.1.0.5") || !strings.Contains(got, "OutBoundNAT except 10.96.0.0/12, 192.168.0.0/16") {
		t.Errorf("policies: %s", got)
	}
	ip := netip.MustParsePrefix("192.168.0.5/26")
	n := hns.Network{Name: "Calico", Type: "Overlay", Subnets: []hns.Subnet{{Prefix: ip.Masked(), Gateway: netip.MustParseAddr("192.168.0.1"), VNI: 4096}}}
	host := hns.Endpoint{Name: "Calico_ep", IP: netip.MustParsePrefix("192.168.0.2/26"), Remote: true}
	w := plannedNetwork(n, host)
	w.PodACLs[ip.Addr()] = []plan.ACL{{Id: "default-deny-in", Protocols: "256", Action: "Block", Direction: "In", RuleType: "Switch", Priority: 65500}}
	pod := hns.Endpoint{ID: "p", Name: "pod_Calico", Network: "Calico", IP: ip, Policies: policies, ACLs: acls}
	have := &hns.State{Networks: []hns.Network{n}, Endpoints: []hns.Endpoint{pod, w.HostEndpoint}}
	noOps(t, have, w)
	// A real difference is still one.
	w.PodACLs[ip.Addr()][0].Action = "Allow"
	if ops := hns.Diff(have, w); len(ops) != 1 || ops[0].Kind != hns.KindACL {
		t.Errorf("an Allow where HNS holds Block: %v", ops)
	}
}

// TestRealNetworkV1: the v1 view of a network (top-level subnets, the v1
// VSID form, DrMacAddress as a field, no VxlanPort policy; a subnet
// without a gateway) is the plan's network: no replace.
func TestRealNetworkV1(t *testing.T) {
	n, err := decodeNetwork(readReal(t, "05-network-v1-calico-vxlan.json"), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Subnets) != 1 || n.Subnets[0].VNI != 4096 || n.Subnets[0].Gateway != netip.MustParseAddr("192.168.0.1") || n.DRMAC != "00-15-5D-C2-00-BF" || n.VXLANPort != 0 {
		t.Fatalf("network %+v", n)
	}
	host := hns.Endpoint{Name: "Calico_ep", Network: "Calico", IP: netip.MustParsePrefix("192.168.0.2/26"), Remote: true}
	w := plannedNetwork(hns.Network{Name: "Calico", Type: "Overlay", VXLANPort: 4789,
		Subnets: []hns.Subnet{{Prefix: netip.MustParsePrefix("192.168.0.0/26"), Gateway: netip.MustParseAddr("192.168.0.1"), VNI: 4096}}}, host)
	noOps(t, &hns.State{Networks: []hns.Network{n}, Endpoints: []hns.Endpoint{host}}, w)
	// Another VNI in the plan is a replace: the VSID was read.
	w.Network.Subnets[0].VNI = 5000
	if ops := hns.Diff(&hns.State{Networks: []hns.Network{n}, Endpoints: []hns.Endpoint{host}}, w); !slices.ContainsFunc(ops, func(op hns.Op) bool { return op.Reason == "vni-changed" }) {
		t.Errorf("a VNI change: %v", ops)
	}

	var list []json.RawMessage
	if err := json.Unmarshal(readReal(t, "07-network-v1-dockernat.json"), &list); err != nil || len(list) != 1 {
		t.Fatal(err)
	}
	d, err := decodeNetwork(list[0], true)
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "DockerNAT (1)" || d.Type != "Private" || d.Subnets[0].Prefix != netip.MustParsePrefix("172.28.160.0/20") || d.Subnets[0].Gateway.IsValid() {
		t.Fatalf("network %+v", d)
	}
	host = hns.Endpoint{Name: "host", Network: d.Name, IP: netip.MustParsePrefix("172.28.160.2/20")}
	w = plannedNetwork(hns.Network{Name: d.Name, Type: "Private", Subnets: []hns.Subnet{{Prefix: d.Subnets[0].Prefix, Gateway: netip.MustParseAddr("172.28.160.1")}}}, host)
	noOps(t, &hns.State{Networks: []hns.Network{d}, Endpoints: []hns.Endpoint{host}}, w)
}

// TestReadPolicyForms: v2 and v1 forms of the same policy read alike.
func TestReadPolicyForms(t *testing.T) {
	for _, tc := range []struct{ v1, v2 string }{
		{`{"Type":"VSID","VSID":4096}`, `{"Type":"VSID","Settings":{"IsolationId":4096}}`},
		{`{"PA":"10.1.0.5","Type":"PA"}`, `{"Type":"ProviderAddress","Settings":{"ProviderAddress":"10.1.0.5"}}`},
		{`{"ExceptionList":["10.96.0.0\/12"],"Type":"OutBoundNAT"}`, `{"Type":"OutBoundNAT","Settings":{"Exceptions":["10.96.0.0/12"]}}`},
		{`{ "DestinationPrefix" : "10.0.0.0\/16", "NeedEncap" : true, "Type" : "ROUTE" }`, `{"Type":"SDNRoute","Settings":{"DestinationPrefix":"10.0.0.0/16","NeedEncap":true}}`},
	} {
		a, err1 := readPolicy(json.RawMessage(tc.v1))
		b, err2 := readPolicy(json.RawMessage(tc.v2))
		if err1 != nil || err2 != nil || a.Type != b.Type || !sameJSON(a.Settings, b.Settings) {
			t.Errorf("%s read as %s %s (%v), %s as %s %s (%v)", tc.v1, a.Type, a.Settings, err1, tc.v2, b.Type, b.Settings, err2)
		}
	}
	if _, err := readPolicy(json.RawMessage(`{"Settings":{}}`)); err == nil {
		t.Error("a policy without a Type was read")
	}
}

// TestRealEndpointsOfOtherCNIs: the endpoints Azure CNI (AKS, v2), the
// VPC CNI (EKS, v2) and flannel's win-overlay (v1) create read as the
// model has them: the network by ID (v2) or by name (v1), the address,
// the CNI's policies typed (plan knows each, losing nothing), and the
// ACLs without an Id.
func TestRealEndpointsOfOtherCNIs(t *testing.T) {
	prefix, addr := netip.MustParsePrefix, netip.MustParseAddr
	tests := []struct {
		file     string
		networks map[string]*hns.Network // by lower-case ID, as Snapshot has them
		want     hns.Endpoint
	}{{
		file: "08-endpoint-v2-azurecni-aks.json",
		networks: map[string]*hns.Network{"a7d41c2e-6f58-4b0a-9e31-c5b2f8d06e49": {Name: "azure", Type: "L2Bridge",
			Subnets: []hns.Subnet{{Prefix: prefix("10.224.0.0/16"), Gateway: addr("10.224.0.1")}}}},
		want: hns.Endpoint{ID: "5c8e2f4a-1b7d-4e93-a6c0-2d9f8b3e7a15", Name: "590ef921-eth0", Network: "azure",
			IP: prefix("10.224.0.37/16"), MAC: "00-15-5D-2E-7A-41", Attached: true, // in its pod's HostComputeNamespace
			Policies: []plan.Policy{
				plan.NewPolicy(plan.OutBoundNAT{Exceptions: []netip.Prefix{prefix("10.224.0.0/16"), prefix("10.224.0.0/12")}}),
				plan.NewPolicy(plan.SDNRoute{DestinationPrefix: prefix("10.0.0.0/16"), NeedEncap: true}),
			},
			ACLs: []plan.ACL{
				{Protocols: "6", Action: "Block", Direction: "Out", RemoteAddresses: "168.63.129.16/32", RemotePorts: "80", RuleType: "Switch", Priority: 200},
				{Protocols: "6", Action: "Block", Direction: "Out", RemoteAddresses: "168.63.129.16/32", RemotePorts: "32526", RuleType: "Switch", Priority: 200},
				{Action: "Allow", Direction: "In", Priority: 65500},
				{Action: "Allow", Direction: "Out", Priority: 65500},
			}},
	}, {
		file: "09-endpoint-v2-vpcbridge-eks.json",
		networks: map[string]*hns.Network{"0c5e8a2d-9f14-4c6b-b7e3-d1a4f6c92b58": {Name: "vpcbr0ea1551f9f9a", Type: "L2Bridge",
			Subnets: []hns.Subnet{{Prefix: prefix("10.0.1.0/24"), Gateway: addr("10.0.1.1")}}}},
		want: hns.Endpoint{ID: "e2b9d7c4-3a6f-4d18-8b5e-7f0a1c9d2e63", Name: "cid-6f1a9c3e-84d2-4b7f-a05c-3e9d2b7f1a84", Network: "vpcbr0ea1551f9f9a",
			IP: prefix("10.0.1.143/24"), MAC: "00-15-5D-8C-1F-27", Attached: true,
			Policies: []plan.Policy{
				plan.NewPolicy(plan.OutBoundNAT{Exceptions: []netip.Prefix{prefix("10.0.0.0/16"), prefix("172.20.0.0/16")}}),
				plan.NewPolicy(plan.SDNRoute{DestinationPrefix: prefix("172.20.0.0/16"), NeedEncap: true}),
				plan.NewPolicy(plan.SDNRoute{DestinationPrefix: prefix("10.0.1.81/32"), NeedEncap: true}),
			}},
	}, {
		file: "10-endpoint-v1-flannel-winoverlay.json",
		want: hns.Endpoint{ID: "8d3f6b1e-2c9a-4e57-b0d4-6a1e5c8f3b72", Name: "3358176d42bb32e03954c87729422cc2c6858cc2ed01b2af41b4efcda3320916_flannel.4096",
			Network: "flannel.4096", IP: prefix("10.244.1.5/24"), MAC: "0E-2A-0A-F4-01-05",
			Policies: []plan.Policy{
				plan.NewPolicy(plan.OutBoundNAT{Exceptions: []netip.Prefix{prefix("10.244.0.0/16"), prefix("10.96.0.0/12"), prefix("10.244.1.0/24")}}),
				plan.NewPolicy(plan.SDNRoute{DestinationPrefix: prefix("10.96.0.0/12"), NeedEncap: true}),
				plan.NewPolicy(plan.ProviderAddress{ProviderAddress: addr("192.168.1.21")}),
			}},
	}}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := decodeEndpoint(readReal(t, tt.file), tt.networks, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("decoded as\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// TestRealEndpointHealth: what HNS says of an endpoint's condition is read
// where it says it — a real v1 document's Health.LastErrorCode (0) and a
// v1 State — and nowhere else: a v2 document (hcn's Health is {Data,
// Extra}) reads as not told (nil), which the audit reports as not checked.
func TestRealEndpointHealth(t *testing.T) {
	e, err := decodeEndpoint(readReal(t, "03-endpoint-v1-calico-overlay-pod.json"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.Health == nil || e.Health.LastErrorCode != 0 || e.Health.State != "" {
		t.Errorf("real v1 endpoint: health %+v, want LastErrorCode 0 and no State", e.Health)
	}
	if why, bad := e.Health.Bad(); bad {
		t.Errorf("real v1 endpoint without error reads as bad: %s", why)
	}
	v2, err := decodeEndpoint(readReal(t, "08-endpoint-v2-azurecni-aks.json"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v2.Health != nil {
		t.Errorf("v2 endpoint: health %+v, want nil (v2 says nothing)", v2.Health)
	}
	for _, tc := range []struct {
		doc, why string
		attached bool
	}{
		{`{"ID":"a","Name":"x","State":5,"Health":{"LastErrorCode":0}}`, "state Degraded", false},
		{`{"ID":"a","Name":"x","State":2}`, "", true},
		{`{"ID":"a","Name":"x","State":4,"Health":{"LastErrorCode":2150301698}}`, "state Detached, last error 0x802B0002", false},
		{`{"ID":"a","Name":"x","Health":{"LastErrorCode":2150301698}}`, "last error 0x802B0002", false},
		{`{"ID":"a","Name":"x","SharedContainers":["c1"]}`, "", true},
	} {
		e, err := decodeEndpoint([]byte(tc.doc), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		why, _ := e.Health.Bad()
		if why != tc.why || e.Attached != tc.attached {
			t.Errorf("%s: bad %q attached %v, want %q %v", tc.doc, why, e.Attached, tc.why, tc.attached)
		}
	}
}
