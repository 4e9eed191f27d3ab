package examples_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/internal/sshkey"
)

// The chart in deploy/helm/hnsplan renders the kustomize base's objects
// (deploy/kustomization.yaml) with Helm's own library (helm.sh/helm/v3, a
// test-only dependency: cmd/deps_test.go keeps it out of the binaries), as
// `helm install` renders them: values coalesced and checked against
// values.schema.json, then the templates executed.
const (
	chartDir       = "../deploy/helm/hnsplan"
	chartKube      = "v1.32.0" // the oldest Kubernetes whose tokens name their node (deploy/README.md)
	testAPIHost    = "10.0.0.10"
	testKeyEd25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBnVL3yeNgdhTO4SBmvmr3Z6Cm7OO5/r2ZPLTGOuPzTN ci@example"
)

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	return ch
}

// renderChart renders the chart for a release "hnsplan" in namespace ns
// with vals (as --set or -f give them) on a cluster of chartKube. It
// returns the rendered files by name, or the error helm install would
// report: a schema violation or a template's fail.
func renderChart(t *testing.T, ch *chart.Chart, ns string, vals map[string]any) (map[string]string, error) {
	t.Helper()
	caps := chartutil.DefaultCapabilities.Copy()
	v, err := chartutil.ParseKubeVersion(chartKube)
	if err != nil {
		t.Fatal(err)
	}
	caps.KubeVersion = *v
	// helm install refuses a chart whose kubeVersion excludes the cluster's.
	if !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, chartKube) {
		t.Fatalf("Chart.yaml kubeVersion %q excludes Kubernetes %s", ch.Metadata.KubeVersion, chartKube)
	}
	opts := chartutil.ReleaseOptions{Name: "hnsplan", Namespace: ns, Revision: 1, IsInstall: true}
	rv, err := chartutil.ToRenderValues(ch, vals, opts, caps)
	if err != nil {
		return nil, err
	}
	return engine.Render(ch, rv)
}

// chartObjects decodes the rendered manifests strictly, as deployObjects
// decodes the base's, keyed by objectKey.
func chartObjects(t *testing.T, files map[string]string) map[string]runtime.Object {
	t.Helper()
	dec := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		kjson.SerializerOptions{Yaml: true, Strict: true})
	objs := map[string]runtime.Object{}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if path.Ext(name) != ".yaml" {
			continue // NOTES.txt, _helpers.tpl
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(files[name])))
		for i := 1; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: document %d: %v", name, i, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			obj, _, err := dec.Decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("%s: document %d: %v\n%s", name, i, err, doc)
			}
			k := objectKey(obj)
			if _, dup := objs[k]; dup {
				t.Errorf("%s: %s rendered twice", name, k)
			}
			objs[k] = obj
		}
	}
	return objs
}

func objectKey(obj runtime.Object) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		panic(err)
	}
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		kind = fmt.Sprintf("%T", obj)
	}
	return kind + " " + path.Join(m.GetNamespace(), m.GetName())
}

// baseObjects is the kustomize base as kustomize renders it, keyed by
// objectKey.
func baseObjects(t *testing.T) map[string]runtime.Object {
	t.Helper()
	out := map[string]runtime.Object{}
	for _, objs := range deployObjects(t) {
		for _, o := range objs {
			out[objectKey(o)] = o
		}
	}
	return out
}

// diffObjects compares want and have object by object, field by field.
func diffObjects(t *testing.T, want, have map[string]runtime.Object) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		h, ok := have[k]
		if !ok {
			t.Errorf("the chart does not render %s", k)
			continue
		}
		wu, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want[k])
		if err != nil {
			t.Fatal(err)
		}
		hu, err := runtime.DefaultUnstructuredConverter.ToUnstructured(h)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(wu, hu); d != "" {
			t.Errorf("%s differs (-want +chart):\n%s", k, d)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(have)) {
		if _, ok := want[k]; !ok {
			t.Errorf("the chart renders %s, which it should not", k)
		}
	}
}

func endpointConfigMap(host, port string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "kubernetes-services-endpoint", Namespace: deployNamespace,
			Labels: map[string]string{"app.kubernetes.io/name": "hnsplan-agent"},
		},
		Data: map[string]string{"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port},
	}
}

func agentContainer(t *testing.T, objs map[string]runtime.Object) *corev1.Container {
	t.Helper()
	ds, ok := objs["DaemonSet "+deployNamespace+"/hnsplan-agent"].(*appsv1.DaemonSet)
	if !ok || len(ds.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("no DaemonSet %s/hnsplan-agent with one container", deployNamespace)
	}
	return &ds.Spec.Template.Spec.Containers[0]
}

func agentPod(t *testing.T, objs map[string]runtime.Object) *corev1.PodSpec {
	t.Helper()
	return &objs["DaemonSet "+deployNamespace+"/hnsplan-agent"].(*appsv1.DaemonSet).Spec.Template.Spec
}

// setValues builds values as helm's --set would, from "a.b=v" with v a
// JSON value ("x" must be quoted).
func setValues(t *testing.T, kv ...string) map[string]any {
	t.Helper()
	vals := map[string]any{}
	for _, s := range kv {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			t.Fatalf("setValues(%q): no =", s)
		}
		var val any
		if err := json.Unmarshal([]byte(v), &val); err != nil {
			t.Fatalf("setValues(%q): %v", s, err)
		}
		m := vals
		parts := strings.Split(k, ".")
		for _, p := range parts[:len(parts)-1] {
			next, ok := m[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[p] = next
			}
			m = next
		}
		m[parts[len(parts)-1]] = val
	}
	return vals
}

// TestHelmChartEqualsBase renders the chart for each set of values and
// compares every object with the kustomize base's, changed only as the
// values say.
func TestHelmChartEqualsBase(t *testing.T) {
	ch := loadChart(t)
	k := loadKustomization(t)
	const keyLine = testKeyEd25519
	host := `apiServer.host="` + testAPIHost + `"`
	for _, tc := range []struct {
		name string
		ns   string // the release's; default hnsplan-system
		set  []string
		// namespace: the chart renders the base's Namespace too.
		namespace bool
		// want changes the base's objects into what the chart must render.
		want func(t *testing.T, objs map[string]runtime.Object)
	}{
		{name: "defaults", set: []string{host}, want: func(t *testing.T, objs map[string]runtime.Object) {}},
		{name: "namespace.create", ns: "kube-system", set: []string{host, "namespace.create=true"}, namespace: true,
			want: func(t *testing.T, objs map[string]runtime.Object) {}},
		{name: "apiServer", set: []string{`apiServer.host="fd00:10::1"`, "apiServer.port=6443"},
			want: func(t *testing.T, objs map[string]runtime.Object) {
				objs["ConfigMap "+deployNamespace+"/kubernetes-services-endpoint"] = endpointConfigMap("fd00:10::1", "6443")
			}},
		{name: "image tag", set: []string{host, `image.registry="registry.example:5000"`, `image.repository="mirror/hnsplan-agent"`, `image.tag="v0.1.1-rc.1"`, `image.pullPolicy="Always"`},
			want: func(t *testing.T, objs map[string]runtime.Object) {
				c := agentContainer(t, objs)
				c.Image = "registry.example:5000/mirror/hnsplan-agent:v0.1.1-rc.1"
				c.ImagePullPolicy = corev1.PullAlways
			}},
		{name: "image digest", set: []string{host, `image.tag="ignored"`, `image.digest="sha256:` + strings.Repeat("ab", 32) + `"`},
			want: func(t *testing.T, objs map[string]runtime.Object) {
				agentContainer(t, objs).Image = "ghcr.io/hnsplan/hnsplan-agent@sha256:" + strings.Repeat("ab", 32)
			}},
		{name: "node selection", set: []string{host, `agentLabel.key="example.com/network"`, `agentLabel.value="hnsplan"`, `nodeSelector={"agentpool":"win22","node.kubernetes.io/windows-build":"10.0.20348"}`},
			want: func(t *testing.T, objs map[string]runtime.Object) {
				agentPod(t, objs).NodeSelector = map[string]string{
					"kubernetes.io/os": "windows", "example.com/network": "hnsplan",
					"agentpool": "win22", "node.kubernetes.io/windows-build": "10.0.20348",
				}
			}},
		{name: "tolerations", set: []string{host, `tolerations=[{"key":"os","operator":"Equal","value":"windows","effect":"NoSchedule"},{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":60}]`},
			want: func(t *testing.T, objs map[string]runtime.Object) {
				sixty := int64(60)
				agentPod(t, objs).Tolerations = []corev1.Toleration{
					{Key: "os", Operator: corev1.TolerationOpEqual, Value: "windows", Effect: corev1.TaintEffectNoSchedule},
					{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &sixty},
				}
			}},
		{name: "no tolerations", set: []string{host, `tolerations=[]`},
			want: func(t *testing.T, objs map[string]runtime.Object) { agentPod(t, objs).Tolerations = nil }},
		{name: "resources", set: []string{host, `resources={"requests":{"cpu":"100m","memory":"512Mi"},"limits":{"memory":"2Gi","cpu":2}}`},
			want: func(t *testing.T, objs map[string]runtime.Object) {
				agentContainer(t, objs).Resources = corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2Gi")},
				}
			}},
		{name: "trusted keys inline", set: []string{host, `trustedKeys.authorizedKeys="# CI's signing key\n` + keyLine + `\n\n"`},
			want: func(t *testing.T, objs map[string]runtime.Object) {
				c := agentContainer(t, objs)
				c.Args = append(c.Args, "--trusted-keys-configmap")
				objs["ConfigMap "+deployNamespace+"/"+planwatch.TrustedKeysName] = &corev1.ConfigMap{
					TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
					ObjectMeta: metav1.ObjectMeta{
						Name: planwatch.TrustedKeysName, Namespace: planwatch.ConfigMapNamespace,
						Labels: map[string]string{"app.kubernetes.io/name": "hnsplan-agent"},
					},
					Data: map[string]string{planwatch.TrustedKeysKey: "# CI's signing key\n" + keyLine + "\n"},
				}
			}},
		{name: "trusted keys existing ConfigMap", set: []string{host, `trustedKeys.existingConfigMap=true`},
			want: func(t *testing.T, objs map[string]runtime.Object) {
				c := agentContainer(t, objs)
				c.Args = append(c.Args, "--trusted-keys-configmap")
			}},
		{name: "trusted keys file", set: []string{host, `trustedKeys.file="C:\\ProgramData\\hnsplan-keys\\authorized_keys"`},
			want: func(t *testing.T, objs map[string]runtime.Object) {
				c := agentContainer(t, objs)
				c.Args = append(c.Args, `--trusted-keys=C:\ProgramData\hnsplan-keys\authorized_keys`)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.ns
			if ns == "" {
				ns = deployNamespace
			}
			files, err := renderChart(t, ch, ns, setValues(t, tc.set...))
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			have := chartObjects(t, files)
			want := baseObjects(t)
			// What the base leaves to the user, the chart creates: the
			// API server's address. A release in hnsplan-system cannot
			// create its own namespace (values.yaml, namespace).
			want["ConfigMap "+deployNamespace+"/kubernetes-services-endpoint"] = endpointConfigMap(testAPIHost, "443")
			if !tc.namespace {
				delete(want, "Namespace "+deployNamespace)
			}
			tc.want(t, want)
			diffObjects(t, want, have)
			if img := agentContainer(t, baseObjects(t)).Image; img != k.image("hnsplan-agent") {
				t.Fatalf("the base's image is %s", img)
			}

			// What the agent makes of the trusted keys the chart writes.
			if cm, ok := have["ConfigMap "+deployNamespace+"/"+planwatch.TrustedKeysName].(*corev1.ConfigMap); ok {
				ring, err := sshkey.ParseAuthorizedKeys([]byte(cm.Data[planwatch.TrustedKeysKey]), "trusted-keys")
				if err != nil || len(ring) != 1 {
					t.Errorf("the agent reads the chart's trusted keys as %d keys, %v", len(ring), err)
				}
			}
			if notes := files["hnsplan/templates/NOTES.txt"]; !strings.Contains(notes, testAPIHost) && tc.name != "apiServer" {
				t.Errorf("NOTES.txt does not name the API server:\n%s", notes)
			}
		})
	}
}

// TestHelmChartRefuses: values the objects cannot honour are refused when
// rendering, by values.schema.json or by the templates, saying what to set.
func TestHelmChartRefuses(t *testing.T) {
	ch := loadChart(t)
	host := `apiServer.host="` + testAPIHost + `"`
	for _, tc := range []struct {
		name string
		ns   string
		set  []string
		want string // in the error
	}{
		{"no host", "", nil, "apiServer.host is not set: give the API server's address"},
		{"empty host", "", []string{`apiServer.host=""`}, "--set apiServer.host=HOST"},
		{"host with scheme", "", []string{`apiServer.host="https://10.0.0.10:6443"`}, "no scheme, path or space"},
		{"host with port", "", []string{`apiServer.host="10.0.0.10:6443"`}, "give the port as apiServer.port"},
		{"port as string", "", []string{host, `apiServer.port="6443"`}, "at '/apiServer/port': got string, want integer"},
		{"port out of range", "", []string{host, `apiServer.port=70000`}, "at '/apiServer/port': maximum"},
		{"unknown key", "", []string{host, `imagee={"tag":"v1"}`}, "additional properties 'imagee' not allowed"},
		{"unknown nested key", "", []string{host, `image.tga="v1"`}, "at '/image': additional properties 'tga' not allowed"},
		{"bad pull policy", "", []string{host, `image.pullPolicy="Sometimes"`}, "image/pullPolicy"},
		{"bad digest", "", []string{host, `image.digest="sha256:abc"`}, "image.digest \"sha256:abc\""},
		{"agent label value as bool", "", []string{host, `agentLabel.value=true`}, "at '/agentLabel/value': got boolean, want string"},
		{"empty agent label", "", []string{host, `agentLabel.key=""`}, "agentLabel/key"},
		{"node selector os", "", []string{host, `nodeSelector={"kubernetes.io/os":"linux"}`}, "kubernetes.io/os is always windows"},
		{"node selector agent label", "", []string{host, `nodeSelector={"hnsplan.io/agent":"false"}`}, "set agentLabel.value instead"},
		{"node selector not a string", "", []string{host, `nodeSelector={"pool":1}`}, "at '/nodeSelector/pool': got number, want string"},
		{"toleration unknown field", "", []string{host, `tolerations=[{"operator":"Exists","efect":"NoSchedule"}]`}, "at '/tolerations/0': additional properties 'efect' not allowed"},
		{"toleration bad effect", "", []string{host, `tolerations=[{"operator":"Exists","effect":"NoSchedul"}]`}, "tolerations/0/effect"},
		{"resources unknown field", "", []string{host, `resources={"limit":{"memory":"1Gi"}}`}, "at '/resources': additional properties 'limit' not allowed"},
		{"resources bad quantity", "", []string{host, `resources={"limits":{"memory":"lots"}}`}, "resources/limits/memory"},
		{"two trusted-key sources", "", []string{host, `trustedKeys.existingConfigMap=true`, `trustedKeys.file="C:\\keys"`}, "trustedKeys.existingConfigMap and trustedKeys.file: set one"},
		{"RSA trusted key", "", []string{host, `trustedKeys.authorizedKeys="ssh-rsa AAAAB3NzaC1yc2E ci"`}, "line 1: \"ssh-rsa AAAAB3NzaC1yc2E ci\" is not an OpenSSH ed25519 public key"},
		{"no trusted key", "", []string{host, `trustedKeys.authorizedKeys="# none yet\n"`}, "lists no key"},
		{"relative keys file", "", []string{host, `trustedKeys.file="keys"`}, "absolute Windows path"},
		{"existingConfigMap as string", "", []string{host, `trustedKeys.existingConfigMap="trusted-keys"`}, "at '/trustedKeys/existingConfigMap': got string, want boolean"},
		{"release in another namespace", "default", []string{host}, "the release is in default: with namespace.create=false install it into hnsplan-system"},
		{"namespace.create in hnsplan-system", "", []string{host, `namespace.create=true`}, "Install into another namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.ns
			if ns == "" {
				ns = deployNamespace
			}
			_, err := renderChart(t, ch, ns, setValues(t, tc.set...))
			if err == nil {
				t.Fatalf("rendered; want an error with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error:\n%v\nwant it to say %q", err, tc.want)
			}
		})
	}
}

// TestHelmLint runs helm lint's checks (Chart.yaml, values and schema,
// templates rendered in lint mode, dependencies) and wants neither an
// error nor a warning; then the same on a copy with a broken template, so
// the lint is seen to report.
func TestHelmLint(t *testing.T) {
	kv, err := chartutil.ParseKubeVersion(chartKube)
	if err != nil {
		t.Fatal(err)
	}
	vals := setValues(t, `apiServer.host="`+testAPIHost+`"`)
	run := func(dir string, vals map[string]any, ns string) []support.Message {
		l := lint.AllWithKubeVersion(dir, vals, ns, kv)
		var bad []support.Message
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				bad = append(bad, m)
			}
		}
		return bad
	}
	if bad := run(chartDir, vals, deployNamespace); len(bad) != 0 {
		t.Errorf("helm lint: %v", bad)
	}
	// As `helm lint deploy/helm/hnsplan` runs: no values, namespace
	// default; lint mode logs the templates' fails instead of failing.
	if bad := run(chartDir, nil, "default"); len(bad) != 0 {
		t.Errorf("helm lint with no values: %v", bad)
	}

	broken := t.TempDir()
	if err := os.CopyFS(broken, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken, "templates", "broken.yaml"), []byte("kind: ConfigMap\nmetadata: {{ .Values.nope.missing }}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if bad := run(broken, vals, deployNamespace); len(bad) == 0 {
		t.Error("helm lint found nothing wrong with a template that reads a missing value")
	}
}

// TestHelmValuesDocumented: every key of values.schema.json has a default
// in values.yaml and a row in the chart's README.md, and values.yaml has no
// key the schema lacks (which would make every install fail).
func TestHelmValuesDocumented(t *testing.T) {
	ch := loadChart(t)
	var schema map[string]any
	if err := json.Unmarshal(ch.Schema, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	var keys []string
	var walk func(prefix string, s map[string]any)
	walk = func(prefix string, s map[string]any) {
		if s["additionalProperties"] != false {
			t.Errorf("values.schema.json: %q accepts unknown keys: give it additionalProperties: false", cmpOr(prefix, "(top)"))
		}
		props, _ := s["properties"].(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(props)) {
			if prefix == "" && name == "global" {
				continue // Helm's own
			}
			key := strings.TrimPrefix(prefix+"."+name, ".")
			keys = append(keys, key)
			if sub, _ := props[name].(map[string]any); sub["properties"] != nil {
				walk(key, sub)
			}
		}
	}
	walk("", schema)
	if len(keys) < 10 {
		t.Fatalf("values.schema.json has %d keys: %v", len(keys), keys)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	vals := chartutil.Values(ch.Values)
	for _, key := range keys {
		if !bytes.Contains(readme, []byte("| `"+key+"` |")) {
			t.Errorf("README.md has no row | `%s` |", key)
		}
		if _, err := vals.PathValue(key); err != nil {
			if _, terr := vals.Table(key); terr != nil {
				t.Errorf("values.yaml has no %s", key)
			}
		}
	}
	// values.yaml's own keys, down to where the schema stops naming them.
	var walkVals func(prefix string, m map[string]any)
	walkVals = func(prefix string, m map[string]any) {
		for name, v := range m {
			key := strings.TrimPrefix(prefix+"."+name, ".")
			if !slices.Contains(keys, key) {
				t.Errorf("values.yaml has %s, which values.schema.json does not name", key)
				continue
			}
			if sub, ok := v.(map[string]any); ok && slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, key+".") }) {
				walkVals(key, sub)
			}
		}
	}
	walkVals("", ch.Values)
}

// TestHelmInstallCommandsInDocs renders the chart as each documented
// `helm install` command asks (its -n and --set flags; a shell expansion
// in a value stands for a host), so the docs cannot drift from the chart's
// values and namespace rules.
func TestHelmInstallCommandsInDocs(t *testing.T) {
	ch := loadChart(t)
	n := 0
	for _, doc := range []string{"deploy/README.md", "deploy/helm/hnsplan/README.md", "docs/aks.md", "docs/eks.md"} {
		data, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(doc)))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i := 0; i < len(lines); i++ {
			line := strings.TrimSpace(lines[i])
			if !strings.HasPrefix(line, "helm install ") {
				continue
			}
			at := i + 1
			for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
				i++
				line = strings.TrimSuffix(line, "\\") + " " + strings.TrimSpace(lines[i])
			}
			n++
			args := strings.Fields(line)
			if len(args) < 4 || args[2] != "hnsplan" || args[3] != "deploy/helm/hnsplan" {
				t.Errorf("%s: %q: install release hnsplan from deploy/helm/hnsplan", doc, line)
				continue
			}
			ns := "default"
			var set []string
			for j := 4; j < len(args); j++ {
				switch args[j] {
				case "-n", "--namespace":
					j++
					ns = args[j]
				case "--set":
					j++
					k, v, _ := strings.Cut(args[j], "=")
					if strings.Contains(v, "$") {
						v = "api.example"
					}
					// As helm's --set: numbers and booleans are typed,
					// except where --set-string is documented.
					v = strings.Trim(v, `"`)
					var typed any
					if json.Unmarshal([]byte(v), &typed) != nil || k == "apiServer.host" {
						b, _ := json.Marshal(v)
						v = string(b)
					}
					set = append(set, k+"="+v)
				case "--create-namespace":
				default:
					t.Errorf("%s: %q: the test does not know %s", doc, line, args[j])
				}
			}
			if _, err := renderChart(t, ch, ns, setValues(t, set...)); err != nil {
				t.Errorf("%s:%d: %q fails: %v", doc, at, line, err)
			}
		}
	}
	if n < 4 {
		t.Errorf("%d helm install commands in the docs; want one in each", n)
	}
}
