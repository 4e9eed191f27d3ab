package ipam

import (
	"math/big"
	"net/netip"
	"testing"
)

func TestBlockAddresses(t *testing.T) {
	tests := []struct {
		block                 string
		gw, host, last        string
		reserved, notReserved []string
	}{
		{"192.168.1.0/26", "192.168.1.1", "192.168.1.2", "192.168.1.63", []string{"192.168.1.0", "192.168.1.1", "192.168.1.2", "192.168.1.63"}, []string{"192.168.1.3", "192.168.1.62"}},
		{"10.244.3.0/24", "10.244.3.1", "10.244.3.2", "10.244.3.255", nil, []string{"10.244.3.3"}},
		{"100.0.0.192/26", "100.0.0.193", "100.0.0.194", "100.0.0.255", []string{"100.0.0.192", "100.0.0.255"}, []string{"100.0.0.195"}},
		{"fd80::/122", "fd80::1", "fd80::2", "fd80::3f", nil, []string{"fd80::3"}},
	}
	for _, tt := range tests {
		b := Block{Prefix: netip.MustParsePrefix(tt.block)}
		if got := b.Gateway().String(); got != tt.gw {
			t.Errorf("%s: gateway %s, want %s", tt.block, got, tt.gw)
		}
		if got := b.HostEndpoint().String(); got != tt.host {
			t.Errorf("%s: host endpoint %s, want %s", tt.block, got, tt.host)
		}
		if got := Last(b.Prefix).String(); got != tt.last {
			t.Errorf("%s: last %s, want %s", tt.block, got, tt.last)
		}
		for _, a := range tt.reserved {
			if !b.Reserved(netip.MustParseAddr(a)) {
				t.Errorf("%s: %s not reserved", tt.block, a)
			}
		}
		for _, a := range tt.notReserved {
			if b.Reserved(netip.MustParseAddr(a)) {
				t.Errorf("%s: %s reserved", tt.block, a)
			}
		}
	}
}

func TestNthBlock(t *testing.T) {
	for _, tt := range []struct {
		pool string
		bits int
		i    int64
		want string
	}{
		{"192.168.0.0/16", 26, 0, "192.168.0.0/26"},
		{"192.168.0.0/16", 26, 5, "192.168.1.64/26"},
		{"192.168.0.0/16", 26, 1023, "192.168.255.192/26"},
		{"10.0.0.0/8", 24, 65535, "10.255.255.0/24"},
		{"fd00::/64", 122, 3, "fd00::c0/122"},
	} {
		if got := nthBlock(netip.MustParsePrefix(tt.pool), tt.bits, big.NewInt(tt.i)); got.String() != tt.want {
			t.Errorf("nthBlock(%s, /%d, %d) = %s, want %s", tt.pool, tt.bits, tt.i, got, tt.want)
		}
	}
}
