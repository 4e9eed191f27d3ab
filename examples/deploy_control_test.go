package examples_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/hnsplan/hnsplan/applier/control"
)

// TestDeployControl: the base ships the control ConfigMap empty, the
// agents may get, list and watch it, and the Role hnsplan-rollout-control
// may get and patch that one ConfigMap and nothing else, bound to no one.
func TestDeployControl(t *testing.T) {
	var cm *corev1.ConfigMap
	for _, objs := range deployObjects(t) {
		for _, o := range objs {
			if c, ok := o.(*corev1.ConfigMap); ok && c.Name == control.Name {
				cm = c
			}
		}
	}
	if cm == nil || cm.Namespace != control.Namespace || len(cm.Data) != 0 || len(cm.BinaryData) != 0 {
		t.Fatalf("the base's %s/%s: %+v; want it, empty", control.Namespace, control.Name, cm)
	}
	s := loadRBAC(t)
	const agent = deployNamespace + "/hnsplan-agent"
	for _, verb := range []string{"get", "list", "watch"} {
		if !s.allows(agent, deployNamespace, "", "configmaps", verb) {
			t.Errorf("the agent may not %s ConfigMaps in %s: it cannot watch %s", verb, deployNamespace, control.Name)
		}
	}
	r := s.roles[deployNamespace+"/hnsplan-rollout-control"]
	if r == nil {
		t.Fatal("no Role hnsplan-rollout-control in " + deployNamespace)
	}
	if len(r.Rules) != 1 || !slices.Equal(r.Rules[0].Resources, []string{"configmaps"}) || !slices.Equal(r.Rules[0].ResourceNames, []string{control.Name}) ||
		!slices.Equal(r.Rules[0].Verbs, []string{"get", "patch"}) {
		t.Errorf("Role hnsplan-rollout-control: %+v, want get and patch of ConfigMap %s only", r.Rules, control.Name)
	}
	for _, b := range s.rbs {
		if b.RoleRef.Name == "hnsplan-rollout-control" {
			t.Errorf("RoleBinding %s binds hnsplan-rollout-control: the base grants it to no one", b.Name)
		}
	}
}
