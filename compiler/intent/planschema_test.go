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
// examples (examples/<name>/win-N.json, renamed <name>-win-N.json), the
// calico-vxlan parts and _index.json and the calico-bgp program chunk
// (_<part>.json, as compile names them). Package intent cannot import the
// compiler (it imports intent), so they are copies; regenerate them with
//
//	go build -o /tmp/hp ./cmd/hnsplan
//	for e in calico-vxlan calico-bgp flannel-host-gw; do /tmp/hp compile examples/$e -o /tmp/plans/$e; done
const planFixtures = "testdata/plans"

func planFiles(t testing.TB) []string {
	t.Helper()
	plans, _ := fixtures(t)
	if len(plans) < 7 {
		t.Fatalf("want the 7 example plans in %s, found %d", planFixtures, len(plans))
	}
	return plans
}

// partFiles are the part fixtures: _<part>.json.
func partFiles(t testing.TB) []string {
	t.Helper()
	_, parts := fixtures(t)
	if len(parts) < 6 {
		t.Fatalf("want the calico-vxlan and calico-bgp parts in %s, found %d", planFixtures, len(parts))
	}
	return parts
}

func fixtures(t testing.TB) (plans, parts []string) {
	files, err := filepath.Glob(filepath.Join(planFixtures, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		switch base := filepath.Base(f); {
		case base == plan.IndexFile:
		case strings.HasPrefix(base, "_"):
			parts = append(parts, f)
		default:
			plans = append(plans, f)
		}
	}
	return plans, parts
}

// partName is the name of the part in the fixture file f.
func partName(f string) string {
	return strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "_"), ".json")
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

// TestValidatePartFixtures: every part compile wrote verifies and fits
// the schema definition of its kind, and no other.
func TestValidatePartFixtures(t *testing.T) {
	kinds := map[string]int{}
	for _, f := range partFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data := readFile(t, f)
			var head struct{ Kind string }
			if err := json.Unmarshal(data, &head); err != nil {
				t.Fatal(err)
			}
			kinds[head.Kind]++
			var err error
			switch head.Kind {
			case plan.KindRouteTable:
				_, err = plan.DecodeRouteTable(data, partName(f))
			case plan.KindRouteShard:
				_, err = plan.DecodeRouteShard(data, partName(f))
			case plan.KindProgramChunk:
				_, err = plan.DecodeProgramChunk(data, partName(f))
			default:
				t.Fatalf("kind %q", head.Kind)
			}
			if err != nil {
				t.Fatalf("fixture is not a valid part: %v", err)
			}
			if err := ValidatePart(data); err != nil {
				t.Errorf("ValidatePart: %v", err)
			}
			if err := ValidatePlan(data); err == nil {
				t.Error("ValidatePlan accepted a part")
			}
		})
	}
	if kinds[plan.KindRouteTable] == 0 || kinds[plan.KindRouteShard] == 0 || kinds[plan.KindProgramChunk] == 0 {
		t.Errorf("fixtures of kinds %v: want every part kind", kinds)
	}
	if err := ValidatePart(readFile(t, planFiles(t)[0])); err == nil || !strings.Contains(err.Error(), `part of kind "NodePlan"`) {
		t.Errorf("ValidatePart of a plan: %v", err)
	}
}

// partFixture is the first part fixture of kind.
func partFixture(t *testing.T, kind string) string {
	t.Helper()
	for _, f := range partFiles(t) {
		var head struct{ Kind string }
		if json.Unmarshal(readFile(t, f), &head) == nil && head.Kind == kind {
			return f
		}
	}
	t.Fatalf("no %s fixture", kind)
	return ""
}

func TestValidatePartRejects(t *testing.T) {
	head, shard, chunk := partFixture(t, plan.KindRouteTable), partFixture(t, plan.KindRouteShard), partFixture(t, plan.KindProgramChunk)
	for _, tc := range []struct {
		name   string
		file   string
		mutate func(m map[string]any)
		path   string
		want   string
	}{
		{"format 1", head, func(m map[string]any) { m["formatVersion"] = "1" }, "formatVersion", "format 2"},
		{"head type", head, func(m map[string]any) { m["type"] = "BGP" }, "type", `"RemoteSubnet" or "Host"`},
		{"head name", head, func(m map[string]any) { m["name"] = "routes-XYZ" }, "name", "12 lower-case hex digits"},
		{"head key", head, func(m map[string]any) { m["key"] = "k" }, "key", "sha256"},
		{"shard named like a head", head, func(m map[string]any) {
			obj(m, "shards", 0)["name"] = "routes-0123456789ab"
		}, "shards[0].name", "route shard's name"},
		{"VNI 0", head, func(m map[string]any) { m["isolationId"] = 0 }, "isolationId", "out of bound"},
		{"shard without nodes", shard, func(m map[string]any) { delete(m, "nodes") }, "nodes", "required"},
		{"lower-case tunnel MAC", shard, func(m map[string]any) {
			obj(m, "nodes", 0)["tunnelMAC"] = "0e-2a-c0-a8-00-41"
		}, "nodes[0].tunnelMAC", `"0e-2a-c0-a8-00-41" (out of bound`},
		{"empty tunnel MAC", shard, func(m map[string]any) { obj(m, "nodes", 0)["tunnelMAC"] = "" }, "nodes[0].tunnelMAC", "out of bound"},
		{"block not a CIDR", shard, func(m map[string]any) {
			obj(m, "nodes", 0)["blocks"] = []any{"192.168.0.64/33"}
		}, "nodes[0].blocks[0]", "prefix length out of range"},
		{"liveBlocks false", shard, func(m map[string]any) { obj(m, "nodes", 0)["liveBlocks"] = false }, "nodes[0].liveBlocks", "conflicting values"},
		{"node name", shard, func(m map[string]any) { obj(m, "nodes", 0)["node"] = "Win_1" }, "nodes[0].node", "out of bound"},
		{"format 1 route entry", shard, func(m map[string]any) {
			obj(m, "nodes", 0)["DistributedRouterMacAddress"] = ""
		}, "nodes[0].DistributedRouterMacAddress", "not allowed"},
		{"chunk tier action", chunk, func(m map[string]any) { obj(m, "tiers", 0)["defaultAction"] = "Allow" }, "tiers[0].defaultAction", "conflicting values"},
		{"chunk name", chunk, func(m map[string]any) { m["name"] = "routes-0123456789ab" }, "name", "program chunk's name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidatePart(mutate(t, tc.file, tc.mutate))
			if err == nil {
				t.Fatal("ValidatePart accepted the part")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.path+": ") || !strings.Contains(msg, tc.want) {
				t.Errorf("error does not name %s (%q):\n%s", tc.path, tc.want, msg)
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
	if err := ValidatePlanIndex([]byte(`{"formatVersion":"2.3","kind":"PlanIndex","cluster":"c","plans":[],"parts":[]}`)); err != nil {
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
			obj(m, "podEndpoint", "Routes", 0)["DestinationPrefix"] = "192.168.0.64/33"
		}, "podEndpoint.Routes[0].DestinationPrefix", "prefix length out of range"},
		{"format 1 routes", vxlan, func(m map[string]any) {
			m["remoteSubnetRoutes"] = []any{}
		}, "remoteSubnetRoutes", "not allowed"},
		{"format 1 program", bgp, func(m map[string]any) {
			m["program"] = map[string]any{"tiers": []any{}}
		}, "program", "not allowed"},
		{"route table by digest", vxlan, func(m map[string]any) {
			obj(m, "routeTable")["digest"] = obj(m, "routeTable")["key"]
		}, "routeTable.digest", "not allowed"},
		{"route table name", vxlan, func(m map[string]any) {
			obj(m, "routeTable")["name"] = "../routes"
		}, "routeTable.name", "route table's name"},
		{"program chunk digest", bgp, func(m map[string]any) {
			obj(m, "programChunks", 0)["digest"] = "sha256:0"
		}, "programChunks[0].digest", "sha256"},
		{"no program chunks", bgp, func(m map[string]any) {
			m["programChunks"] = []any{}
		}, "programChunks", "MinItems"},
		{"not an IP", vxlan, func(m map[string]any) {
			obj(m, "podEndpoint")["Gateway"] = "192.168.0.300"
		}, "podEndpoint.Gateway", "does not satisfy net.IP"},
		{"unknown field in network", vxlan, func(m map[string]any) {
			obj(m, "network")["MacPool"] = map[string]any{}
		}, "network.MacPool", "not allowed"},
		{"policy-only with a network", vxlan, func(m map[string]any) {
			m["policyOnly"] = map[string]any{"owner": "azure-cni", "networks": []any{"azure.*"}}
		}, "network", "a policy-only plan creates no network"},
		{"owned without a network", vxlan, func(m map[string]any) {
			delete(m, "network")
		}, "network", "required"},
		{"policy-only of an unknown owner", vxlan, func(m map[string]any) {
			for _, k := range []string{"network", "hostEndpoint", "podEndpoint", "routeTable"} {
				delete(m, k)
			}
			m["policyOnly"] = map[string]any{"owner": "weave", "networks": []any{"azure.*"}}
		}, "policyOnly.owner", "weave"},
		{"unknown top-level field", vxlan, func(m map[string]any) {
			m["generatedAt"] = "2026-01-01"
		}, "generatedAt", "not allowed"},
		{"missing field", vxlan, func(m map[string]any) {
			delete(obj(m, "network"), "Immutable")
		}, "network.Immutable", "required"},
		{"network Type Transparent", vxlan, func(m map[string]any) {
			obj(m, "network")["Type"] = "Transparent"
		}, "network.Type", `"Overlay" or "L2Bridge"`},
		{"colon MAC", vxlan, func(m map[string]any) {
			obj(m, "hostEndpoint")["MacAddress"] = "00:15:5D:01:02:03"
		}, "hostEndpoint.MacAddress", `"00:15:5D:01:02:03" (out of bound`},
		{"empty host endpoint MAC", vxlan, func(m map[string]any) {
			obj(m, "hostEndpoint")["MacAddress"] = ""
		}, "hostEndpoint.MacAddress", `"" (out of bound`},
		{"digest not sha256", vxlan, func(m map[string]any) {
			m["digest"] = "md5:0123456789abcdef0123456789abcdef"
		}, "digest", "sha256"},
		{"formatVersion 1", vxlan, func(m map[string]any) {
			m["formatVersion"] = "1"
		}, "formatVersion", "format 2"},
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
		{"minor version", func(m map[string]any) { m["formatVersion"] = "2.7" }},
		{"resolved MAC", func(m map[string]any) {
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
		{"node outside the directory", func(m map[string]any) { m["plans"].([]any)[0] = "../win-1" }, "plans[0]"},
		{"absolute node", func(m map[string]any) { m["plans"].([]any)[0] = "/etc/win-1" }, "plans[0]"},
		{"format-1 entry", func(m map[string]any) {
			m["plans"].([]any)[1] = map[string]any{"node": "win-2", "file": "win-2.json", "digest": "sha256:ABC"}
		}, "plans[1]"},
		{"unknown field", func(m map[string]any) { m["generated"] = true }, "generated"},
		{"formatVersion", func(m map[string]any) { m["formatVersion"] = "1.0" }, "formatVersion"},
		{"no parts", func(m map[string]any) { delete(m, "parts") }, "parts"},
		{"part outside the directory", func(m map[string]any) { obj(m, "parts", 0)["file"] = "../" + obj(m, "parts", 0)["file"].(string) }, "parts[0].file"},
		{"part not beside the index", func(m map[string]any) { obj(m, "parts", 0)["file"] = "win-1.json" }, "parts[0].file"},
		{"part kind", func(m map[string]any) { obj(m, "parts", 0)["kind"] = "NodePlan" }, "parts[0].kind"},
		{"part name", func(m map[string]any) { obj(m, "parts", 0)["name"] = "win-1" }, "parts[0].name"},
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

// bigShard is a route shard of n nodes, each with a /26 block and a
// tunnel MAC, as the compiler encodes it (the schema does not check the
// digest's value).
func bigShard(t testing.TB, n int) []byte {
	t.Helper()
	s := plan.RouteShard{FormatVersion: plan.FormatVersion, Kind: plan.KindRouteShard, Name: "routes-0123456789ab-00",
		Digest: "sha256:" + strings.Repeat("0", 64), Cluster: "demo"}
	for i := range n {
		s.Nodes = append(s.Nodes, plan.RouteNode{
			Node:      fmt.Sprintf("node-%04d", i),
			Address:   netip.AddrFrom4([4]byte{172, 20, byte(i >> 8), byte(i)}),
			TunnelMAC: fmt.Sprintf("0E-2A-%02X-%02X-%02X-%02X", 10, byte(i>>10), byte(i>>2), byte(i&3)<<6),
			// /26 blocks of 10.0.0.0/8.
			Blocks: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 10), byte(i >> 2), byte(i&3) << 6}), 26)},
		})
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestValidateBigShard: a shard of 1,100 nodes (far more than a shard of a
// 5,000-node cluster holds) validates, and one bad block among them is
// found and named.
func TestValidateBigShard(t *testing.T) {
	data := bigShard(t, 1100)
	if err := ValidatePart(data); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	obj(m, "nodes", 1033)["blocks"] = []any{"10.1.2.3/26"}
	data, _ = json.Marshal(m)
	err := ValidatePart(data)
	if err == nil || !strings.Contains(err.Error(), "nodes[1033].blocks[0]: ") {
		t.Errorf("ValidatePart = %v, want an error at nodes[1033].blocks[0]", err)
	}
}

// BenchmarkValidateShard validates a route shard of 1,100 nodes.
func BenchmarkValidateShard(b *testing.B) {
	data := bigShard(b, 1100)
	if err := ValidatePart(data); err != nil { // also compiles the schema
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := ValidatePart(data); err != nil {
			b.Fatal(err)
		}
	}
}
