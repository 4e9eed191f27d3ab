package applier_test

import (
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/kube"
)

// nsKube is fakeKube with namespaces.
type nsKube struct {
	*fakeKube
	namespaces []kube.Namespace
}

func (k *nsKube) Namespaces() []kube.Namespace { return k.namespaces }

// TestClusterCache: the Clusters a ClusterCache makes as the caches change
// (a pod's labels, address, ports, node; a pod gone, a pod new; a
// namespace's labels; nothing at all) are those ClusterOf makes from
// scratch, and so are the ACLs a pass wants from them, although the cache
// keeps the unchanged pods, and its World and renderer while nothing
// changed.
func TestClusterCache(t *testing.T) {
	ex := compile(t, "../examples/calico-vxlan", "../examples/inventory/calico-vxlan.yaml")
	p := ex.plans["win-1"]
	k := &nsKube{fakeKube: &fakeKube{synced: true, node: kube.Node{Name: "win-1"}}}
	for _, pod := range ex.cluster.Pods {
		kp := kube.Pod{Namespace: pod.Namespace, Name: pod.Name, Node: ex.cluster.PodNode(pod), ServiceAccount: pod.ServiceAccount,
			Labels: pod.Labels, IPs: []netip.Addr{pod.IP}}
		for _, np := range pod.Ports {
			kp.Ports = append(kp.Ports, kube.Port{Name: np.Name, Port: int32(np.Port), Protocol: map[int]string{6: "TCP", 17: "UDP", 132: "SCTP"}[np.Protocol]})
		}
		k.pods = append(k.pods, kp)
	}
	for _, ns := range slices.Sorted(maps.Keys(ex.cluster.Namespaces)) {
		k.namespaces = append(k.namespaces, kube.Namespace{Name: ns, Labels: ex.cluster.Namespaces[ns]})
	}
	find := func(name string) int {
		i := slices.IndexFunc(k.pods, func(p kube.Pod) bool { return p.Name == name })
		if i < 0 {
			t.Fatalf("no pod %s in the inventory", name)
		}
		return i
	}
	var cc applier.ClusterCache
	steps := []struct {
		name   string
		change func()
	}{
		{"first", func() {}},
		{"nothing", func() {}},
		{"labels", func() { k.pods[find("admin-1")].Labels = map[string]string{"role": "frontend"} }}, // now a peer of iis-1's policy
		{"address", func() { k.pods[find("reports-1")].IPs = []netip.Addr{netip.MustParseAddr("192.168.0.99")} }},
		{"ports", func() {
			i := find("cache-1")
			k.pods[i].Ports = append(slices.Clone(k.pods[i].Ports), kube.Port{Name: "extra", Port: 7000})
		}},
		{"service account", func() { k.pods[find("shop-1")].ServiceAccount = "other" }},
		{"gone", func() { k.pods = slices.Delete(slices.Clone(k.pods), find("iis-2"), find("iis-2")+1) }},
		{"new", func() {
			k.pods = append(k.pods, kube.Pod{Namespace: "web", Name: "iis-3", Node: "win-1", Labels: map[string]string{"app": "iis"},
				IPs: []netip.Addr{netip.MustParseAddr("192.168.0.12")}})
		}},
		{"namespace", func() {
			k.namespaces = slices.Clone(k.namespaces)
			for i := range k.namespaces {
				if k.namespaces[i].Name == "frontend" { // no longer what web's NetworkPolicy selects
					k.namespaces[i].Labels = map[string]string{"kubernetes.io/metadata.name": "elsewhere"}
				}
			}
		}},
		{"nothing again", func() {}},
	}
	for _, s := range steps {
		s.change()
		got, ok := cc.Of(k)
		want, ok2 := applier.ClusterOf(k)
		if !ok || !ok2 {
			t.Fatalf("%s: not synced", s.name)
		}
		if !reflect.DeepEqual(renderedPods(got), renderedPods(want)) || !maps.Equal(podNodesOf(got), podNodesOf(want)) ||
			!maps.EqualFunc(got.Namespaces, want.Namespaces, maps.Equal) {
			t.Errorf("%s: the cache's Cluster differs from ClusterOf's:\n%+v\n%+v", s.name, renderedPods(got), renderedPods(want))
		}
		gw, _, err := applier.WantOf(p, got)
		if err != nil {
			t.Fatal(err)
		}
		ww, _, err := applier.WantOf(p, want)
		if err != nil {
			t.Fatal(err)
		}
		if len(ww.PodACLs) == 0 || !reflect.DeepEqual(gw.PodACLs, ww.PodACLs) {
			t.Errorf("%s: the cache's Cluster wants other ACLs (%d lists) than ClusterOf's (%d)", s.name, len(gw.PodACLs), len(ww.PodACLs))
		}
	}
}

// renderedPods is c's pods by key, as the renderer sees them.
func renderedPods(c *applier.Cluster) map[string]string {
	out := map[string]string{}
	for _, p := range c.Pods {
		out[p.Key()] = fmt.Sprint(p.IP, p.Labels, p.ServiceAccount, p.Ports)
	}
	return out
}
