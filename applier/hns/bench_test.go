package hns

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// bigNode is one node at the scale: 1 network, 1,100 remote
// routes, 110 pod endpoints with 200 ACLs each. have equals want except
// for changed routes and endpoints.
func bigNode(changedRoutes, changedEndpoints int) (*State, *Want) {
	w := &Want{PodACLs: map[netip.Addr][]plan.ACL{}}
	w.Network = Network{Name: "Calico", Type: "Overlay", VXLANPort: 4789, HostRoute: true,
		Subnets: []Subnet{{Prefix: pfx("192.168.0.0/25"), Gateway: addr("192.168.0.1"), VNI: 4096}}}
	for i := range 1100 {
		w.Network.RemoteRoutes = append(w.Network.RemoteRoutes, RemoteRoute{
			Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 10), byte(i >> 2), byte(i % 4 * 64)}), 26), VNI: 4096,
			ProviderAddress: netip.AddrFrom4([4]byte{172, 20, byte(i / 250), byte(i%250 + 2)}), DRMAC: fmt.Sprintf("00-15-5D-00-%02X-%02X", i/256, i%256)})
	}
	w.HostEndpoint = Endpoint{Name: "Calico_ep", Network: "Calico", IP: pfx("192.168.0.2/25"), Remote: true}
	have := &State{Networks: []Network{w.Network}, Endpoints: []Endpoint{w.HostEndpoint}}
	have.Networks[0].RemoteRoutes = append([]RemoteRoute(nil), w.Network.RemoteRoutes...)
	for i := range changedRoutes {
		have.Networks[0].RemoteRoutes[i].DRMAC = "00-15-5D-FF-FF-FF"
	}
	for e := range 110 {
		ip := netip.AddrFrom4([4]byte{192, 168, 0, byte(3 + e)})
		var acls []plan.ACL
		for j := range 200 {
			acls = append(acls, plan.ACL{Id: fmt.Sprintf("p%d-%d", e, j), Protocols: "6", Action: "Allow", Direction: []string{"In", "Out"}[j%2],
				RemoteAddresses: fmt.Sprintf("10.%d.%d.0/24", j/256, j%256), LocalPorts: "80", RuleType: "Switch", Priority: uint16(1000 + j)})
		}
		acls = CanonicalACLs(acls) // as WantFromPlan and the Snapshots give them
		w.PodACLs[ip] = acls
		haveACLs := append([]plan.ACL(nil), acls...)
		if e < changedEndpoints {
			haveACLs[5].LocalPorts = "81"
		}
		have.Endpoints = append(have.Endpoints, Endpoint{Name: fmt.Sprintf("pod%d_Calico", e), Network: "Calico",
			IP: netip.PrefixFrom(ip, 25), ACLs: haveACLs})
	}
	return have, w
}

// BenchmarkDiff diffs one node at the scale (target ≤ 5 ms), with
// 10 routes and 7 endpoints changed: ops must be exactly 2×10 + 7 (a moved
// route is removed and added: two objects differ).
func BenchmarkDiff(b *testing.B) {
	have, want := bigNode(10, 7)
	var ops []Op
	for b.Loop() {
		ops = Diff(have, want)
	}
	if len(ops) != 27 {
		b.Fatalf("%d ops, want 27", len(ops))
	}
	b.ReportMetric(float64(len(ops)), "ops")
}

// BenchmarkDiffEcho is BenchmarkDiff where HNS echoes every pod's ACLs
// without their Ids, and the baseline holds both forms for each of the
// 110 endpoints: the cost of comparing through the baseline when HNS
// echoes otherwise than it was asked. The ops are the same 27.
func BenchmarkDiffEcho(b *testing.B) {
	have, want := bigNode(10, 7)
	want.Echo = NewEcho()
	want.Echo.Endpoints = map[string]*EndpointEcho{}
	for i := range have.Endpoints {
		e := &have.Endpoints[i]
		if e.Name == "Calico_ep" {
			continue
		}
		sent := want.PodACLs[e.IP.Addr()]
		read := make([]plan.ACL, len(sent))
		for j, a := range sent {
			a.Id = ""
			read[j] = a
		}
		want.Echo.Endpoints[EndpointKey(e)] = &EndpointEcho{Name: e.Name, Pod: true,
			Sent: Endpoint{ACLs: sent}, Read: Endpoint{ACLs: CanonicalACLs(read)}}
		for j := range e.ACLs {
			e.ACLs[j].Id = ""
		}
	}
	var ops []Op
	for b.Loop() {
		ops = Diff(have, want)
	}
	if len(ops) != 27 {
		b.Fatalf("%d ops, want 27: %v", len(ops), ops)
	}
	b.ReportMetric(float64(len(ops)), "ops")
}
