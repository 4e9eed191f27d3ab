package intent

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// The fixtures in testdata/plans are `hnsplan compile` output for the three
// examples (examples/<name>/win-N.json, renamed <name>-win-N.json) and the
// calico-vxlan _index.json. Package intent cannot import the compiler (it
// imports intent), so they are copies; regenerate them with
//
//	go build -o /tmp/hp ./cmd/hnsplan
//	for e in calico-vxlan calico-bgp flannel-host-gw; do /tmp/hp compile examples/$e -o /tmp/plans/$e; done
const planFixtures = "testdata/plans"

func planFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(planFixtures, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var plans []string
	for _, f := range files {
		if filepath.Base(f) != plan.IndexFile {
			plans = append(plans, f)
		}
	}
	if len(plans) < 7 {
		t.Fatalf("want the 7 example plans in %s, found %d", planFixtures, len(plans))
	}
	return plans
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestValidatePlanFixtures(t *testing.T) {
	for _, f := range planFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data := readFile(t, f)
			// The fixture is the encoder's own output: its digest holds.
			if _, err := plan.Decode(data, ""); err != nil {
				t.Fatalf("fixture is not a valid plan file: %v", err)
			}
			if err := ValidatePlan(data); err != nil {
				t.Errorf("ValidatePlan: %v", err)
			}
		})
	}
}

func TestValidatePlanIndexFixture(t *testing.T) {
	data := readFile(t, filepath.Join(planFixtures, plan.IndexFile))
	if err := ValidatePlanIndex(data); err != nil {
		t.Fatalf("ValidatePlanIndex: %v", err)
	}
	// An index of no plans.
	if err := ValidatePlanIndex([]byte(`{"formatVersion":"1.3","kind":"PlanIndex","cluster":"c","plans":[]}`)); err != nil {
		t.Errorf("empty index: %v", err)
	}
	// A plan is not an index, nor the other way round.
	if err := ValidatePlanIndex(readFile(t, planFiles(t)[0])); err == nil {
		t.Error("ValidatePlanIndex accepted a plan")
	}
	if err := ValidatePlan(data); err == nil {
		t.Error("ValidatePlan accepted an index")
	}
}

// mutate decodes a fixture into generic JSON, applies f and encodes it.
func mutate(t *testing.T, file string, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(readFile(t, file), &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// at walks a generic JSON value: a string steps into an object, an int
// into an array.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	return v
}

func obj(v any, path ...any) map[string]any { return at(v, path...).(map[string]any) }

func TestValidatePlanRejects(t *testing.T) {
	const vxlan = planFixtures + "/calico-vxlan-win-1.json"
	const bgp = planFixtures + "/calico-bgp-win-1.json"
	subnet := []any{"network", "Ipams", 0, "Subnets", 0}
	for _, tc := range []struct {
		name   string
		file   string
		mutate func(m map[string]any)
		path   string // the error names this field
		want   string // and says this
	}{
		{"host bits in a CIDR", vxlan, func(m map[string]any) {
			obj(m, subnet...)["IpAddressPrefix"] = "192.168.0.1/26"
		}, "network.Ipams[0].Subnets[0].IpAddressPrefix", `"192.168.0.1/26" has host bits set: the network prefix is "192.168.0.0/26"`},
		{"host bits in an OutBoundNAT exception", vxlan, func(m map[string]any) {
			obj(m, "podEndpoint", "Policies", 0, "Settings")["Exceptions"] = []any{"10.96.0.0/12", "10.240.0.7/24"}
		}, "podEndpoint.Policies[0].Settings.Exceptions[1]", "host bits"},
		{"not a CIDR", vxlan, func(m map[string]any) {
			obj(m, "remoteSubnetRoutes", 0)["DestinationPrefix"] = "192.168.0.64/33"
		}, "remoteSubnetRoutes[0].DestinationPrefix", "prefix length out of range"},
		{"not an IP", vxlan, func(m map[string]any) {
			obj(m, "podEndpoint")["Gateway"] = "192.168.0.300"
		}, "podEndpoint.Gateway", "does not satisfy net.IP"},
		{"unknown field in network", vxlan, func(m map[string]any) {
			obj(m, "network")["MacPool"] = map[string]any{}
		}, "network.MacPool", "not allowed"},
		{"unknown top-level field", vxlan, func(m map[string]any) {
			m["generatedAt"] = "2026-01-01"
		}, "generatedAt", "not allowed"},
		{"missing field", vxlan, func(m map[string]any) {
			delete(obj(m, "network"), "Immutable")
		}, "network.Immutable", "required"},
		{"network Type Transparent", vxlan, func(m map[string]any) {
			obj(m, "network")["Type"] = "Transparent"
		}, "network.Type", `"Overlay" or "L2Bridge"`},
		{"lower-case MAC", vxlan, func(m map[string]any) {
			obj(m, "remoteSubnetRoutes", 0)["DistributedRouterMacAddress"] = "0e-2a-c0-a8-00-41"
		}, "remoteSubnetRoutes[0].DistributedRouterMacAddress", `"0e-2a-c0-a8-00-41" (out of bound`},
		{"colon MAC", vxlan, func(m map[string]any) {
			obj(m, "hostEndpoint")["MacAddress"] = "00:15:5D:01:02:03"
		}, "hostEndpoint.MacAddress", `"00:15:5D:01:02:03" (out of bound`},
		{"empty host endpoint MAC", vxlan, func(m map[string]any) {
			obj(m, "hostEndpoint")["MacAddress"] = ""
		}, "hostEndpoint.MacAddress", `"" (out of bound`},
		{"digest not sha256", vxlan, func(m map[string]any) {
			m["digest"] = "md5:0123456789abcdef0123456789abcdef"
		}, "digest", "sha256"},
		{"formatVersion 2", vxlan, func(m map[string]any) {
			m["formatVersion"] = "2"
		}, "formatVersion", "format 1"},
		{"kind", vxlan, func(m map[string]any) {
			m["kind"] = "PlanIndex"
		}, "kind", "conflicting values"},
		{"VSID with a string IsolationId", vxlan, func(m map[string]any) {
			obj(m, append(subnet, "Policies", 0, "Settings")...)["IsolationId"] = "4096"
		}, "network.Ipams[0].Subnets[0].Policies[0].Settings.IsolationId", "mismatched types string and int"},
		{"VxlanPort out of range", vxlan, func(m map[string]any) {
			obj(m, "network", "Policies", 0, "Settings")["Port"] = 70000
		}, "network.Policies[0].Settings.Port", "65535"},
		{"HostRoute with settings", vxlan, func(m map[string]any) {
			obj(m, "network", "Policies", 1)["Settings"] = map[string]any{"x": 1}
		}, "network.Policies[1].Settings.x", "not allowed"},
		{"known policy without settings", bgp, func(m map[string]any) {
			delete(obj(m, "network", "Policies", 0), "Settings")
		}, "network.Policies[0].Settings", "required"},
		{"Immutable entry", bgp, func(m map[string]any) {
			obj(m, "network")["Immutable"] = []any{"Name", "Ipams"}
		}, "network.Immutable[1]", "Immutable entries"},
		{"Immutable twice", bgp, func(m map[string]any) {
			obj(m, "network")["Immutable"] = []any{"Name", "Name"}
		}, "network.Immutable", "UniqueItems"},
		{"PrefixLength", bgp, func(m map[string]any) {
			obj(m, "hostEndpoint", "IpConfigurations", 0)["PrefixLength"] = 129
		}, "hostEndpoint.IpConfigurations[0].PrefixLength", "out of bound <=128"},
		{"routing", bgp, func(m map[string]any) {
			m["routing"] = "ospf"
		}, "routing", "routing must be"},
		{"empty omitempty list", bgp, func(m map[string]any) {
			m["endpoints"] = []any{}
		}, "endpoints", "MinItems"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidatePlan(mutate(t, tc.file, tc.mutate))
			if err == nil {
				t.Fatal("ValidatePlan accepted the plan")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.path+": ") || !strings.Contains(msg, tc.want) {
				t.Errorf("error does not name %s (%q):\n%s", tc.path, tc.want, msg)
			}
		})
	}
}

func TestValidatePlanAccepts(t *testing.T) {
	const vxlan = planFixtures + "/calico-vxlan-win-1.json"
	for _, tc := range []struct {
		name   string
		mutate func(m map[string]any)
	}{
		{"unknown policy type", func(m map[string]any) {
			n := obj(m, "network")
			n["Policies"] = append(n["Policies"].([]any), map[string]any{"Type": "QOS", "Settings": map[string]any{"x": 1}})
		}},
		{"unknown policy type with extra fields", func(m map[string]any) {
			ep := obj(m, "hostEndpoint")
			ep["Policies"] = append(ep["Policies"].([]any), map[string]any{"Type": "QOS", "Settings": map[string]any{"Action": "Allow"}, "Note": "x"})
		}},
		{"minor version", func(m map[string]any) { m["formatVersion"] = "1.7" }},
		{"resolved MACs", func(m map[string]any) {
			obj(m, "remoteSubnetRoutes", 0)["DistributedRouterMacAddress"] = "0E-2A-C0-A8-00-41"
			obj(m, "hostEndpoint")["MacAddress"] = "00-15-5D-01-02-03"
		}},
		{"IPv6", func(m map[string]any) {
			obj(m, "network", "Ipams", 0, "Subnets", 0)["IpAddressPrefix"] = "fd00:10:244:1::/64"
			obj(m, "podEndpoint")["Gateway"] = "fd00:10:244:1::1"
			obj(m, "podEndpoint", "Routes", 0)["DestinationPrefix"] = "::/0"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := ValidatePlan(mutate(t, vxlan, tc.mutate)); err != nil {
				t.Errorf("ValidatePlan: %v", err)
			}
		})
	}
}

func TestValidatePlanIndexRejects(t *testing.T) {
	idx := filepath.Join(planFixtures, plan.IndexFile)
	for _, tc := range []struct {
		name   string
		mutate func(m map[string]any)
		path   string
	}{
		{"digest", func(m map[string]any) { obj(m, "plans", 1)["digest"] = "sha256:ABC" }, "plans[1].digest"},
		{"file outside the directory", func(m map[string]any) { obj(m, "plans", 0)["file"] = "../win-1.json" }, "plans[0].file"},
		{"absolute file", func(m map[string]any) { obj(m, "plans", 0)["file"] = "/etc/win-1.json" }, "plans[0].file"},
		{"unknown field", func(m map[string]any) { m["generated"] = true }, "generated"},
		{"formatVersion", func(m map[string]any) { m["formatVersion"] = "2.0" }, "formatVersion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidatePlanIndex(mutate(t, idx, tc.mutate))
			if err == nil {
				t.Fatal("ValidatePlanIndex accepted the index")
			}
			if !strings.Contains(err.Error(), tc.path+": ") {
				t.Errorf("error does not name %s:\n%v", tc.path, err)
			}
		})
	}
}

func TestValidatePlanNotJSON(t *testing.T) {
	for _, in := range []string{`{"formatVersion": "1",`, `formatVersion: "1"`, ``} {
		if err := ValidatePlan([]byte(in)); err == nil || !strings.Contains(err.Error(), "JSON") {
			t.Errorf("ValidatePlan(%q) = %v, want a JSON error", in, err)
		}
	}
}

// TestValidatePlanConcurrent validates from many goroutines at once (run
// with -race): the schema is compiled once and shared.
func TestValidatePlanConcurrent(t *testing.T) {
	files := planFiles(t)
	bad := mutate(t, files[0], func(m map[string]any) { m["digest"] = "x" })
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for _, f := range files {
				if err := ValidatePlan(readFile(t, f)); err != nil {
					t.Errorf("%s: %v", f, err)
				}
			}
			if i%2 == 0 {
				if err := ValidatePlan(bad); err == nil {
					t.Error("accepted a bad digest")
				}
			}
		})
	}
	wg.Wait()
}

// bigPlan is the calico-vxlan plan of win-1 with n remote subnet routes,
// encoded as the compiler does.
func bigPlan(t testing.TB, n int) []byte {
	t.Helper()
	p, err := plan.Decode(readFile(t, planFixtures+"/calico-vxlan-win-1.json"), "win-1")
	if err != nil {
		t.Fatal(err)
	}
	p.RemoteSubnetRoutes = p.RemoteSubnetRoutes[:0]
	for i := range n {
		// /26 blocks of 10.0.0.0/8 after the node's own.
		prefix := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 10), byte(i >> 2), byte(i&3) << 6}), 26)
		p.RemoteSubnetRoutes = append(p.RemoteSubnetRoutes, plan.RemoteSubnetRoute{
			DestinationPrefix: prefix,
			IsolationId:       4096,
			ProviderAddress:   netip.AddrFrom4([4]byte{172, 20, byte(i >> 8), byte(i)}),
			DistributedRouterMacAddress: fmt.Sprintf("0E-2A-%02X-%02X-%02X-%02X",
				10, byte(i>>10), byte(i>>2), byte(i&3)<<6),
			Node: fmt.Sprintf("node-%04d", i),
		})
	}
	data, err := plan.Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestValidateBigPlan(t *testing.T) {
	data := bigPlan(t, 1100)
	if err := ValidatePlan(data); err != nil {
		t.Fatal(err)
	}
	// One bad route among 1,100 is found and named.
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	obj(m, "remoteSubnetRoutes", 1033)["DestinationPrefix"] = "10.1.2.3/26"
	data, _ = json.Marshal(m)
	err := ValidatePlan(data)
	if err == nil || !strings.Contains(err.Error(), "remoteSubnetRoutes[1033].DestinationPrefix: ") {
		t.Errorf("ValidatePlan = %v, want an error at remoteSubnetRoutes[1033].DestinationPrefix", err)
	}
}

// BenchmarkValidatePlan validates a plan with 1,100 remote subnet routes
// (a 1,100-node VXLAN cluster).
func BenchmarkValidatePlan(b *testing.B) {
	data := bigPlan(b, 1100)
	if err := ValidatePlan(data); err != nil { // also compiles the schema
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := ValidatePlan(data); err != nil {
			b.Fatal(err)
		}
	}
}
