package policy_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/policy"
)

// BenchmarkACLCounts compiles issue 29's first two workloads as the CLI
// does (intent, inventory, plans) and reports the ACL rules and address
// items of their Windows endpoints, in total and per endpoint, optimised
// (what the plans hold) and unoptimised (each endpoint's flattened list
// laid out rule for rule):
//
//   - small: the inefficient policy alone (one GlobalNetworkPolicy on
//     all() narrowed by a destination selector) over smallWorkload's
//     1,000 pods on 10 Windows nodes (990 endpoints: Windows reserves .2
//     of each block); Felix renders 6,930 rules, 374,220 address items;
//   - big: BenchmarkDiffAccess's cluster (bigWorkload: 2,000 policies,
//     30,000 pods), the Windows node win-0000's 109 endpoints; Felix
//     renders 1,106 rules, 316,486 address items.
//
// A rule is one ACL of an endpoint's list, all of them counted (the host
// Allows and allow-host-to-endpoint too); an address item is one entry of
// an ACL's RemoteAddresses. An op is one compile.
func BenchmarkACLCounts(b *testing.B) {
	for _, c := range []struct {
		name       string
		cfg        workloadConfig
		program    func(w *workload)
		allWindows bool
	}{
		{"small", smallWorkload, func(w *workload) {
			w.manifests = intent.Manifests{CalicoPolicies: []intent.CalicoPolicy{calicoFromYAML(b, inefficientPolicyYAML)}}
		}, true},
		{"big", bigWorkload, func(*workload) {}, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			w := generateWorkload(c.cfg)
			c.program(w)
			inv := filepath.Join(dir, "inventory.yaml")
			writeWorkloadIntent(b, w, filepath.Join(dir, "intent"), inv)
			if c.allWindows {
				allWindowsNodes(b, filepath.Join(dir, "intent", "cluster.cue"))
			}
			var res *compiler.Result
			for b.Loop() {
				built := compiler.BuildEach([]string{filepath.Join(dir, "intent")}, compiler.Options{Inventory: []string{inv}})
				if built[0].Err != nil {
					b.Fatal(built[0].Err)
				}
				if built[0].Findings.HasErrors() || !built[0].Result.Compiled() {
					b.Fatalf("compile: %s", built[0].Findings.Summary())
				}
				res = built[0].Result
			}
			opt, plain := countPlans(b, res)
			report := func(c aclTally, suffix string) {
				b.ReportMetric(float64(c.rules), "rules"+suffix)
				b.ReportMetric(float64(c.items), "items"+suffix)
				b.ReportMetric(float64(c.rules)/float64(c.endpoints), "rules/ep"+suffix)
				b.ReportMetric(float64(c.items)/float64(c.endpoints), "items/ep"+suffix)
			}
			b.ReportMetric(float64(opt.endpoints), "endpoints")
			report(opt, "")
			report(plain, "-unopt")
		})
	}
}

// aclTally counts endpoints, their ACLs and address items.
type aclTally struct{ endpoints, rules, items int }

func (t *aclTally) add(acls []plan.ACL) {
	for _, a := range acls {
		t.rules++
		if a.RemoteAddresses != "" {
			t.items += strings.Count(a.RemoteAddresses, ",") + 1
		}
	}
}

// countPlans tallies the plans' endpoints as they are, and as they would
// be unoptimised: the same host ACLs, with each pod's lists rendered by an
// unoptimised renderer.
func countPlans(tb testing.TB, res *compiler.Result) (opt, plain aclTally) {
	world := acl.NewWorld(policy.Pods(&res.Intent.Inventory), policy.NamespaceLabels(res.Intent), nil)
	pods := map[string]*acl.Pod{}
	for _, p := range world.Pods {
		pods[p.Key()] = p
	}
	r := acl.NewRenderer(res.Program, world).Unoptimised()
	for _, np := range res.Plans {
		for _, ep := range np.Endpoints {
			var acls []plan.ACL
			for _, p := range ep.Policies {
				if a, ok := p.Settings.(plan.ACL); ok {
					acls = append(acls, a)
				}
			}
			if len(acls) == 0 {
				continue
			}
			opt.endpoints++
			plain.endpoints++
			opt.add(acls)
			pod := pods[ep.Pod]
			if pod == nil {
				tb.Fatalf("endpoint %s: no such pod", ep.Pod)
			}
			var hosts []netip.Addr
			for _, a := range acls {
				if a.Id == "allow-host-to-endpoint" {
					for _, s := range strings.Split(a.RemoteAddresses, ",") {
						hosts = append(hosts, netip.MustParsePrefix(s).Addr())
					}
				}
			}
			in, out, err := r.RenderOn(pod, hosts)
			if err != nil {
				tb.Fatal(err)
			}
			plain.add(in)
			plain.add(out)
		}
	}
	return opt, plain
}

// allWindowsNodes rewrites writeWorkloadIntent's cluster.cue so that every
// node is a Windows node, and adds a Linux node without pods for the
// control plane.
func allWindowsNodes(tb testing.TB, path string) {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	s := regexp.MustCompile(`\{os: "linux", address: "([^"]+)", `).ReplaceAllString(string(b),
		`{os: "windows", address: "$1", interface: "Ethernet", maxPods: 250, windows: build: "10.0.17763.1432", `)
	s = strings.Replace(s, "\t}\n}\n", "\t\t\"control-plane\": {os: \"linux\", address: \"172.22.0.2/16\", blocks: [\"10.131.0.0/24\"]}\n\t}\n}\n", 1)
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		tb.Fatal(err)
	}
}
