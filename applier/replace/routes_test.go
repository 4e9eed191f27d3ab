package replace

import (
	"net/netip"
	"slices"
	"testing"
)

func TestLostRoutes(t *testing.T) {
	pfx, addr := netip.MustParsePrefix, netip.MustParseAddr
	nicSubnet := Route{Prefix: pfx("10.0.0.0/24"), IfIndex: 7, IfAlias: "vEthernet (Ethernet)", Automatic: true}
	movedSubnet := Route{Prefix: pfx("10.0.0.0/24"), IfIndex: 12, IfAlias: "vEthernet (Ethernet)", Automatic: true}
	meta := Route{Prefix: pfx("169.254.169.254/32"), NextHop: addr("10.0.0.1"), IfIndex: 7, IfAlias: "vEthernet (Ethernet)", Metric: 15}
	onLink := Route{Prefix: pfx("172.16.0.0/16"), NextHop: addr("0.0.0.0"), IfIndex: 3, IfAlias: "Ethernet 2"}
	other3 := Route{Prefix: pfx("172.17.0.0/16"), IfIndex: 3, IfAlias: "Ethernet 2", Automatic: true}
	pods := Route{Prefix: pfx("192.168.0.0/26"), IfIndex: 9, IfAlias: "vEthernet (Calico)"}
	hnsSubnets := []netip.Prefix{pfx("192.168.0.0/26")}

	moved := meta
	moved.IfIndex = 12
	tests := []struct {
		name          string
		before, after []Route
		want          []Route
		wantErr       bool
	}{
		{name: "nothing lost", before: []Route{nicSubnet, meta}, after: []Route{nicSubnet, meta}},
		{name: "moved to the new interface", before: []Route{nicSubnet, meta}, after: []Route{movedSubnet}, want: []Route{moved}},
		{name: "same route on another interface is not lost", before: []Route{nicSubnet, meta}, after: []Route{movedSubnet, moved}},
		{name: "automatic and HNS routes are not restored", before: []Route{nicSubnet, pods}, after: []Route{movedSubnet}},
		{name: "on-link keeps a surviving interface", before: []Route{onLink, other3}, after: []Route{other3}, want: []Route{onLink}},
		{name: "listed twice, restored once", before: []Route{meta, meta}, after: []Route{movedSubnet}, want: []Route{moved}},
		{name: "nothing reaches it", before: []Route{meta}, after: []Route{other3}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := lostRoutes(tt.before, tt.after, hnsSubnets)
			if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
				t.Errorf("lostRoutes = %v, %v; want %v (error %t)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestBindVSwitch(t *testing.T) {
	m := NewMemRoutes(
		Route{Prefix: netip.MustParsePrefix("10.0.0.0/24"), IfIndex: 5, IfAlias: "Ethernet", Automatic: true},
		Route{Prefix: netip.MustParsePrefix("169.254.169.254/32"), NextHop: netip.MustParseAddr("10.0.0.1"), IfIndex: 5, IfAlias: "Ethernet"},
		Route{Prefix: netip.MustParsePrefix("127.0.0.0/8"), IfIndex: 1, IfAlias: "Loopback", Automatic: true},
	)
	m.BindVSwitch("Ethernet")
	want := "10.0.0.0/24 on-link dev 100 (vEthernet (Ethernet)) metric 0\n127.0.0.0/8 on-link dev 1 (Loopback) metric 0"
	if got := m.String(); got != want {
		t.Errorf("after the bind:\n%s\nwant:\n%s", got, want)
	}
}
