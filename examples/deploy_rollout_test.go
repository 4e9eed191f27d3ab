package examples_test

import (
	"slices"
	"testing"
)

// TestDeployRolloutRBAC: the identity of deploy/rbac-rollout.yaml may do
// what `hnsplan rollout status` does (read the Nodes, and the plan
// ConfigMaps and slot Leases of hnsplan-system) and nothing more; the
// resume Role deletes Leases in hnsplan-system only and is bound by the
// operator, not by the base.
func TestDeployRolloutRBAC(t *testing.T) {
	s := loadRBAC(t)
	const status = deployNamespace + "/hnsplan-rollout-status"
	for _, c := range []struct {
		ns, group, resource, verb string
		want                      bool
	}{
		{"", "", "nodes", "get", true},
		{"", "", "nodes", "list", true},
		{"", "", "nodes", "watch", true},
		{deployNamespace, "", "configmaps", "list", true},
		{deployNamespace, "", "configmaps", "watch", true},
		{deployNamespace, "coordination.k8s.io", "leases", "list", true},
		{deployNamespace, "coordination.k8s.io", "leases", "watch", true},
		// ... and no more: it writes nothing.
		{"", "", "nodes", "patch", false},
		{deployNamespace, "", "configmaps", "patch", false},
		{"default", "", "configmaps", "list", false},
		{deployNamespace, "coordination.k8s.io", "leases", "delete", false},
		{"kube-node-lease", "coordination.k8s.io", "leases", "list", false},
		{"default", "", "events", "create", false},
		{deployNamespace, "", "secrets", "get", false},
	} {
		if got := s.allows(status, c.ns, c.group, c.resource, c.verb); got != c.want {
			t.Errorf("%s may %s %s.%s in %q: %v, want %v", status, c.verb, c.resource, c.group, c.ns, got, c.want)
		}
	}
	r := s.roles[deployNamespace+"/hnsplan-rollout-resume"]
	if r == nil {
		t.Fatal("rbac-rollout.yaml has no Role hnsplan-rollout-resume in " + deployNamespace)
	}
	if len(r.Rules) != 1 || !slices.Equal(r.Rules[0].Resources, []string{"leases"}) || !slices.Contains(r.Rules[0].Verbs, "delete") {
		t.Errorf("Role hnsplan-rollout-resume: %+v, want the deletion of leases only", r.Rules)
	}
	if cr := s.clusterRoles["hnsplan-rollout-resume-nodes"]; cr == nil || len(cr.Rules) != 1 ||
		!slices.Equal(cr.Rules[0].Resources, []string{"nodes"}) || !slices.Equal(cr.Rules[0].Verbs, []string{"patch"}) {
		t.Errorf("ClusterRole hnsplan-rollout-resume-nodes: %+v, want the patch of nodes only (resume's let-go)", cr)
	}
	for _, b := range s.crbs {
		if b.RoleRef.Name == "hnsplan-rollout-resume-nodes" {
			t.Errorf("ClusterRoleBinding %s binds hnsplan-rollout-resume-nodes: the operator binds it", b.Name)
		}
	}
	for _, b := range s.rbs {
		if b.RoleRef.Name == "hnsplan-rollout-resume" {
			t.Errorf("RoleBinding %s binds hnsplan-rollout-resume: the base grants resume to no one; the operator binds it", b.Name)
		}
	}
}
