//go:build integration

package examples_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/hnsplan/hnsplan/internal/kubetest"
)

// TestHelmChartDryRun creates every object the chart renders on the real
// kube-apiserver with dryRun=All, as helm install creates them (a POST
// each): for the defaults, for namespace.create and for each trusted-key
// source, so every template and branch is validated and admitted by the
// API server. The namespace is created for real first (the API server
// refuses even a dry run in a namespace that does not exist): the chart's
// own when it renders one, else as helm's --create-namespace makes it. An
// object that exists already (another test applied the kustomize base for
// real) is validated by a dry-run server-side apply instead. Then one pod
// of the DaemonSet's template is created, dry run, so that Pod Security
// admission judges it against the namespace's level.
func TestHelmChartDryRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := kubetest.Config(t)
	mapper, dyn := kubetest.ApplyClients(t, cfg)
	cs := kubetest.Client(t, cfg)
	ch := loadChart(t)
	host := `apiServer.host="` + testAPIHost + `"`
	for _, tc := range []struct {
		name string
		ns   string
		set  []string
	}{
		{"defaults", deployNamespace, []string{host}},
		{"namespace.create", "kube-system", []string{host, "namespace.create=true"}},
		{"trusted keys inline", deployNamespace, []string{host, `trustedKeys.authorizedKeys="` + testKeyEd25519 + `"`}},
		{"trusted keys existing ConfigMap", deployNamespace, []string{host, "trustedKeys.existingConfigMap=true"}},
		{"trusted keys file", deployNamespace, []string{host, `trustedKeys.file="C:\\ProgramData\\hnsplan-keys\\authorized_keys"`, `image.digest="sha256:` + testDigest + `"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, err := renderChart(t, ch, tc.ns, setValues(t, tc.set...))
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			objs := chartObjects(t, files)
			nsKey := "Namespace " + deployNamespace
			if nsObj, ok := objs[nsKey]; ok {
				applyObject(t, ctx, dyn, mapper, "chart", nsObj)
				delete(objs, nsKey)
			} else if _, err := cs.CoreV1().Namespaces().Get(ctx, deployNamespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deployNamespace, Labels: map[string]string{"name": deployNamespace}}}
				if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					t.Fatal(err)
				}
			} else if err != nil {
				t.Fatal(err)
			}

			var ds *appsv1.DaemonSet
			created, applied := 0, 0
			for _, key := range slices.Sorted(maps.Keys(objs)) {
				obj := objs[key]
				err := dryRunCreate(t, ctx, dyn, mapper, obj)
				if apierrors.IsAlreadyExists(err) {
					opts := metav1.ApplyOptions{FieldManager: "hnsplan-helm-dryrun", Force: true, DryRun: []string{metav1.DryRunAll}}
					err = serverSideApply(t, ctx, dyn, mapper, "chart", obj, opts)
					applied++
				} else {
					created++
				}
				if err != nil {
					t.Errorf("%s: dry run: %v", key, err)
				}
				if d, ok := obj.(*appsv1.DaemonSet); ok {
					ds = d
				}
			}
			t.Logf("%d objects: %d created and %d (existing) applied, dry run", len(objs), created, applied)
			if ds == nil {
				t.Fatal("the chart renders no DaemonSet")
			}
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{
					Name: kubetest.UniqueName("hnsplan-agent-helm-dryrun"), Namespace: ds.Namespace,
					Labels: ds.Spec.Template.Labels, Annotations: ds.Spec.Template.Annotations,
				},
				Spec: *ds.Spec.Template.Spec.DeepCopy(),
			}
			if _, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Errorf("a pod of the DaemonSet's template is not admitted in %s: %v", pod.Namespace, err)
			}
		})
	}
}

const testDigest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// dryRunCreate POSTs obj with dryRun=All, as helm install creates it.
func dryRunCreate(t *testing.T, ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, obj runtime.Object) error {
	t.Helper()
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		t.Fatal(err)
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvks[0])
	m, err := mapper.RESTMapping(gvks[0].GroupKind(), gvks[0].Version)
	if err != nil {
		t.Fatal(err)
	}
	var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if ns := u.GetNamespace(); ns != "" {
		ri = dyn.Resource(m.Resource).Namespace(ns)
	}
	_, err = ri.Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: "helm"})
	return err
}

// TestHelmNotesPodSecurity: at install, with a cluster to look up, the
// chart's notes warn when hnsplan-system enforces a Pod Security level
// other than privileged (helm's --create-namespace does not set one),
// naming the command that fixes it; and say nothing of it when the level
// is privileged.
func TestHelmNotesPodSecurity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := kubetest.Config(t)
	cs := kubetest.Client(t, cfg)
	ch := loadChart(t)
	const label = "pod-security.kubernetes.io/enforce"
	ns, err := cs.CoreV1().Namespaces().Get(ctx, deployNamespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		ns, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deployNamespace}}, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	before, had := ns.Labels[label]
	setLevel := func(level string) {
		t.Helper()
		ns, err := cs.CoreV1().Namespaces().Get(ctx, deployNamespace, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		if level == "" {
			delete(ns.Labels, label)
		} else {
			ns.Labels[label] = level
		}
		if _, err := cs.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		if had {
			setLevel(before)
		} else {
			setLevel("")
		}
	}()
	notes := func() string {
		t.Helper()
		caps := chartutil.DefaultCapabilities.Copy()
		kv, err := chartutil.ParseKubeVersion(chartKube)
		if err != nil {
			t.Fatal(err)
		}
		caps.KubeVersion = *kv
		rv, err := chartutil.ToRenderValues(ch, setValues(t, `apiServer.host="`+testAPIHost+`"`),
			chartutil.ReleaseOptions{Name: "hnsplan", Namespace: deployNamespace, Revision: 1, IsInstall: true}, caps)
		if err != nil {
			t.Fatal(err)
		}
		files, err := engine.RenderWithClient(ch, rv, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return files["hnsplan/templates/NOTES.txt"]
	}
	const fix = "kubectl label --overwrite namespace hnsplan-system pod-security.kubernetes.io/enforce=privileged"
	setLevel("baseline")
	if n := notes(); !strings.Contains(n, "enforces the Pod Security level baseline") || !strings.Contains(n, fix) {
		t.Errorf("notes with hnsplan-system at baseline do not warn:\n%s", n)
	}
	setLevel("privileged")
	if n := notes(); strings.Contains(n, "Pod Security") {
		t.Errorf("notes with hnsplan-system at privileged warn:\n%s", n)
	}
}
