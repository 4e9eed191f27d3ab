package hnswin

import (
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

func TestMarshalACL(t *testing.T) {
	tests := []struct {
		name string
		acl  plan.ACL
		want string
	}{{
		name: "full, Id included",
		acl: plan.ACL{Id: "knp.default.web-in0", Protocols: "6", Action: "Allow", Direction: "In",
			LocalAddresses: "10.244.1.5", RemoteAddresses: "10.244.0.0/16", LocalPorts: "80,443", RemotePorts: "1024",
			RuleType: "Switch", Priority: 200},
		want: `{"Id":"knp.default.web-in0","Protocols":"6","Action":"Allow","Direction":"In","LocalAddresses":"10.244.1.5","RemoteAddresses":"10.244.0.0/16","LocalPorts":"80,443","RemotePorts":"1024","RuleType":"Switch","Priority":200}`,
	}, {
		name: "empty optional fields are left out",
		acl:  plan.ACL{Action: "Block", Direction: "Out"},
		want: `{"Action":"Block","Direction":"Out"}`,
	}, {
		name: "any protocol",
		acl:  plan.ACL{Id: "default-deny", Protocols: "256", Action: "Block", Direction: "In", Priority: 65500},
		want: `{"Id":"default-deny","Protocols":"256","Action":"Block","Direction":"In","Priority":65500}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := marshalACL(tt.acl)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("marshalACL:\n got %s\nwant %s", got, tt.want)
			}
			back, err := parseACL(got)
			if err != nil {
				t.Fatal(err)
			}
			if back != tt.acl {
				t.Errorf("parseACL(marshalACL(a)) = %+v, want %+v", back, tt.acl)
			}
		})
	}
}

func TestMarshalACLNeedsActionAndDirection(t *testing.T) {
	for _, a := range []plan.ACL{{Direction: "In"}, {Action: "Allow"}} {
		if _, err := marshalACL(a); err == nil {
			t.Errorf("marshalACL(%+v) succeeded, want an error", a)
		}
	}
}

func TestParseACLAsReadBack(t *testing.T) {
	tests := []struct {
		name, json string
		want       plan.ACL
	}{{
		name: "numbers where strings are usual",
		json: `{"Id":"x","Protocols":6,"Action":"Allow","Direction":"In","LocalPorts":80,"RemotePorts":"53","Priority":"300"}`,
		want: plan.ACL{Id: "x", Protocols: "6", Action: "Allow", Direction: "In", LocalPorts: "80", RemotePorts: "53", Priority: 300},
	}, {
		name: "ID spelled in capitals, nulls, unknown fields",
		json: `{"ID":"y","Protocols":null,"Action":"Block","Direction":"Out","RuleType":"Switch","Scope":0}`,
		want: plan.ACL{Id: "y", Action: "Block", Direction: "Out", RuleType: "Switch"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseACL(json.RawMessage(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("parseACL(%s) = %+v, want %+v", tt.json, got, tt.want)
			}
		})
	}
	for _, bad := range []string{`{"Priority":70000}`, `{"Priority":"high"}`, `{"Protocols":true}`, `[1]`} {
		if _, err := parseACL(json.RawMessage(bad)); err == nil {
			t.Errorf("parseACL(%s) succeeded, want an error", bad)
		}
	}
}

func TestFormatMAC(t *testing.T) {
	for in, want := range map[string]string{
		"":                  "",
		"0e-2a-0a-f4-01-02": "0E-2A-0A-F4-01-02",
		"0E:2A:0A:F4:01:02": "0E-2A-0A-F4-01-02",
		"0e2a.0af4.0102":    "0E-2A-0A-F4-01-02",
	} {
		got, err := formatMAC(in)
		if err != nil || got != want {
			t.Errorf("formatMAC(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"0E-2A", "not a mac", "00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01"} {
		if _, err := formatMAC(bad); err == nil {
			t.Errorf("formatMAC(%q) succeeded, want an error", bad)
		}
	}
	if got := readMAC("weird-mac"); got != "WEIRD-MAC" {
		t.Errorf("readMAC kept %q, want it upper-cased as it is", got)
	}
}

func TestIPConfig(t *testing.T) {
	addr, bits, err := ipConfig(netip.MustParsePrefix("10.244.1.2/24"))
	if err != nil || addr != "10.244.1.2" || bits != 24 {
		t.Errorf("ipConfig = %q, %d, %v; want 10.244.1.2, 24", addr, bits, err)
	}
	if _, _, err := ipConfig(netip.Prefix{}); err == nil {
		t.Error("ipConfig of the zero prefix succeeded")
	}

	subnets := []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}
	for _, tt := range []struct {
		addr string
		bits uint8
		want string
	}{
		{"10.244.1.2", 24, "10.244.1.2/24"},
		{"10.244.1.2", 0, "10.244.1.2/24"}, // length from the subnet
		{"192.168.0.9", 0, "192.168.0.9/32"},
		{"fd00::5", 0, "fd00::5/128"},
		{"::ffff:10.244.1.2", 24, "10.244.1.2/24"},
	} {
		got, err := readIPConfig(tt.addr, tt.bits, subnets)
		if err != nil || got.String() != tt.want {
			t.Errorf("readIPConfig(%q, %d) = %v, %v; want %s", tt.addr, tt.bits, got, err, tt.want)
		}
	}
	for _, bad := range []struct {
		addr string
		bits uint8
	}{{"", 24}, {"10.244.1.300", 24}, {"10.244.1.2", 33}} {
		if _, err := readIPConfig(bad.addr, bad.bits, subnets); err == nil {
			t.Errorf("readIPConfig(%q, %d) succeeded, want an error", bad.addr, bad.bits)
		}
	}
	if defaultRoute(netip.MustParseAddr("10.0.0.1")) != "0.0.0.0/0" || defaultRoute(netip.MustParseAddr("fd00::1")) != "::/0" {
		t.Error("defaultRoute picks the wrong family")
	}
}
