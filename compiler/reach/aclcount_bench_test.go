package reach_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	compiler "github.com/hnsplan/hnsplan/compiler/policy"
)

// BenchmarkSeededACLCounts reports the ACL rules and address items of
// the Windows endpoints of TestDifferential's first 60 seeded worlds
// (Calico and Kubernetes policies with tiers, Pass, Deny, notNets,
// notSelector, notPorts, named ports), in total and per endpoint,
// optimised and unoptimised. A rule is one ACL of an endpoint's list,
// all counted; an address item is one entry of an ACL's RemoteAddresses.
// An op compiles and renders the 60 worlds.
func BenchmarkSeededACLCounts(b *testing.B) {
	var opt, plain [3]int // endpoints, rules, items
	for b.Loop() {
		opt, plain = [3]int{}, [3]int{}
		for seed := uint64(1); seed <= 60; seed++ {
			w := gen{rand.New(rand.NewPCG(seed, 0x1ce12))}.world()
			var errs diag.List
			m := intent.ReadManifests("gen.yaml", []byte(w.manifests()), &errs)
			if errs.HasErrors() {
				b.Fatalf("seed %d: %v", seed, errs)
			}
			prog, findings := compiler.Compile(&m, nil, func(string) diag.Severity { return diag.Info })
			if findings.HasErrors() {
				b.Fatalf("seed %d: %v", seed, findings)
			}
			pods, world := w.aclWorld()
			for _, t := range []struct {
				r *acl.Renderer
				c *[3]int
			}{{acl.NewRenderer(prog, world), &opt}, {acl.NewRenderer(prog, world).Unoptimised(), &plain}} {
				for i, p := range w.pods {
					if p.node == "lin-1" {
						continue
					}
					in, out, err := t.r.RenderOn(pods[i], hostAddrs[p.node])
					if err != nil {
						b.Fatal(err)
					}
					t.c[0]++
					for _, a := range append(in, out...) {
						t.c[1]++
						if a.RemoteAddresses != "" {
							t.c[2] += strings.Count(a.RemoteAddresses, ",") + 1
						}
					}
				}
			}
		}
	}
	b.ReportMetric(float64(opt[0]), "endpoints")
	for _, c := range []struct {
		n      [3]int
		suffix string
	}{{opt, ""}, {plain, "-unopt"}} {
		b.ReportMetric(float64(c.n[1]), "rules"+c.suffix)
		b.ReportMetric(float64(c.n[2]), "items"+c.suffix)
		b.ReportMetric(float64(c.n[1])/float64(c.n[0]), "rules/ep"+c.suffix)
		b.ReportMetric(float64(c.n[2])/float64(c.n[0]), "items/ep"+c.suffix)
	}
}
