package calicoapi_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/hnsplan/hnsplan/compiler/calicoapi"
)

// TestCatalog: every kind hnsplan reads is in the catalog, with the
// fields that mark its API generation, and the catalog says what it was
// made from.
func TestCatalog(t *testing.T) {
	want := map[string][]string{
		"FelixConfiguration":  {"bpfEnabled", "logSeverityScreen", "windowsManageFirewallRules", "vxlanVNI", "nftablesMode", "programClusterRoutes"},
		"IPPool":              {"cidr", "vxlanMode", "assignmentMode", "allowedUses"},
		"IPAMConfiguration":   {"strictAffinity", "maxBlocksPerHost", "kubeVirtVMAddressPersistence"},
		"BGPConfiguration":    {"asNumber", "serviceClusterIPs", "programClusterRoutes"},
		"NetworkPolicy":       {"selector", "ingress", "tier"},
		"GlobalNetworkPolicy": {"applyOnForward", "doNotTrack", "preDNAT", "namespaceSelector", "tier"},
		"Tier":                {"order", "defaultAction"},
		"HostEndpoint":        {"node", "interfaceName", "expectedIPs"},
		"Installation":        {"calicoNetwork", "serviceCIDRs", "windowsNodes", "kubernetesProvider", "cni"},
	}
	for kind, fields := range want {
		k, ok := calicoapi.Lookup(kind)
		if !ok {
			t.Errorf("kind %s is not in the catalog", kind)
			continue
		}
		for _, f := range fields {
			if k.Spec.Props[f] == nil {
				t.Errorf("%s has no field spec.%s", kind, f)
			}
		}
	}
	if got := calicoapi.Kinds(); len(got) != len(want) {
		t.Errorf("catalog kinds %v, want the %d above", got, len(want))
	}
	if src := calicoapi.Origin(); src.Module != "github.com/projectcalico/calico" || src.Version == "" || !strings.HasPrefix(src.Sum, "h1:") {
		t.Errorf("origin %+v: want the module, version and checksum", src)
	}
	f, _ := calicoapi.Lookup("FelixConfiguration")
	if n := len(f.Spec.Props); n < 180 {
		t.Errorf("FelixConfiguration has %d fields; the current API has more than 180", n)
	}
	if !f.Spec.Props["nftablesMode"].Newer || f.Spec.Props["bpfEnabled"].Newer {
		t.Error("newer.json's fields should be marked Newer, the module's not")
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		kind, spec string
		want       []string // "line:col path: message" (a part of it)
	}{
		{"FelixConfiguration", "bpfEnabled: true\nlogSeverityScreen: Debug\nbpfLogFilters: {all: 'tcp port 80'}\nkubeNodePortRanges: [30000, '30000:32767']\nbpfConntrackTimeouts: {tcpEstablished: 1h}\n", nil},
		{"FelixConfiguration", "bpfEnabled: yes please", []string{`1:13 spec.bpfEnabled: expected true or false, found "yes please"`}},
		{"FelixConfiguration", "healthPort: '9099'", []string{`1:13 spec.healthPort: expected an integer, found "9099"`}},
		{"FelixConfiguration", "bpfLogLevel: Loud", []string{`1:14 spec.bpfLogLevel: "Loud" does not match Calico's pattern ^(?i)(Off|Info|Debug)?$`}},
		{"FelixConfiguration", "logActionRateLimitBurst: 10000", []string{"1:26 spec.logActionRateLimitBurst: 10000 is above the maximum 9999"}},
		{"FelixConfiguration", "nftablesMode: Sometimes", []string{`1:15 spec.nftablesMode: must be one of Disabled, Enabled, Auto, not "Sometimes"`}},
		{"FelixConfiguration", "vxlanPrt: 4789", []string{`1:1 spec.vxlanPrt: unknown field "vxlanPrt": not a field of Calico's API (Calico v3.28 to v3.32); did you mean "vxlanPort"?`}},
		{"FelixConfiguration", "routeTableRange: {min: 1, max: 250, mid: 3}", []string{`1:37 spec.routeTableRange.mid: unknown field "mid"`}},
		{"FelixConfiguration", "failsafeInboundHostPorts: tcp:22", []string{"1:27 spec.failsafeInboundHostPorts: expected a list"}},
		{"IPPool", "cidr: 10.0.0.0/16\nallowedUses: [Workload, Everything]", []string{`2:25 spec.allowedUses[1]: must be one of Workload, Tunnel, LoadBalancer, not "Everything"`}},
		{"IPPool", "blockSize: 129", []string{"1:12 spec.blockSize: 129 is above the maximum 128"}},
		{"Installation", "calicoNetwork: {ipPools: [{cidr: 10.0.0.0/16, encapsulation: VXLAN, natOutgoing: Enabled}], windowsDataplane: HNS}\nserviceCIDRs: [10.96.0.0/12]", nil},
		{"Installation", "calicoNetwork: {ipPools: [{cidr: 10.0.0.0/16, encapsulation: Geneve}]}", []string{`1:62 spec.calicoNetwork.ipPools[0].encapsulation: must be one of IPIPCrossSubnet, IPIP, VXLAN, VXLANCrossSubnet, None, not "Geneve"`}},
		{"Installation", "windowsNodes: {vxlanMACPrefix: 0E-2A-01}", []string{`spec.windowsNodes.vxlanMACPrefix: "0E-2A-01" does not match`}},
	} {
		k, ok := calicoapi.Lookup(tc.kind)
		if !ok {
			t.Fatalf("no kind %s", tc.kind)
		}
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(tc.spec), &doc); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range k.Spec.Check(doc.Content[0], "spec") {
			got = append(got, fmt.Sprintf("%d:%d %s: %s", p.Node.Line, p.Node.Column, p.Path, p.Msg))
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s %q: problems %q, want %q", tc.kind, tc.spec, got, tc.want)
			continue
		}
		for i, w := range tc.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s %q: problem %q, want it to contain %q", tc.kind, tc.spec, got[i], w)
			}
		}
	}
}

// TestCheckBounded: a hostile value is quoted in an excerpt, not whole.
func TestCheckBounded(t *testing.T) {
	f, _ := calicoapi.Lookup("FelixConfiguration")
	long := strings.Repeat("x", 1<<20)
	for _, doc := range []string{"nftablesMode: " + long, "bpfLogLevel: " + long, "healthPort: " + long, strings.Repeat("k", 1000) + ": 1"} {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(doc), &n); err != nil {
			t.Fatal(err)
		}
		ps := f.Spec.Check(n.Content[0], "spec")
		if len(ps) != 1 {
			t.Fatalf("%d problems, want 1", len(ps))
		}
		if len(ps[0].Msg) > 400 {
			t.Errorf("message of %d bytes for a 1 MiB value: %.200s…", len(ps[0].Msg), ps[0].Msg)
		}
	}
}

func TestNearest(t *testing.T) {
	f, _ := calicoapi.Lookup("FelixConfiguration")
	for name, want := range map[string]string{"vxlanvni": "vxlanVNI", "bpfEnable": "bpfEnabled", "somethingElse": "", "ipipMtu": "ipipMTU"} {
		if got := f.Spec.Nearest(name); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", name, got, want)
		}
	}
	if !slices.Contains(calicoapi.Kinds(), "Installation") {
		t.Error("no Installation")
	}
}
