package reach_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	compiler "github.com/hnsplan/hnsplan/compiler/policy"
	"github.com/hnsplan/hnsplan/compiler/reach"
	"github.com/hnsplan/hnsplan/compiler/sim"
)

var (
	seeds     = flag.Int("seeds", 300, "how many random worlds TestDifferential checks")
	firstSeed = flag.Uint64("seed", 1, "the first seed TestDifferential checks")
)

var (
	testPorts  = []uint16{80, 81, 8050, 8080}
	testProtos = map[string]int{"TCP": 6, "UDP": 17}
	hostAddrs  = map[string][]netip.Addr{
		"win-1": {netip.MustParseAddr("10.240.0.21")}, "win-2": {netip.MustParseAddr("10.240.0.22")},
	}
)

// TestDifferential compares, cell by cell, what hnsplan decides (the
// program compiled from the manifests, the Windows pods' rendered ACL
// lists evaluated as HNS does, the Linux pods' side by reach.Linux: the
// matrix's path) with the reference evaluator's reading of Calico's
// documentation, over random worlds: namespaces, pods on two Windows and
// one Linux node, tiers, and Kubernetes and Calico policies with Pass,
// Deny, Log, notNets, notSelector, notPorts, port ranges, named ports,
// namespaceSelector, global(), orders and ties. Each end is compared on
// its own (egress at the source, ingress at the destination). A failing
// seed prints a minimised reproduction: its manifests and pods.
//
// go test ./compiler/reach -run Differential -seeds=5000 checks more.
func TestDifferential(t *testing.T) {
	start := time.Now()
	cells, closed := 0, 0
	failed := 0
	for seed := *firstSeed; seed < *firstSeed+uint64(*seeds); seed++ {
		w := gen{rand.New(rand.NewPCG(seed, 0x1ce12))}.world()
		bad, n, c, err := differ(w)
		cells, closed = cells+n, closed+c
		if err != nil {
			t.Errorf("seed %d: %v\n%s%s", seed, err, w.describe(), w.manifests())
			failed++
		} else if len(bad) > 0 {
			small := minimise(w)
			bad, _, _, _ = differ(small)
			t.Errorf("seed %d: hnsplan and the reference disagree; minimised reproduction:\n%s--- manifests\n%s--- cells\n%s",
				seed, small.describe(), small.manifests(), strings.Join(bad, "\n"))
			failed++
		}
		if failed >= 5 {
			t.Fatalf("stopping after %d failing seeds", failed)
		}
	}
	t.Logf("%d seeds from %d: %d cells (each end compared), %d denied where the compiler said it fails closed, in %v",
		*seeds, *firstSeed, cells, closed, time.Since(start).Round(time.Millisecond))
}

// aclWorld is w's pods as the renderer sees them, and the world of them.
func (w *world) aclWorld() ([]*acl.Pod, *acl.World) {
	var pods []*acl.Pod
	for _, p := range w.pods {
		ap := &acl.Pod{Namespace: p.ns, Name: p.name, IP: p.ip, Labels: p.labels, ServiceAccount: p.sa}
		for _, np := range p.ports {
			ap.Ports = append(ap.Ports, acl.NamedPort{Name: np.name, Protocol: testProtos[np.proto], Port: np.port})
		}
		pods = append(pods, ap)
	}
	nsLabels := map[string]map[string]string{}
	for _, ns := range w.namespaces {
		nsLabels[ns.name] = ns.labels
	}
	return pods, acl.NewWorld(pods, nsLabels, nil)
}

// differ returns the cells where hnsplan and the reference disagree.
//
// A cell where hnsplan denies what the reference allows is not counted as
// a disagreement when the compiler reported failing closed (a rule it
// cannot express on Windows, such as named ports with notPorts, dropped
// or narrowed): those are counted in closed. Failing open never is.
func differ(w *world) (bad []string, cells, closed int, err error) {
	var errs diag.List
	m := intent.ReadManifests("gen.yaml", []byte(w.manifests()), &errs)
	if errs.HasErrors() {
		return nil, 0, 0, fmt.Errorf("the manifests do not load: %v", errs)
	}
	prog, findings := compiler.Compile(&m, nil, func(string) diag.Severity { return diag.Info })
	if findings.HasErrors() {
		return nil, 0, 0, fmt.Errorf("compile: %v", findings)
	}
	failsClosed := false
	for _, f := range findings {
		failsClosed = failsClosed || strings.Contains(f.Message, "fail closed")
	}
	pods, world := w.aclWorld()
	renderer := acl.NewRenderer(prog, world)
	eps := map[string]*reach.Endpoint{}
	for i, p := range w.pods {
		e := &reach.Endpoint{Pod: pods[i], Node: p.node, OS: reach.OSLinux}
		if p.node != "lin-1" {
			e.OS = reach.OSWindows
			in, out, err := renderer.RenderOn(pods[i], hostAddrs[p.node])
			if err != nil {
				return nil, 0, 0, err
			}
			if e.ACL, err = sim.Compile(append(in, out...)); err != nil {
				return nil, 0, 0, err
			}
		}
		eps[p.key()] = e
	}
	d := reach.NewDecider(prog, world)
	for _, protoName := range []string{"TCP", "UDP"} {
		for _, port := range testPorts {
			for _, src := range w.pods {
				for _, dst := range w.pods {
					if src == dst {
						continue
					}
					v, err := d.Decide(eps[src.key()], eps[dst.key()], testProtos[protoName], port)
					if err != nil {
						return nil, 0, 0, err
					}
					c := conn{src: src, dst: dst, proto: protoName, srcPort: ephemeral, dstPort: port}
					for _, side := range []struct {
						name string
						got  reach.Side
						want decision
					}{{"egress", v.Egress, w.decide(c, false)}, {"ingress", v.Ingress, w.decide(c, true)}} {
						cells++
						if !side.got.Allowed && side.want.allowed && failsClosed {
							closed++
							continue
						}
						if side.got.Allowed != side.want.allowed {
							bad = append(bad, fmt.Sprintf("%s -> %s %s/%d, %s at %s (%s): hnsplan %s, reference %s (%s)",
								src.key(), dst.key(), protoName, port, side.name, side.got.Endpoint.Key(), side.got.Endpoint.OS,
								verdictWord(side.got.Allowed), verdictWord(side.want.allowed), side.want.why))
						}
					}
				}
			}
		}
	}
	return bad, cells, closed, nil
}

func verdictWord(allowed bool) string {
	if allowed {
		return "allows"
	}
	return "denies"
}

// minimise drops policies, rules, rule criteria, tiers and pods while the
// disagreement stays.
func minimise(w *world) *world {
	fails := func(c *world) bool {
		bad, _, _, err := differ(c)
		return err == nil && len(bad) > 0
	}
	for changed := true; changed; {
		changed = false
		for _, cand := range shrinks(w) {
			if fails(cand) {
				w, changed = cand, true
				break
			}
		}
	}
	return w
}

// shrinks lists the worlds one step smaller than w.
func shrinks(w *world) []*world {
	var out []*world
	clone := func() *world {
		c := &world{namespaces: w.namespaces, pods: append([]*pod(nil), w.pods...), tiers: append([]tier(nil), w.tiers...)}
		for _, p := range w.policies {
			q := *p
			q.ingress, q.egress = append([]rule(nil), p.ingress...), append([]rule(nil), p.egress...)
			q.kIngress, q.kEgress = append([]k8sRule(nil), p.kIngress...), append([]k8sRule(nil), p.kEgress...)
			c.policies = append(c.policies, &q)
		}
		return c
	}
	for i := range w.policies {
		c := clone()
		c.policies = append(c.policies[:i], c.policies[i+1:]...)
		out = append(out, c)
	}
	for i := range w.pods {
		if len(w.pods) > 2 {
			c := clone()
			c.pods = append(c.pods[:i], c.pods[i+1:]...)
			out = append(out, c)
		}
	}
	for i := range w.tiers {
		used := false
		for _, p := range w.policies {
			used = used || p.tier == w.tiers[i].name
		}
		if !used {
			c := clone()
			c.tiers = append(c.tiers[:i], c.tiers[i+1:]...)
			out = append(out, c)
		}
	}
	for i, p := range w.policies {
		for _, dir := range []*[]rule{&p.ingress, &p.egress} {
			for j := range *dir {
				c := clone()
				q := c.policies[i]
				rs := &q.ingress
				if dir == &p.egress {
					rs = &q.egress
				}
				*rs = append((*rs)[:j], (*rs)[j+1:]...)
				out = append(out, c)
				// And each criterion of the rule.
				for _, drop := range entityShrinks {
					c := clone()
					rs := &c.policies[i].ingress
					if dir == &p.egress {
						rs = &c.policies[i].egress
					}
					if drop(&(*rs)[j].src) || drop(&(*rs)[j].dst) {
						out = append(out, c)
					}
				}
			}
		}
		for _, dir := range []*[]k8sRule{&p.kIngress, &p.kEgress} {
			for j := range *dir {
				c := clone()
				rs := &c.policies[i].kIngress
				if dir == &p.kEgress {
					rs = &c.policies[i].kEgress
				}
				*rs = append((*rs)[:j], (*rs)[j+1:]...)
				out = append(out, c)
			}
		}
	}
	return out
}

// entityShrinks each clear one criterion, reporting whether it was set.
var entityShrinks = []func(e *entity) bool{
	func(e *entity) bool { ok := e.selector != nil; e.selector = nil; return ok },
	func(e *entity) bool { ok := e.notSelector != nil; e.notSelector = nil; return ok },
	func(e *entity) bool { ok := e.namespaceSelector != nil; e.namespaceSelector = nil; return ok },
	func(e *entity) bool { ok := e.serviceAccounts != nil; e.serviceAccounts = nil; return ok },
	func(e *entity) bool { ok := e.nets != nil; e.nets = nil; return ok },
	func(e *entity) bool { ok := e.notNets != nil; e.notNets = nil; return ok },
	func(e *entity) bool { ok := e.ports != nil; e.ports = nil; return ok },
	func(e *entity) bool { ok := e.notPorts != nil; e.notPorts = nil; return ok },
}
