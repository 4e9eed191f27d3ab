package kubetest

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// NodeNameExtra is the user-info extra in which the API server names the
// node a ServiceAccount token is bound to, and which deploy/'s admission
// policies check (applier/kube's ExtraNodeName: kubetest cannot import
// that package, whose tests import this one).
const NodeNameExtra = "authentication.kubernetes.io/node-name"

// AgentUser is the user a token of deploy/'s hnsplan-agent ServiceAccount
// authenticates as.
const AgentUser = "system:serviceaccount:" + SystemNamespace + ":hnsplan-agent"

// ServiceAccountConfig acts, by impersonation, as the ServiceAccount sa of
// SystemNamespace with a token bound to node (its user info then carries
// the node's name in NodeNameExtra), or, for node "", bound to nothing.
func ServiceAccountConfig(admin *rest.Config, sa, node string) *rest.Config {
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + SystemNamespace + ":" + sa,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + SystemNamespace, "system:authenticated"},
	}
	if node != "" {
		cfg.Impersonate.Extra = map[string][]string{NodeNameExtra: {node}}
	}
	return cfg
}

// AgentConfig acts as the hnsplan-agent of node: what the policies of
// deploy/ see of an agent with a node-bound or pod-bound token.
func AgentConfig(admin *rest.Config, node string) *rest.Config {
	return ServiceAccountConfig(admin, "hnsplan-agent", node)
}

// ApplyDeploy server-side applies the kustomize base deploy/ of the
// repository (every resource its kustomization.yaml lists, the namespace
// first), as an operator would with kubectl apply -k. Images are as the
// manifests write them: no kubelet runs them here. The strict decoding of
// the manifests is examples/deploy_test.go's.
func ApplyDeploy(t testing.TB, ctx context.Context, cfg *rest.Config) {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "deploy")
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := utilyaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("deploy/kustomization.yaml: %v", err)
	}
	files := slices.Clone(k.Resources)
	first := func(f string) int {
		if f == "namespace.yaml" {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(files, func(a, b string) int { return cmp.Compare(first(a), first(b)) })
	mapper, dyn := ApplyClients(t, cfg)
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join(dir, file))
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
				t.Fatalf("deploy/%s: document %d: %v", file, i, err)
			}
			var obj map[string]any
			if err := utilyaml.Unmarshal(doc, &obj); err != nil {
				t.Fatalf("deploy/%s: document %d: %v", file, i, err)
			}
			if len(obj) == 0 {
				continue // comments only
			}
			u := &unstructured.Unstructured{Object: obj}
			if err := Apply(ctx, dyn, mapper, u, metav1.ApplyOptions{FieldManager: "hnsplan-deploy-test", Force: true}); err != nil {
				t.Fatalf("deploy/%s: document %d: %v", file, i, err)
			}
		}
	}
}

// ApplyClients are what Apply needs: a REST mapper from the API server's
// discovery, and a dynamic client.
func ApplyClients(t testing.TB, cfg *rest.Config) (meta.RESTMapper, dynamic.Interface) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return restmapper.NewDiscoveryRESTMapper(groups), dyn
}

// Apply applies u as `kubectl apply --server-side` does; the error names
// its kind and name.
func Apply(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, u *unstructured.Unstructured, opts metav1.ApplyOptions) error {
	gvk := u.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s: %w", gvk, err)
	}
	var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if ns := u.GetNamespace(); ns != "" {
		ri = dyn.Resource(m.Resource).Namespace(ns)
	}
	if _, err := ri.Apply(ctx, u.GetName(), u, opts); err != nil {
		return fmt.Errorf("server-side apply of %s %s: %w", gvk.Kind, u.GetName(), err)
	}
	return nil
}

// repoRoot is the directory of the repository's go.mod, above the test's
// working directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory: ApplyDeploy needs the repository's deploy/")
		}
		dir = up
	}
}

// WaitForPolicy retries probe until it fails with an error containing
// want: a new ValidatingAdmissionPolicy takes effect a moment after it is
// stored (and one with a paramKind once its informer has synced), and so
// do the RBAC rules the probe's identity needs to reach it.
func WaitForPolicy(t testing.TB, what, want string, probe func() error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := probe()
		if err != nil && strings.Contains(err.Error(), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the policy did not take effect within 60s: last result %v, want an error containing %q", what, err, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
