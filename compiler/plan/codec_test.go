package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// samplePlan is a plan of win-1 assembled with a route table that routes
// win-2's block.
func samplePlan() *NodePlan {
	block := netip.MustParsePrefix("192.168.0.0/26")
	p := &NodePlan{
		FormatVersion: FormatVersion, Kind: Kind, Node: "win-1", Cluster: "demo", Networking: "calico-vxlan",
		Network: Network{
			Name: "Calico", Type: "Overlay", Immutable: []string{"Name", "Type", "Subnet", "VNI", "VxlanPort"},
			Ipams: []Ipam{{Type: "Static", Subnets: []Subnet{{
				IpAddressPrefix: block,
				Policies:        []Policy{NewPolicy(VSID{IsolationId: 4096})},
				Routes:          []Route{{NextHop: netip.MustParseAddr("192.168.0.1"), DestinationPrefix: netip.MustParsePrefix("0.0.0.0/0")}},
			}}}},
			Policies: []Policy{NewPolicy(VxlanPort{Port: 4789}), NewPolicy(HostRouteSetting{}), {Type: "QOS", Settings: Raw{Type: "QOS", JSON: []byte(`{"x":1}`)}}},
		},
		HostEndpoint: Endpoint{Name: "Calico_ep", IpConfigurations: []IpConfig{{IpAddress: netip.MustParseAddr("192.168.0.2"), PrefixLength: 26}},
			Flags: FlagRemoteEndpoint, Policies: []Policy{NewPolicy(ProviderAddress{ProviderAddress: netip.MustParseAddr("10.0.0.5")})}},
		PodEndpoint: PodEndpointTemplate{Gateway: netip.MustParseAddr("192.168.0.1"), MacAddressRule: "0E-2A-<ip hex>", DnsSearch: "{namespace}.svc.cluster.local",
			Policies: []Policy{NewPolicy(OutBoundNAT{Exceptions: []netip.Prefix{block}}), NewPolicy(SDNRoute{DestinationPrefix: block, NeedEncap: true})}},
		Unresolved: []Unresolved{{Field: "x", Source: "y", Nodes: []string{"win-2"}}},
	}
	p.SetRoutes(RemoteSubnetTable("demo", []RemoteSubnetRoute{{DestinationPrefix: netip.MustParsePrefix("192.168.0.64/26"), IsolationId: 4096,
		ProviderAddress: netip.MustParseAddr("10.0.0.6"), Node: "win-2"}}))
	return p
}

var cmpPlan = cmp.Options{cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})}

// cmpFile compares plans as their files say: the assembled parts are not
// in a plan's file.
var cmpFile = cmp.Options{cmpPlan, cmpopts.IgnoreFields(NodePlan{}, "Routes", "Program")}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	p := samplePlan()
	data, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Digest, "sha256:") || !bytes.Contains(data, []byte(p.Digest)) {
		t.Fatalf("digest %q not in the file", p.Digest)
	}
	if !bytes.Contains(data, []byte(`"0E-2A-<ip hex>"`)) {
		t.Errorf("HTML-escaped output:\n%s", data)
	}
	got, err := Decode(data, "win-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Routes != nil || got.Program != nil {
		t.Errorf("a decoded plan came with parts: it must be assembled (Parts.Assemble)")
	}
	if diff := cmp.Diff(p, got, cmpFile); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	again, _ := Encode(got)
	if !bytes.Equal(data, again) {
		t.Errorf("re-encoding a decoded plan changed its bytes")
	}
}

func TestDecodeRejects(t *testing.T) {
	good, err := Encode(samplePlan())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
		node string
		want error
	}{
		{"tampered", bytes.Replace(good, []byte(`"10.0.0.5"`), []byte(`"10.0.0.6"`), 1), "win-1", ErrDigest},
		{"foreign node", good, "win-2", ErrForeignNode},
		{"major 1", bytes.Replace(good, []byte(`"formatVersion": "2"`), []byte(`"formatVersion": "1"`), 1), "", ErrMajorVersion},
		{"major 3", bytes.Replace(good, []byte(`"formatVersion": "2"`), []byte(`"formatVersion": "3.0"`), 1), "", ErrMajorVersion},
		{"not a plan", bytes.Replace(good, []byte(`"kind": "NodePlan"`), []byte(`"kind": "ConfigMap"`), 1), "", ErrNotANodePlan},
		{"no digest", bytes.Replace(good, []byte(`"digest": "sha256:`), []byte(`"digest": "`+"\x00"), 1), "", nil},
		{"truncated", good[:len(good)/2], "", nil},
		{"bad prefix", bytes.Replace(good, []byte(`"192.168.0.0/26"`), []byte(`"192.168.0.0/33"`), 1), "", ErrInvalid},
		{"port over 16 bits", bytes.Replace(good, []byte(`"Port": 4789`), []byte(`"Port": 70000`), 1), "", ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.data, tt.node)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Decode = %v, want a *DecodeError", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Decode = %v, want %v", err, tt.want)
			}
			// Only a plan that is not JSON (the NUL byte makes it so) is said
			// to be cut short.
			if truncated := strings.Contains(err.Error(), "truncated"); truncated != (tt.name == "truncated" || tt.name == "no digest") {
				t.Errorf("Decode = %v: says truncated %v", err, truncated)
			}
		})
	}
}

// TestDecodeNewerMinor: a writer of a newer minor version adds a field,
// covered by its digest; this reader ignores the field and accepts the plan.
func TestDecodeNewerMinor(t *testing.T) {
	p := samplePlan()
	p.FormatVersion = FormatVersion + ".7"
	data, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	// Re-encode by hand as the newer writer would: the new field inside,
	// the digest over the new bytes.
	data = bytes.Replace(data, []byte(`  "cluster": "demo",`), []byte(`  "cluster": "demo",
  "futureField": {"a": [1, 2]},`), 1)
	data = bytes.Replace(data, []byte(p.Digest), []byte(""), 1)
	sum, err := digestOf(data)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Replace(data, []byte(`"digest": ""`), []byte(`"digest": "`+sum+`"`), 1)
	got, err := Decode(data, "win-1")
	if err != nil {
		t.Fatalf("Decode of a newer minor: %v", err)
	}
	if got.FormatVersion != FormatVersion+".7" || got.Cluster != "demo" {
		t.Errorf("decoded %q %q", got.FormatVersion, got.Cluster)
	}
}

func TestPolicyJSON(t *testing.T) {
	var p Policy
	if err := p.UnmarshalJSON([]byte(`{"Type":"VSID","Settings":{"IsolationId":5000}}`)); err != nil {
		t.Fatal(err)
	}
	if s, ok := Find[VSID]([]Policy{p}); !ok || s.IsolationId != 5000 {
		t.Errorf("Find[VSID] = %v, %v", s, ok)
	}
	if err := p.UnmarshalJSON([]byte(`{"Type":"VSID","Settings":{"IsolationId":"x"}}`)); err == nil {
		t.Error("a string IsolationId was accepted")
	}
	if err := p.UnmarshalJSON([]byte(`{"Settings":{}}`)); err == nil {
		t.Error("a policy without a Type was accepted")
	}
	bad := Policy{Type: TypeVSID, Settings: VxlanPort{Port: 1}}
	if _, err := bad.MarshalJSON(); err == nil {
		t.Error("mismatched Type and Settings were encoded")
	}
}

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	p := samplePlan()
	if _, err := Encode(p); err != nil {
		t.Fatal(err)
	}
	if err := WriteText(&b, p); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Node win-1", "Network Calico", "Type        : Overlay", "VSID 4096", "VxlanPort 4789",
		"HostEndpoint Calico_ep", "RemoteEndpoint", "192.168.0.64/26    -> win-2", "DR MAC (live)", "OutBoundNAT except 192.168.0.0/26", "QOS {\"x\":1}"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}

// TestIndentMatchesStdlib: the fast indenter lays out JSON exactly as
// json.Indent does.
func TestIndentMatchesStdlib(t *testing.T) {
	inputs := []string{
		`{}`, `[]`, `{"a":[]}`, `{"a":{},"b":[1,2,{"c":"x,y:{}[]\"\\"}]}`,
		`[{"k":"v"},{"k":["a","b"]},null,true,-1.5e3]`,
	}
	p := samplePlan()
	data, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		t.Fatal(err)
	}
	inputs = append(inputs, compact.String())
	for _, in := range inputs {
		var want bytes.Buffer
		if err := json.Indent(&want, []byte(in), "", "  "); err != nil {
			t.Fatal(err)
		}
		if got := indent(nil, []byte(in)); string(got) != want.String() {
			t.Errorf("indent(%s):\n%s\nwant:\n%s", in, got, want.String())
		}
	}
}
