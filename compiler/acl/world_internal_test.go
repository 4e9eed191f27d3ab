package acl

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// TestComparePods: comparePods orders pods exactly as their Keys compare,
// including namespaces one of which starts with the other, and hostile
// ones with a '/' in them.
func TestComparePods(t *testing.T) {
	names := []string{"", "a", "a-b", "a.b", "a/b", "a0", "ab", "b", "a/", "/", "a//b"}
	for _, ans := range names {
		for _, an := range names {
			for _, bns := range names {
				for _, bn := range names {
					a, b := &Pod{Namespace: ans, Name: an}, &Pod{Namespace: bns, Name: bn}
					if got, want := comparePods(a, b), strings.Compare(a.Key(), b.Key()); got != want {
						t.Errorf("comparePods(%q, %q) = %d, want %d", a.Key(), b.Key(), got, want)
					}
				}
			}
		}
	}
}

// TestEndpointView: the labels selectors see through endpoint are the
// map EndpointLabels makes, key for key, including a pod label that
// Calico's own labels override and a pod without a service account.
func TestEndpointView(t *testing.T) {
	pods := []*Pod{
		{Namespace: "shop", Name: "a", Labels: map[string]string{"app": "web", plan.LabelNamespace: "spoofed", plan.LabelServiceAccount: "own"}, ServiceAccount: "sa"},
		{Namespace: "shop", Name: "b", Labels: map[string]string{"app": "web", plan.LabelServiceAccount: "own"}},
		{Namespace: "x", Name: "c"},
	}
	for _, p := range pods {
		m := endpoint{p}.endpointMap()
		keys := slices.Collect(maps.Keys(m))
		keys = append(keys, "absent", plan.LabelNamespaceName)
		for _, k := range keys {
			v, ok := endpoint{p}.Get(k)
			wv, wok := m[k]
			if v != wv || ok != wok {
				t.Errorf("%s: Get(%q) = %q, %v; the map has %q, %v", p.Key(), k, v, ok, wv, wok)
			}
		}
	}
}
