package examples_test

import (
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/hnsplan/hnsplan/applier/planwatch"
)

// TestDeployTrustedKeysRBAC: the agent may read the trusted-keys ConfigMap
// it watches with --trusted-keys-configmap through a Role of its own,
// limited to that one name, so narrowing the plans Role to one node's
// plan does not take it away.
func TestDeployTrustedKeysRBAC(t *testing.T) {
	s := loadRBAC(t)
	const agent = deployNamespace + "/hnsplan-agent"
	found := false
	for _, b := range s.rbs {
		r := s.roles[b.Namespace+"/"+b.RoleRef.Name]
		if b.Namespace != planwatch.ConfigMapNamespace || b.RoleRef.Kind != "Role" || r == nil ||
			!slices.ContainsFunc(b.Subjects, func(x rbacv1.Subject) bool { return x.Kind == "ServiceAccount" && x.Namespace+"/"+x.Name == agent }) {
			continue
		}
		for _, rule := range r.Rules {
			if slices.Equal(rule.ResourceNames, []string{planwatch.TrustedKeysName}) && slices.Contains(rule.Resources, "configmaps") {
				found = true
				for _, v := range []string{"get", "list", "watch"} {
					if !slices.Contains(rule.Verbs, v) {
						t.Errorf("Role %s: the agent cannot %s %s", r.Name, v, planwatch.TrustedKeysName)
					}
				}
				if len(rule.Verbs) != 3 {
					t.Errorf("Role %s grants %v on %s: the agent only reads it", r.Name, rule.Verbs, planwatch.TrustedKeysName)
				}
			}
		}
	}
	if !found {
		t.Errorf("no Role bound to %s grants configmaps named %s in %s", agent, planwatch.TrustedKeysName, planwatch.ConfigMapNamespace)
	}
}
