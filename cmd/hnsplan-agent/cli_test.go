package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/applier/hns/hnswin"
	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// samplePlan is a small Overlay plan for node win-1.
func samplePlan() *plan.NodePlan {
	block := netip.MustParsePrefix("192.168.0.0/26")
	p := &plan.NodePlan{
		Kind: plan.Kind, FormatVersion: plan.FormatVersion + ".0", Node: "win-1",
		Network: plan.Network{
			Name: "Calico", Type: "Overlay",
			Ipams: []plan.Ipam{{Type: "Static", Subnets: []plan.Subnet{{
				IpAddressPrefix: block,
				Policies:        []plan.Policy{plan.NewPolicy(plan.VSID{IsolationId: 4096})},
				Routes:          []plan.Route{{NextHop: netip.MustParseAddr("192.168.0.1"), DestinationPrefix: netip.MustParsePrefix("0.0.0.0/0")}},
			}}}},
			Policies: []plan.Policy{plan.NewPolicy(plan.VxlanPort{Port: 4789}), plan.NewPolicy(plan.HostRouteSetting{})},
		},
		HostEndpoint: plan.Endpoint{Name: "Calico_ep", IpConfigurations: []plan.IpConfig{{IpAddress: netip.MustParseAddr("192.168.0.2"), PrefixLength: 26}},
			Flags: plan.FlagRemoteEndpoint, Policies: []plan.Policy{plan.NewPolicy(plan.ProviderAddress{ProviderAddress: netip.MustParseAddr("10.240.0.21")})}},
		PodEndpoint: plan.PodEndpointTemplate{Gateway: netip.MustParseAddr("192.168.0.1")},
	}
	setRoutes(p, []plan.RemoteSubnetRoute{{DestinationPrefix: netip.MustParsePrefix("192.168.0.64/26"), IsolationId: 4096,
		ProviderAddress: netip.MustParseAddr("10.240.0.22"), Node: "win-2", DistributedRouterMacAddress: "00-15-5D-7A-00-22"}})
	return p
}

// setRoutes gives p a route table holding routes.
func setRoutes(p *plan.NodePlan, routes []plan.RemoteSubnetRoute) {
	p.SetRoutes(plan.RemoteSubnetTable(p.Cluster, routes))
}

// moveRoute moves p's first route to the next provider address, in a
// route table of another key, so that p's digest changes too (a table
// of the same key would change the parts, not the plan).
func moveRoute(p *plan.NodePlan) {
	routes := p.RemoteSubnetRoutes()
	routes[0].ProviderAddress = routes[0].ProviderAddress.Next()
	t := plan.RemoteSubnetTable(p.Cluster, routes)
	key := plan.RouteKey(p.Cluster, "moved-"+routes[0].ProviderAddress.String(), t.Type, t.IsolationId, 0, nil)
	p.SetRoutes(plan.NewRouteTable(p.Cluster, key, t.Type, t.IsolationId, t.Nodes))
}

// setVNI gives p's network and routes the VNI vni.
func setVNI(p *plan.NodePlan, vni uint32) {
	p.Network.Ipams[0].Subnets[0].Policies = []plan.Policy{plan.NewPolicy(plan.VSID{IsolationId: vni})}
	routes := p.RemoteSubnetRoutes()
	for i := range routes {
		routes[i].IsolationId = vni
	}
	setRoutes(p, routes)
}

// encodeInto encodes p and writes the parts it names into dir (each file
// replaced atomically, before the plan that names it), as compile does;
// it returns the plan file's bytes.
func encodeInto(t *testing.T, dir string, p *plan.NodePlan) []byte {
	t.Helper()
	return encodeSignedInto(t, dir, p, nil)
}

// encodeSignedInto is encodeInto, with the route table heads signed by
// key (if not nil) as compile --sign-key signs them.
func encodeSignedInto(t *testing.T, dir string, p *plan.NodePlan, key ed25519.PrivateKey) []byte {
	t.Helper()
	parts, err := plan.EncodeParts([]*plan.NodePlan{p})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortStableFunc(parts, func(a, b plan.EncodedPart) int { // heads last
		return cmp.Compare(boolInt(a.Kind == plan.KindRouteTable), boolInt(b.Kind == plan.KindRouteTable))
	})
	for _, part := range parts {
		path := filepath.Join(dir, plan.PartFileName(part.Name))
		if key != nil && part.Kind == plan.KindRouteTable {
			writeAtomic(t, plan.SignatureFile(path), plan.Sign(part.Data, key))
		}
		writeAtomic(t, path, part.Data)
	}
	b, err := plan.Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func writePlan(t *testing.T, dir string) string {
	t.Helper()
	b := encodeInto(t, dir, samplePlan())
	path := filepath.Join(dir, "win-1.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestApplyErrors: every bad input gets its exit code and a message that
// names the cause, and a plan that does not verify changes nothing.
func TestApplyErrors(t *testing.T) {
	dir := t.TempDir()
	good := writePlan(t, dir)
	data, _ := os.ReadFile(good)
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(s), 0o644)
		return p
	}
	tampered := write("tampered.json", strings.Replace(string(data), "10.240.0.21", "10.240.0.29", 1))
	truncated := write("truncated.json", string(data[:len(data)/2]))
	corruptState := write("corrupt-state.json", "{")
	hostile := samplePlan()
	routes := hostile.RemoteSubnetRoutes()
	routes[0].DestinationPrefix = netip.MustParsePrefix("192.168.0.0/24") // over the node's own block
	hostileDir := t.TempDir()                                             // its route table is not the good plan's
	setRoutes(hostile, routes)
	invalid := filepath.Join(hostileDir, "invalid.json")
	writeAtomic(t, invalid, encodeInto(t, hostileDir, hostile))
	missing := samplePlan()
	moveRoute(missing) // a table of its own, not in dir
	missingPart := filepath.Join(dir, "missing-part.json")
	writeAtomic(t, missingPart, encodeInto(t, t.TempDir(), missing)) // its parts are elsewhere
	state := filepath.Join(dir, "state.json")

	for _, tc := range []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"no --once", []string{"apply", "--plan", good}, exitUsage, "apply needs --once"},
		{"no --plan", []string{"apply", "--once"}, exitUsage, "apply needs --plan FILE"},
		{"missing plan file", []string{"apply", "--once", "--plan", filepath.Join(dir, "nope.json")}, exitUsage, "nope.json does not exist"},
		{"unknown flag", []string{"apply", "--once", "--plan", good, "--force"}, exitUsage, "unknown flag: --force"},
		{"another node's plan", []string{"apply", "--once", "--plan", good, "--node", "win-2", "--hns", "mem:" + state}, exitFailed, "the last good plan stays applied"},
		{"tampered plan", []string{"apply", "--once", "--plan", tampered, "--node", "win-1", "--hns", "mem:" + state}, exitFailed, "digest"},
		{"truncated plan", []string{"apply", "--once", "--plan", truncated, "--node", "win-1", "--hns", "mem:" + state}, exitFailed, "not valid JSON (truncated?)"},
		{"verified but invalid plan", []string{"apply", "--once", "--plan", invalid, "--node", "win-1", "--hns", "mem:" + state}, exitFailed,
			"invalid.json: the plan's content is invalid: routeTable " + hostile.RouteTable.Name + ".nodes[win-2].blocks[0]: 192.168.0.0/24 overlaps the node's own block 192.168.0.0/26"},
		{"parts not beside the plan", []string{"apply", "--once", "--plan", missingPart, "--node", "win-1", "--hns", "mem:" + state}, exitFailed,
			"waiting for part " + missing.RouteTable.Name + " with key " + missing.RouteTable.Key + " (" + filepath.Join(dir, plan.PartFileName(missing.RouteTable.Name)) + "): not published yet"},
		{"unknown HNS", []string{"apply", "--once", "--plan", good, "--node", "win-1", "--hns", "hyperv"}, exitUsage, `--hns "hyperv"`},
		{"corrupt state file", []string{"apply", "--once", "--plan", good, "--node", "win-1", "--hns", "mem:" + corruptState}, exitFailed, "corrupt-state.json"},
		{"simulate-cni with a dry run", []string{"apply", "--once", "--plan", good, "--node", "win-1", "--dry-run", "--simulate-cni"}, exitUsage, "--simulate-cni needs --hns mem, and no --dry-run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(tc.args, &out, &errOut); code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.err) {
				t.Errorf("stderr %q does not say %q", errOut.String(), tc.err)
			}
			if _, err := os.Stat(state); err == nil {
				t.Errorf("a plan that does not verify wrote HNS state")
			}
		})
	}
}

// TestApplyRetries: apply --once runs the agent's pass: a transient HNS
// error is retried and the run succeeds; a permanent one stops the run
// with the typed error, and says how far it got.
func TestApplyRetries(t *testing.T) {
	p := samplePlan()
	if _, err := plan.Encode(p); err != nil {
		t.Fatal(err)
	}
	timeout := &hns.Error{Call: "hcnModifyNetwork", Code: 0x80070102, Msg: "wait timed out", Transient: true}
	agent := func(h hns.Client) *applier.Agent {
		a, err := applier.NewAgent(applier.Config{Node: p.Node, HNS: h, StateDir: t.TempDir(), HostRoutes: replace.NewMemRoutes(),
			Plans: &planwatch.File{Path: "plan.json", Node: p.Node}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}

	h := hnsmem.New()
	h.FailNext(hns.KindRoutes, timeout)
	a := agent(h)
	var out bytes.Buffer
	if err := applyOnce(context.Background(), &out, a, h, p, false, true); err != nil {
		t.Fatalf("a transient error was not retried: %v", err)
	}
	if !strings.Contains(out.String(), "HNS calls: 4 mutating") { // network, one batch of routes retried, host endpoint
		t.Errorf("output:\n%s", out.String())
	}
	out.Reset()
	if err := applyOnce(context.Background(), &out, a, h, p, false, true); err != nil || !strings.Contains(out.String(), "HNS matches the plan.") {
		t.Errorf("second run: %v\n%s", err, out.String())
	}

	h = hnsmem.New()
	h.FailNext(hns.KindEndpoint, &hns.Error{Call: "hcnCreateEndpoint", Code: hns.CodeInvalidPolicy, Msg: "invalid policy"})
	err := applyOnce(context.Background(), &out, agent(h), h, p, false, true)
	var he *hns.Error
	if !errors.As(err, &he) || he.Code != hns.CodeInvalidPolicy {
		t.Fatalf("err = %v, want the typed INVALID_POLICY error", err)
	}
	if !strings.Contains(err.Error(), "of 3 ops applied; the next pass resumes") {
		t.Errorf("err = %v, want how far it got", err)
	}
}

// TestCaptureDecodes: what capture writes reads back, through the
// agent's decoder, as the in-memory HNS it was taken from.
func TestCaptureDecodes(t *testing.T) {
	dir := t.TempDir()
	h, err := hnsmem.Open(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.AddNetwork(hns.Network{Name: "nat", Type: "NAT", Subnets: []hns.Subnet{{Prefix: netip.MustParsePrefix("172.29.144.0/20"), Gateway: netip.MustParseAddr("172.29.144.1")}}}); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"capture", "-o", filepath.Join(dir, "cap.json"), "--hns", "mem:" + filepath.Join(dir, "state.json")}, &stdout, &stderr); code != 0 {
		t.Fatalf("capture: exit %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "cap.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := hnswin.DecodeCapture(b)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := h.Snapshot(context.Background())
	if got.String() != want.String() || got.Networks[0].ID != want.Networks[0].ID {
		t.Errorf("capture reads back as\n%s\nwant\n%s", got, want)
	}
}
