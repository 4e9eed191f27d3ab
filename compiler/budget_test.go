package compiler_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestACLBudget: an endpoint whose rendered list passes 1,000 ACLs gets a
// policy-acl-budget warning; one just under does not. The list grows with
// an egress rule to a named port that 1,001 (or 990) backend pods map to
// different numbers: one ACL per number.
func TestACLBudget(t *testing.T) {
	for _, tt := range []struct {
		backends int
		warn     bool
	}{{1001, true}, {990, false}} {
		t.Run(fmt.Sprint(tt.backends), func(t *testing.T) {
			dir := t.TempDir()
			var inv strings.Builder
			inv.WriteString("apiVersion: v1\nkind: List\nitems:\n")
			inv.WriteString("- {apiVersion: v1, kind: Pod, metadata: {name: client, namespace: app, labels: {role: client}}, spec: {nodeName: win-1, containers: [{name: c, image: i}]}, status: {podIP: 192.168.0.10}}\n")
			for i := range tt.backends {
				fmt.Fprintf(&inv, "- {apiVersion: v1, kind: Pod, metadata: {name: b%d, namespace: app, labels: {role: backend}}, spec: {nodeName: linux-1, containers: [{name: c, image: i, ports: [{name: api, containerPort: %d}]}]}, status: {podIP: 10.%d.%d.%d}}\n",
					i, 20000+i, 100+i/65536, i/256%256, i%256)
			}
			write(t, dir, map[string]string{
				"intent/c.cue": clusterHead + "cluster: pools: default: cidr: \"192.168.0.0/16\"\n" + node("linux-1", 10) + node("win-1", 21),
				"intent/policy.yaml": `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: to-api, namespace: app}
spec:
  podSelector: {matchLabels: {role: client}}
  policyTypes: [Egress]
  egress:
  - to: [{podSelector: {matchLabels: {role: backend}}}]
    ports: [{port: api}]
`,
				"inventory.yaml": inv.String(),
			})
			res, findings := compileDir(t, filepath.Join(dir, "intent"), filepath.Join(dir, "inventory.yaml"))
			var warned bool
			for _, f := range findings {
				if f.Rule == "policy-acl-budget" {
					warned = true
					if !strings.Contains(f.Message, "pod app/client gets") {
						t.Errorf("message: %s", f)
					}
				}
			}
			if warned != tt.warn {
				t.Errorf("%d backends: policy-acl-budget warned=%v, want %v; findings: %v", tt.backends, warned, tt.warn, findings)
			}
			if len(res.Plans) != 1 || len(res.Plans[0].Endpoints) != 1 {
				t.Fatalf("want one plan with one endpoint")
			}
		})
	}
}
