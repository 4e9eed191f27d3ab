package audit

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/hnsplan/hnsplan/applier/hns"
)

// BenchmarkAudit: a busy node's snapshot — 110 pods, 5,000 of
// kube-proxy's remote endpoints and 5,000 load balancers — audited as
// every pass does.
func BenchmarkAudit(b *testing.B) {
	have, want := node()
	var ps []Pod
	for i := range 110 {
		a := netip.AddrFrom4([4]byte{10, 244, 1, byte(i + 10)})
		have.Endpoints = append(have.Endpoints, hns.Endpoint{Name: fmt.Sprintf("pod-%d_Calico", i), Network: "Calico", IP: netip.PrefixFrom(a, 24)})
		ps = append(ps, Pod{Name: fmt.Sprintf("ns/p%d", i), Node: "win-1", IP: a})
	}
	for i := range 5000 {
		a := netip.AddrFrom4([4]byte{10, 245, byte(i >> 8), byte(i)})
		have.Endpoints = append(have.Endpoints, hns.Endpoint{Name: fmt.Sprintf("remote-%d", i), Network: "Calico", IP: netip.PrefixFrom(a, 32), Remote: true})
		have.LoadBalancers = append(have.LoadBalancers, hns.LoadBalancer{ID: fmt.Sprint(i)})
	}
	in := input(have, want)
	in.Pods = append(in.Pods, ps...)
	b.ReportAllocs()
	for b.Loop() {
		if r := Of(in); r.Problems != 0 {
			b.Fatal(r.Summary())
		}
	}
}
