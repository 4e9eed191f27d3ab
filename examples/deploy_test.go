package examples_test

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/hnsplan/hnsplan/applier/kube"
	"github.com/hnsplan/hnsplan/applier/rollout"
)

const deployNamespace = "hnsplan-system"

// kustomization is what the tests read of deploy/kustomization.yaml, the
// kustomize base: decoded strictly, so a field kustomize would act on and
// the tests do not model fails here rather than goes unchecked.
type kustomization struct {
	APIVersion string           `yaml:"apiVersion"`
	Kind       string           `yaml:"kind"`
	Resources  []string         `yaml:"resources"`
	Images     []kustomizeImage `yaml:"images"`
}

// kustomizeImage is one entry of images: the containers whose image is
// Name get NewName (if set) and NewTag or Digest.
type kustomizeImage struct {
	Name    string `yaml:"name"`
	NewName string `yaml:"newName"`
	NewTag  string `yaml:"newTag"`
	Digest  string `yaml:"digest"`
}

// loadKustomization reads deploy/kustomization.yaml and checks that its
// resources are the files of deploy/, every one and nothing else: a
// manifest left out of it is one `kubectl apply -k` never applies.
func loadKustomization(t *testing.T) *kustomization {
	t.Helper()
	data, err := os.ReadFile("../deploy/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var k kustomization
	if err := dec.Decode(&k); err != nil {
		t.Fatalf("deploy/kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("deploy/kustomization.yaml is %s %s, want kustomize.config.k8s.io/v1beta1 Kustomization", k.APIVersion, k.Kind)
	}
	paths, err := filepath.Glob("../deploy/*.y*ml")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, p := range paths {
		if name := filepath.Base(p); name != "kustomization.yaml" {
			files = append(files, name)
		}
	}
	if got, want := slices.Sorted(slices.Values(k.Resources)), files; !slices.Equal(got, want) {
		t.Errorf("deploy/kustomization.yaml lists resources %q; deploy/ has %q: list every manifest, each once", got, want)
	}
	return &k
}

// image is what kustomize makes of a container's image: the images: entry
// of its name sets the name and the tag or digest.
func (k *kustomization) image(image string) string {
	for _, i := range k.Images {
		if i.Name != image {
			continue
		}
		name := cmp.Or(i.NewName, i.Name)
		if i.Digest != "" {
			return name + "@" + i.Digest
		}
		return name + ":" + i.NewTag
	}
	return image
}

// deployObjects decodes every YAML document of the kustomize base's
// resources, in its order, strictly (unknown or duplicate fields fail) into
// the API's typed objects, by file ("deploy/rbac.yaml", a path from the
// repository root). Container images are as kustomize renders them.
func deployObjects(t *testing.T) map[string][]runtime.Object {
	t.Helper()
	k := loadKustomization(t)
	var files []string
	for _, r := range k.Resources {
		files = append(files, "deploy/"+r)
	}
	for _, want := range []string{"deploy/namespace.yaml", "deploy/rbac.yaml", "deploy/daemonset.yaml"} {
		if !slices.Contains(files, want) {
			t.Fatalf("%s is missing", want)
		}
	}
	if _, err := os.Stat("../deploy/README.md"); err != nil {
		t.Errorf("deploy has no README.md: %v", err)
	}
	dec := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	objs := map[string][]runtime.Object{}
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(file)))
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for i := 1; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: document %d: %v", file, i, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			obj, gvk, err := dec.Decode(doc, nil, nil)
			if err != nil {
				t.Errorf("%s: document %d: %v", file, i, err)
				continue
			}
			switch obj := obj.(type) {
			case *appsv1.DaemonSet:
				for i, c := range obj.Spec.Template.Spec.Containers {
					obj.Spec.Template.Spec.Containers[i].Image = k.image(c.Image)
				}
			case *corev1.Namespace, *corev1.ServiceAccount,
				*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *rbacv1.Role, *rbacv1.RoleBinding,
				*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding:
			default:
				t.Errorf("%s: document %d: unexpected kind %s", file, i, gvk)
				continue
			}
			objs[file] = append(objs[file], obj)
		}
	}
	return objs
}

func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

// rbacSet is the RBAC of the deploy manifests, to evaluate requests with.
type rbacSet struct {
	clusterRoles map[string]*rbacv1.ClusterRole
	roles        map[string]*rbacv1.Role // namespace/name
	crbs         []*rbacv1.ClusterRoleBinding
	rbs          []*rbacv1.RoleBinding
	sas          map[string]bool // namespace/name
	namespaces   map[string]bool
}

func loadRBAC(t *testing.T) *rbacSet {
	s := &rbacSet{clusterRoles: map[string]*rbacv1.ClusterRole{}, roles: map[string]*rbacv1.Role{}, sas: map[string]bool{}, namespaces: map[string]bool{}}
	for file, objs := range deployObjects(t) {
		for _, o := range objs {
			switch o := o.(type) {
			case *corev1.Namespace:
				s.namespaces[o.Name] = true
			case *corev1.ServiceAccount:
				s.sas[o.Namespace+"/"+o.Name] = true
			case *rbacv1.ClusterRole:
				s.clusterRoles[o.Name] = o
			case *rbacv1.Role:
				s.roles[o.Namespace+"/"+o.Name] = o
			case *rbacv1.ClusterRoleBinding:
				s.crbs = append(s.crbs, o)
			case *rbacv1.RoleBinding:
				s.rbs = append(s.rbs, o)
			}
			// Namespaced objects live in hnsplan-system; cluster-scoped
			// ones name no namespace.
			ns := o.(interface{ GetNamespace() string }).GetNamespace()
			name := o.(interface{ GetName() string }).GetName()
			switch o.(type) {
			case *corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding, *appsv1.DaemonSet:
				if ns != deployNamespace {
					t.Errorf("%s: %T %s is in namespace %q, not %s", file, o, name, ns, deployNamespace)
				}
			default:
				if ns != "" {
					t.Errorf("%s: cluster-scoped %T %s names namespace %q", file, o, name, ns)
				}
			}
		}
	}
	return s
}

// allows reports whether ServiceAccount ns/sa may do verb on resource of
// group in namespace (cluster-wide if namespace is "").
func (s *rbacSet) allows(sa, namespace, group, resource, verb string) bool {
	subject := func(subs []rbacv1.Subject) bool {
		return slices.ContainsFunc(subs, func(x rbacv1.Subject) bool {
			return x.Kind == "ServiceAccount" && x.Namespace+"/"+x.Name == sa
		})
	}
	match := func(rules []rbacv1.PolicyRule) bool {
		return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb)
		})
	}
	for _, b := range s.crbs {
		if cr := s.clusterRoles[b.RoleRef.Name]; cr != nil && subject(b.Subjects) && match(cr.Rules) {
			return true
		}
	}
	if namespace == "" {
		return false
	}
	for _, b := range s.rbs {
		if b.Namespace != namespace || !subject(b.Subjects) {
			continue
		}
		var rules []rbacv1.PolicyRule
		if b.RoleRef.Kind == "ClusterRole" {
			if cr := s.clusterRoles[b.RoleRef.Name]; cr != nil {
				rules = cr.Rules
			}
		} else if r := s.roles[b.Namespace+"/"+b.RoleRef.Name]; r != nil {
			rules = r.Rules
		}
		if match(rules) {
			return true
		}
	}
	return false
}

func TestDeployRBAC(t *testing.T) {
	s := loadRBAC(t)
	if !s.namespaces[deployNamespace] {
		t.Errorf("no Namespace %s", deployNamespace)
	}
	var rules []rbacv1.PolicyRule
	for _, r := range s.clusterRoles {
		rules = append(rules, r.Rules...)
	}
	for _, r := range s.roles {
		rules = append(rules, r.Rules...)
	}
	for _, r := range rules {
		for _, field := range [][]string{r.Verbs, r.Resources, r.APIGroups, r.ResourceNames} {
			for _, v := range field {
				if strings.Contains(v, "*") {
					t.Errorf("rule %+v grants %q", r, v)
				}
			}
		}
		for _, res := range r.Resources {
			if res == "secrets" || strings.HasPrefix(res, "secrets/") {
				t.Errorf("rule %+v grants access to secrets", r)
			}
		}
		for _, v := range r.Verbs {
			if slices.Contains([]string{"escalate", "bind", "impersonate", "deletecollection"}, v) {
				t.Errorf("rule %+v grants %s", r, v)
			}
		}
		if len(r.NonResourceURLs) > 0 {
			t.Errorf("rule %+v grants non-resource URLs", r)
		}
	}
	// Bindings point at roles and ServiceAccounts that exist here.
	for _, b := range s.crbs {
		if s.clusterRoles[b.RoleRef.Name] == nil || b.RoleRef.Kind != "ClusterRole" {
			t.Errorf("ClusterRoleBinding %s: no ClusterRole %s", b.Name, b.RoleRef.Name)
		}
		for _, sub := range b.Subjects {
			if !s.sas[sub.Namespace+"/"+sub.Name] {
				t.Errorf("ClusterRoleBinding %s: no ServiceAccount %s/%s", b.Name, sub.Namespace, sub.Name)
			}
		}
		// ConfigMaps are never granted cluster-wide.
		if cr := s.clusterRoles[b.RoleRef.Name]; cr != nil {
			for _, r := range cr.Rules {
				if slices.Contains(r.Resources, "configmaps") {
					t.Errorf("ClusterRoleBinding %s grants configmaps in every namespace", b.Name)
				}
			}
		}
	}
	for _, b := range s.rbs {
		ok := s.roles[b.Namespace+"/"+b.RoleRef.Name] != nil
		if b.RoleRef.Kind == "ClusterRole" {
			ok = s.clusterRoles[b.RoleRef.Name] != nil
		}
		if !ok {
			t.Errorf("RoleBinding %s: no %s %s", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
		}
		for _, sub := range b.Subjects {
			if !s.sas[sub.Namespace+"/"+sub.Name] {
				t.Errorf("RoleBinding %s: no ServiceAccount %s/%s", b.Name, sub.Namespace, sub.Name)
			}
		}
	}

	const agent = deployNamespace + "/hnsplan-agent"
	const publisher = deployNamespace + "/hnsplan-publisher"
	for _, c := range []struct {
		sa, ns, group, resource, verb string
		want                          bool
	}{
		// What the agent needs.
		{agent, "", "", "nodes", "get", true},
		{agent, "", "", "nodes", "list", true},
		{agent, "", "", "nodes", "watch", true},
		{agent, "", "", "nodes", "patch", true},
		{agent, "", "", "pods", "list", true},
		{agent, "", "", "pods", "watch", true},
		{agent, "", "", "namespaces", "watch", true},
		{agent, "default", "", "pods/eviction", "create", true},
		{agent, "default", "", "events", "create", true},
		{agent, "default", "", "events", "patch", true},
		{agent, deployNamespace, "", "configmaps", "get", true},
		{agent, deployNamespace, "", "configmaps", "watch", true},
		{agent, "", "crd.projectcalico.org", "blockaffinities", "watch", true},
		{agent, deployNamespace, "coordination.k8s.io", "leases", "get", true},
		{agent, deployNamespace, "coordination.k8s.io", "leases", "list", true},
		{agent, deployNamespace, "coordination.k8s.io", "leases", "watch", true},
		{agent, deployNamespace, "coordination.k8s.io", "leases", "create", true},
		{agent, deployNamespace, "coordination.k8s.io", "leases", "update", true},
		{agent, deployNamespace, "coordination.k8s.io", "leases", "delete", true},
		// ... and no more.
		{agent, "default", "coordination.k8s.io", "leases", "create", false},
		{agent, "kube-node-lease", "coordination.k8s.io", "leases", "update", false},
		{agent, deployNamespace, "coordination.k8s.io", "leases", "patch", false},
		{agent, "default", "", "configmaps", "get", false},
		{agent, deployNamespace, "", "configmaps", "patch", false},
		{agent, "default", "", "pods", "delete", false},
		{agent, "", "", "nodes", "delete", false},
		{agent, "", "", "nodes", "update", false},
		{agent, deployNamespace, "", "secrets", "get", false},
		{agent, "", "crd.projectcalico.org", "blockaffinities", "patch", false},
		// What publish needs.
		{publisher, deployNamespace, "", "configmaps", "patch", true},
		{publisher, deployNamespace, "", "configmaps", "create", true},
		{publisher, deployNamespace, "", "configmaps", "list", true},
		{publisher, deployNamespace, "", "configmaps", "delete", true},
		{publisher, "", "", "namespaces", "get", true},
		{publisher, "", "", "namespaces", "create", true},
		{publisher, "", "", "namespaces", "patch", true},
		// ... and no more.
		{publisher, "default", "", "configmaps", "patch", false},
		{publisher, "", "", "nodes", "get", false},
		{publisher, deployNamespace, "", "secrets", "get", false},
	} {
		if got := s.allows(c.sa, c.ns, c.group, c.resource, c.verb); got != c.want {
			t.Errorf("%s may %s %s.%s in %q: %v, want %v", c.sa, c.verb, c.resource, c.group, c.ns, got, c.want)
		}
	}
	// The publisher may touch only its own namespace.
	for _, r := range s.clusterRoles["hnsplan-publisher-namespace"].Rules {
		if slices.Contains(r.Resources, "namespaces") && !slices.Equal(r.ResourceNames, []string{deployNamespace}) {
			t.Errorf("hnsplan-publisher may %v namespaces %v, want only %s", r.Verbs, r.ResourceNames, deployNamespace)
		}
	}
}

func TestDeployAdmissionPolicy(t *testing.T) {
	var policies, bindings []string
	for _, objs := range deployObjects(t) {
		for _, o := range objs {
			switch o := o.(type) {
			case *admissionv1.ValidatingAdmissionPolicy:
				policies = append(policies, o.Name)
				if len(o.Spec.Validations) == 0 || o.Spec.FailurePolicy == nil || *o.Spec.FailurePolicy != admissionv1.Fail {
					t.Errorf("policy %s: no validations or does not fail closed", o.Name)
				}
			case *admissionv1.ValidatingAdmissionPolicyBinding:
				bindings = append(bindings, o.Spec.PolicyName)
				if !slices.Contains(o.Spec.ValidationActions, admissionv1.Deny) {
					t.Errorf("binding %s does not deny", o.Name)
				}
			}
		}
	}
	slices.Sort(policies)
	slices.Sort(bindings)
	if !slices.Equal(policies, bindings) {
		t.Errorf("admission policies %v, bound %v: want each bound once", policies, bindings)
	}
}

// policyByName returns the deploy ValidatingAdmissionPolicy and its binding.
func policyByName(t *testing.T, name string) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	var p *admissionv1.ValidatingAdmissionPolicy
	var b *admissionv1.ValidatingAdmissionPolicyBinding
	for _, objs := range deployObjects(t) {
		for _, o := range objs {
			switch o := o.(type) {
			case *admissionv1.ValidatingAdmissionPolicy:
				if o.Name == name {
					p = o
				}
			case *admissionv1.ValidatingAdmissionPolicyBinding:
				if o.Spec.PolicyName == name {
					b = o
				}
			}
		}
	}
	if p == nil || b == nil {
		t.Fatalf("no ValidatingAdmissionPolicy %s with its binding in deploy/", name)
	}
	return p, b
}

// The two policies that confine each agent to its own node apply to every
// agent identity of rbac.yaml: a renamed ServiceAccount would make them
// match nothing, and so allow everything.
func TestDeployAgentPoliciesMatchTheAgent(t *testing.T) {
	s := loadRBAC(t)
	if !s.sas[deployNamespace+"/hnsplan-agent"] {
		t.Fatal("rbac.yaml has no ServiceAccount hnsplan-agent")
	}
	for _, name := range []string{"hnsplan-agent-own-node", "hnsplan-agent-own-node-evictions"} {
		p, _ := policyByName(t, name)
		var conds []string
		for _, c := range p.Spec.MatchConditions {
			conds = append(conds, c.Expression)
		}
		all := strings.Join(conds, "\n")
		if !strings.Contains(all, "'system:serviceaccount:"+deployNamespace+":hnsplan-agent'") {
			t.Errorf("policy %s: matchConditions %q do not name the agent's ServiceAccount", name, all)
		}
		if !strings.Contains(all, "authentication.kubernetes.io/node-name") && !strings.Contains(variablesOf(p), "authentication.kubernetes.io/node-name") {
			t.Errorf("policy %s does not read the node the token is bound to", name)
		}
	}
}

func variablesOf(p *admissionv1.ValidatingAdmissionPolicy) string {
	var vs []string
	for _, v := range p.Spec.Variables {
		vs = append(vs, v.Name+": "+v.Expression)
	}
	return strings.Join(vs, "\n")
}

// The eviction policy sees the evicted pod only as one of its parameters:
// every Pod of the eviction's namespace, none found meaning denied.
func TestDeployEvictionPolicyParams(t *testing.T) {
	p, b := policyByName(t, "hnsplan-agent-own-node-evictions")
	if p.Spec.ParamKind == nil || p.Spec.ParamKind.APIVersion != "v1" || p.Spec.ParamKind.Kind != "Pod" {
		t.Errorf("paramKind %+v, want v1 Pod", p.Spec.ParamKind)
	}
	ref := b.Spec.ParamRef
	switch {
	case ref == nil:
		t.Fatal("binding has no paramRef")
	case ref.Name != "" || ref.Namespace != "":
		t.Errorf("paramRef names %q in %q: want every pod of the request's namespace", ref.Name, ref.Namespace)
	case ref.Selector == nil || len(ref.Selector.MatchLabels) > 0 || len(ref.Selector.MatchExpressions) > 0:
		t.Errorf("paramRef selector %v, want {} (every pod)", ref.Selector)
	case ref.ParameterNotFoundAction == nil || *ref.ParameterNotFoundAction != admissionv1.DenyAction:
		t.Errorf("paramRef parameterNotFoundAction %v, want Deny", ref.ParameterNotFoundAction)
	}
	rules := p.Spec.MatchConstraints.ResourceRules
	if len(rules) != 1 || !slices.Equal(rules[0].Resources, []string{"pods/eviction"}) ||
		!slices.Equal(rules[0].Operations, []admissionv1.OperationType{admissionv1.Create}) {
		t.Errorf("policy matches %+v, want CREATE of pods/eviction", rules)
	}
}

// The node policy lets the agent write exactly the annotations applier/kube
// writes, and compares every field of a Node's spec but unschedulable.
func TestDeployNodePolicyFields(t *testing.T) {
	p, _ := policyByName(t, "hnsplan-agent-own-node")
	var keys []string
	for _, v := range p.Spec.Variables {
		if v.Name == "agentAnnotations" {
			for i, part := range strings.Split(v.Expression, "'") {
				if i%2 == 1 {
					keys = append(keys, part)
				}
			}
		}
	}
	want := []string{kube.AnnotationDigest, kube.AnnotationState, kube.AnnotationLastError, kube.AnnotationCordoned,
		kube.AnnotationLetGo, kube.AnnotationTunnelAddr, kube.AnnotationTunnelMAC}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Errorf("the policy lets the agent write annotations %q; applier/kube writes %q", keys, want)
	}

	var exprs []string
	for _, v := range p.Spec.Validations {
		exprs = append(exprs, v.Expression)
	}
	all := strings.Join(exprs, "\n")
	for f := range reflect.TypeFor[corev1.NodeSpec]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "unschedulable" {
			continue
		}
		for _, side := range []string{"object.spec.", "oldObject.spec."} {
			if !strings.Contains(all, side+name+" ") && !strings.Contains(all, side+name+")") {
				t.Errorf("the node policy does not compare %s%s: a new NodeSpec field the agent could change", side, name)
			}
		}
	}
	for _, field := range []string{"labels", "ownerReferences", "finalizers", "annotations"} {
		if !strings.Contains(all, "object.metadata."+field) && !strings.Contains(variablesOf(p), "object.metadata."+field) {
			t.Errorf("the node policy does not look at metadata.%s", field)
		}
	}
}

// TestDeployLeasePolicyNames: the lease policy speaks applier/rollout's
// names (the slot Leases' prefix and label) and the agents' namespace.
func TestDeployLeasePolicyNames(t *testing.T) {
	p, b := policyByName(t, "hnsplan-agent-own-slot")
	if p == nil || b == nil {
		t.Fatal("deploy/lease-policy.yaml: no policy hnsplan-agent-own-slot, or it is not bound")
	}
	var exprs []string
	for _, v := range p.Spec.Validations {
		exprs = append(exprs, v.Expression)
	}
	all := strings.Join(exprs, "\n")
	for _, want := range []string{"'" + rollout.NamePrefix + "'", "'" + rollout.SlotLabel + "'"} {
		if !strings.Contains(all, want) {
			t.Errorf("the lease policy's validations do not name %s (applier/rollout)", want)
		}
	}
	sel := p.Spec.MatchConstraints.NamespaceSelector
	if sel == nil || sel.MatchLabels["kubernetes.io/metadata.name"] != deployNamespace {
		t.Errorf("the lease policy matches namespaces %v, want %s only", sel, deployNamespace)
	}
}
