package policy_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/policy"
)

// TestServicesMatchPerProtocol: destination.services without a protocol
// matches each service port with its own protocol, as Calico does — one
// rule per protocol, each with that protocol's target ports.
func TestServicesMatchPerProtocol(t *testing.T) {
	dns := intent.Service{Service: corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"k8s-app": "kube-dns"}, Ports: []corev1.ServicePort{
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
			{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("dns-tcp")},
		}},
	}}
	m := intent.Manifests{CalicoPolicies: []intent.CalicoPolicy{{
		ObjectMeta: metav1.ObjectMeta{Name: "to-dns", Namespace: "app"},
		Spec: intent.CalicoPolicySpec{Egress: []intent.Rule{{Action: "Allow",
			Destination: intent.EntityRule{Services: &intent.ServiceMatch{Name: "kube-dns", Namespace: "kube-system"}}}}},
	}}}
	prog, findings := policy.Compile(&m, []intent.Service{dns}, func(string) diag.Severity { return diag.Error })
	if findings.HasErrors() {
		t.Fatalf("findings: %v", findings)
	}
	rules := prog.Tiers[0].Policies[0].EgressRules
	if len(rules) != 2 {
		t.Fatalf("%d rules, want one per protocol: %+v", len(rules), rules)
	}
	if r := rules[0]; r.Protocol != 6 || len(r.Remote.NamedPorts) != 1 || r.Remote.NamedPorts[0] != "dns-tcp" || r.Remote.Ports != nil {
		t.Errorf("TCP rule = %+v", r)
	}
	if r := rules[1]; r.Protocol != 17 || len(r.Remote.Ports) != 1 || r.Remote.Ports[0].First != 53 {
		t.Errorf("UDP rule = %+v", r)
	}
	for _, r := range rules {
		if r.Remote.Selector != `k8s-app == "kube-dns" && projectcalico.org/namespace == "kube-system"` {
			t.Errorf("selector %q", r.Remote.Selector)
		}
	}
}

// TestServicesWithoutSelectorRelated: a services match of a Service that
// has no selector is reported at the rule, with the Service's position
// related; one of an unknown Service has nothing to relate.
func TestServicesWithoutSelectorRelated(t *testing.T) {
	svcPos := diag.Pos{File: "svc.yaml", Line: 1, Col: 1}
	headless := intent.Service{Service: corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: "app"}},
		Source: intent.Source{Pos: svcPos}}
	for _, tc := range []struct {
		service string
		want    []diag.Related
	}{
		{"ext", []diag.Related{{Pos: svcPos, Message: "Service app/ext, without a selector"}}},
		{"unknown", nil},
	} {
		m := intent.Manifests{CalicoPolicies: []intent.CalicoPolicy{{
			ObjectMeta: metav1.ObjectMeta{Name: "to-ext", Namespace: "app"},
			Source:     intent.Source{Pos: diag.Pos{File: "pol.yaml", Line: 1, Col: 1}},
			Spec: intent.CalicoPolicySpec{Egress: []intent.Rule{{Action: "Allow",
				Destination: intent.EntityRule{Services: &intent.ServiceMatch{Name: tc.service}}}}},
		}}}
		_, findings := policy.Compile(&m, []intent.Service{headless}, func(string) diag.Severity { return diag.Warning })
		if len(findings) != 1 || findings[0].Rule != "policy-application-layer" {
			t.Fatalf("%s: findings %v", tc.service, findings)
		}
		if f := findings[0]; !f.Pos.IsValid() || f.Pos == svcPos || !cmp.Equal(f.Related, tc.want) {
			t.Errorf("%s: finding at %s, related %v; want related %v", tc.service, f.Pos, f.Related, tc.want)
		}
	}
}
