package examples_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/ssh"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The CI examples' release, inventory and deploy steps, run as the runners
// run them: a file:// release for install, a fake kubectl serving the
// bundled inventory, a fake hnsplan publish and rollout status.

// inventoryKinds derives, from the inventory reader's source
// (compiler/intent), the kinds it reads: the case labels "apiVersion Kind"
// of Inventory.add's switch, and the apiVersion and kind literals of
// calicoKind. Each is returned as the kubectl resource it is fetched as,
// resource.group ("pods", "ippools.crd.projectcalico.org").
// projectcalico.org/v3 objects are the crd.projectcalico.org/v1 ones served
// by Calico's API server: each must have its v1 kind in the reader, and is
// fetched in that form only.
func inventoryKinds(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	type gk struct{ group, kind string }
	read := map[gk]bool{}
	add := func(apiVersion, kind string) {
		group := ""
		if g, _, ok := strings.Cut(apiVersion, "/"); ok {
			group = g
		}
		read[gk{group, kind}] = true
	}
	lit := func(e ast.Expr) (string, bool) {
		b, ok := e.(*ast.BasicLit)
		if !ok || b.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(b.Value)
		return s, err == nil
	}
	funcs := map[string]*ast.FuncDecl{}
	for _, f := range []string{"../compiler/intent/inventory.go", "../compiler/intent/calicoconfig.go"} {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				funcs[fd.Name.Name] = fd
			}
		}
	}
	if funcs["add"] == nil || funcs["calicoKind"] == nil {
		t.Fatal("the inventory reader has no Inventory.add or calicoKind any more: teach inventoryKinds where it reads kinds now")
	}
	// Inventory.add: switch apiVersion + " " + kind { case "v1 Pod": ... }
	ast.Inspect(funcs["add"].Body, func(n ast.Node) bool {
		sw, ok := n.(*ast.SwitchStmt)
		if !ok || sw.Tag == nil {
			return true
		}
		if _, ok := sw.Tag.(*ast.BinaryExpr); !ok {
			return true
		}
		for _, st := range sw.Body.List {
			for _, e := range st.(*ast.CaseClause).List {
				s, ok := lit(e)
				v, k, cut := strings.Cut(s, " ")
				if !ok || !cut {
					t.Fatalf("Inventory.add: case %s is not an \"apiVersion Kind\" literal", fset.Position(e.Pos()))
				}
				add(v, k)
			}
		}
		return true
	})
	// calicoKind: switch apiVersion { case "G/V": switch kind { case "K": } or if kind == "K" }
	ast.Inspect(funcs["calicoKind"].Body, func(n ast.Node) bool {
		sw, ok := n.(*ast.SwitchStmt)
		if !ok || fmt.Sprint(sw.Tag) != "apiVersion" {
			return true
		}
		for _, st := range sw.Body.List {
			cc := st.(*ast.CaseClause)
			var versions []string
			for _, e := range cc.List {
				s, ok := lit(e)
				if !ok {
					t.Fatalf("calicoKind: case %s is not a literal", fset.Position(e.Pos()))
				}
				versions = append(versions, s)
			}
			for _, body := range cc.Body {
				ast.Inspect(body, func(n ast.Node) bool {
					var kinds []ast.Expr
					switch n := n.(type) {
					case *ast.CaseClause:
						kinds = n.List
					case *ast.BinaryExpr:
						if fmt.Sprint(n.X) == "kind" && n.Op == token.EQL {
							kinds = []ast.Expr{n.Y}
						}
					}
					for _, e := range kinds {
						k, ok := lit(e)
						if !ok {
							t.Fatalf("calicoKind: kind %s is not a literal", fset.Position(e.Pos()))
						}
						for _, v := range versions {
							add(v, k)
						}
					}
					return true
				})
			}
		}
		return false
	})
	// The v3 names of the v1 kinds, where they differ.
	v3ToV1 := map[string]string{"IPAMConfiguration": "IPAMConfig"}
	var out []string
	for k := range read {
		if k.group == "projectcalico.org" {
			v1 := gk{"crd.projectcalico.org", cmpOr(v3ToV1[k.kind], k.kind)}
			if !read[v1] {
				t.Errorf("the inventory reader reads projectcalico.org/v3 %s but not crd.projectcalico.org/v1 %s: the inventory step fetches the v1 form only; fetch v3 too", k.kind, v1.kind)
			}
			continue
		}
		r := strings.ToLower(k.kind)
		if strings.HasSuffix(r, "y") {
			r = strings.TrimSuffix(r, "y") + "ies"
		} else {
			r += "s"
		}
		if k.group != "" {
			r += "." + k.group
		}
		out = append(out, r)
	}
	slices.Sort(out)
	if len(out) < 10 {
		t.Fatalf("only %d kinds found in the reader (%q): the parse missed some", len(out), out)
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// fakeKubectl serves `kubectl api-resources -o name` from
// $FAKE_STATE/served and `kubectl get RESOURCE --all-namespaces -o yaml`
// from $FAKE_STATE/RESOURCE.yaml, as the real one prints them; a resource
// named in $FAKE_STATE/forbidden is refused as RBAC would.
const fakeKubectl = `#!/bin/sh
set -eu
state=$FAKE_STATE
printf 'kubectl %s\n' "$*" >>"$state/kubectl.log"
[ -n "${KUBECONFIG:-}" ] && [ -s "$KUBECONFIG" ] || { echo "error: no configuration has been provided" >&2; exit 1; }
grep -q 'server: https://fake.example' "$KUBECONFIG" || { echo "error: not the test's kubeconfig" >&2; exit 1; }
case $1 in
api-resources) cat "$state/served" ;;
get)
	r=$2
	shift 2
	[ "$*" = "--all-namespaces --request-timeout=60s -o yaml" ] || { echo "fake kubectl: unexpected flags $*" >&2; exit 2; }
	if [ -f "$state/forbidden" ] && grep -qxF "$r" "$state/forbidden"; then
		echo "Error from server (Forbidden): $r is forbidden: User \"system:serviceaccount:hnsplan-system:hnsplan-inventory-reader\" cannot list resource" >&2
		exit 1
	fi
	grep -qxF "$r" "$state/served" || { echo "error: the server doesn't have a resource type \"$r\"" >&2; exit 1; }
	if [ -f "$state/$r.yaml" ]; then cat "$state/$r.yaml"; else printf 'apiVersion: v1\nitems: []\nkind: List\nmetadata:\n  resourceVersion: ""\n'; fi
	;;
*) echo "fake kubectl: unexpected $*" >&2; exit 2 ;;
esac
`

// fakeCluster is a fake kubectl holding the bundled calico-vxlan inventory,
// split by resource, serving every inventory resource.
func fakeCluster(t *testing.T) *fakeForge {
	t.Helper()
	f := newFakeForge(t, "kubectl", fakeKubectl, "served", []string{})
	resources := inventoryKinds(t)
	served := append([]string{"configmaps", "secrets", "deployments.apps"}, resources...)
	if err := os.WriteFile(filepath.Join(f.state, "served"), []byte(strings.Join(served, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("inventory/calico-vxlan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []map[string]any `yaml:"items"`
	}
	if err := yaml.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	byResource := map[string][]map[string]any{}
	for _, it := range list.Items {
		kind, _ := it["kind"].(string)
		group, _, _ := strings.Cut(it["apiVersion"].(string), "/")
		if !strings.Contains(it["apiVersion"].(string), "/") {
			group = ""
		}
		r := strings.ToLower(kind)
		if strings.HasSuffix(r, "y") {
			r = strings.TrimSuffix(r, "y") + "ies"
		} else {
			r += "s"
		}
		if group != "" {
			r += "." + group
		}
		if !slices.Contains(resources, r) {
			t.Fatalf("the bundled inventory holds %s, which the reader does not read", r)
		}
		byResource[r] = append(byResource[r], it)
	}
	for r, items := range byResource {
		out, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items, "metadata": map[string]any{"resourceVersion": ""}})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(f.state, r+".yaml"), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

const fakeKubeconfig = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: https://fake.example}\n"

// kubectlGets is what the fake kubectl was asked to get since the last call.
func (f *fakeForge) kubectlGets(t *testing.T) []string {
	t.Helper()
	p := filepath.Join(f.state, "kubectl.log")
	data, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	os.Remove(p)
	var gets []string
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[1] == "get" {
			gets = append(gets, f[2])
		}
	}
	slices.Sort(gets)
	return gets
}

// TestCIInventoryKinds: the inventory step and its read-only identity name
// exactly the kinds the reader reads, derived from the reader's source.
func TestCIInventoryKinds(t *testing.T) {
	want := inventoryKinds(t)
	t.Logf("the reader reads %q", want)

	// The ClusterRole: get and list of those, and nothing else.
	data, err := os.ReadFile("ci/inventory-reader.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var role rbacv1.ClusterRole
		if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(doc), 4096).Decode(&role); err != nil || role.Kind != "ClusterRole" {
			continue
		}
		for _, r := range role.Rules {
			if v := slices.Sorted(slices.Values(r.Verbs)); !slices.Equal(v, []string{"get", "list"}) || len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
				t.Errorf("ClusterRole rule %+v: want the verbs get and list only", r)
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					got = append(got, strings.TrimSuffix(res+"."+g, "."))
				}
			}
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("inventory-reader.yaml's ClusterRole allows %q; the reader reads %q", got, want)
	}

	// The script: what it asks kubectl for.
	f := fakeCluster(t)
	out := filepath.Join(t.TempDir(), "inv.yaml")
	exit, log := runShell(t, t.TempDir(), "sh "+abs(t, "ci/hnsplan-pr.sh")+" inventory "+out, runnerEnv(f, "HNSPLAN_KUBECONFIG_DATA="+fakeKubeconfig))
	if exit != 0 {
		t.Fatalf("inventory: exit %d\n%s", exit, log)
	}
	if gets := f.kubectlGets(t); !slices.Equal(gets, want) {
		t.Errorf("hnsplan-pr.sh inventory gets %q; the reader reads %q", gets, want)
	}
	// What it wrote reads back as the bundled inventory does, with no
	// finding about it.
	vet := mustRunEnv(t, "..", nil, filepath.Join(hnsplanBin, "hnsplan"), "vet", "--severity", "info", "-o", "json", "examples/calico-vxlan", "--inventory", out)
	if strings.Contains(vet, `"rule": "inventory"`) {
		t.Errorf("vet --inventory of what the step read reports on it:\n%s", vet)
	}
}

func abs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustRunEnv(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = env
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestCIInventorySkipped: without the secret, or when the cluster refuses a
// read, the step writes no inventory, only the reason, and succeeds.
func TestCIInventorySkipped(t *testing.T) {
	for _, tc := range []struct {
		name      string
		secret    string
		forbidden string
		served    []string // nil: all
		want      string
		wantLog   string
		wantFile  bool
	}{
		{name: "a fork: no secret", want: "no kubeconfig to read the cluster with: the secret HNSPLAN_INVENTORY_KUBECONFIG is not set for this run (pull requests from forks get no secrets)"},
		{name: "forbidden", secret: fakeKubeconfig, forbidden: "nodes", want: "reading the cluster failed (kubectl get nodes); the job log has the reason", wantLog: "Error from server (Forbidden): nodes is forbidden"},
		{name: "without Calico", secret: fakeKubeconfig, served: []string{"pods", "namespaces", "services", "nodes", "endpointslices.discovery.k8s.io"}, wantFile: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fakeCluster(t)
			if tc.forbidden != "" {
				os.WriteFile(filepath.Join(f.state, "forbidden"), []byte(tc.forbidden+"\n"), 0o644)
			}
			if tc.served != nil {
				os.WriteFile(filepath.Join(f.state, "served"), []byte(strings.Join(tc.served, "\n")+"\n"), 0o644)
			}
			out := filepath.Join(t.TempDir(), "inv.yaml")
			exit, log := runShell(t, t.TempDir(), "sh "+abs(t, "ci/hnsplan-pr.sh")+" inventory "+out, runnerEnv(f, "HNSPLAN_KUBECONFIG_DATA="+tc.secret))
			if exit != 0 {
				t.Fatalf("exit %d\n%s", exit, log)
			}
			_, err := os.Stat(out)
			reason, _ := os.ReadFile(out + ".skipped")
			if tc.wantFile {
				if err != nil || len(reason) != 0 {
					t.Errorf("want the inventory and no reason: %v, %q\n%s", err, reason, log)
				}
				if gets := f.kubectlGets(t); !slices.Equal(gets, slices.Sorted(slices.Values(tc.served))) {
					t.Errorf("got %q, want %q", gets, tc.served)
				}
				return
			}
			if err == nil {
				t.Errorf("a partial or skipped inventory was written:\n%s", log)
			}
			if !strings.Contains(string(reason), tc.want) || !strings.Contains(log, tc.wantLog) {
				t.Errorf("reason %q, want %q, and %q in the log:\n%s", reason, tc.want, tc.wantLog, log)
			}
		})
	}
}

// TestCIAccessDelta runs the workflow's inventory and plan steps, with the
// secret, on a pull request that moves the IIS pods' allowed port from 80
// to 8080: the comment shows who loses and who gains access.
func TestCIAccessDelta(t *testing.T) {
	needTools(t, "git", "jq", "bash")
	var wf ghWorkflow
	readYAML(t, "ci/github-actions.yml", false, &wf)
	steps := map[string]ghStep{}
	for _, s := range wf.Jobs["plan"].Steps {
		steps[s.ID] = s
	}
	r := newPRRepo(t)
	r.edit("manifests/web-networkpolicy.yaml", "port: 80\n", "port: 8080\n")
	r.push("port 8080")
	f := fakeCluster(t)
	runner := t.TempDir()
	ctx := map[string]string{"secrets.HNSPLAN_INVENTORY_KUBECONFIG": fakeKubeconfig, "github.base_ref": "main"}
	for _, id := range []string{"inventory", "plan"} {
		s := steps[id]
		output := filepath.Join(t.TempDir(), "output")
		os.WriteFile(output, nil, 0o644)
		env := runnerEnv(f, "RUNNER_TEMP="+runner, "GITHUB_OUTPUT="+output)
		for k, v := range wf.Env {
			env = append(env, k+"="+resolve(t, v, ctx))
		}
		for k, v := range s.Env {
			env = append(env, k+"="+resolve(t, v, ctx))
		}
		if exit, log := runShell(t, r.dir, s.Run, env); exit != 0 {
			t.Fatalf("step %s: exit %d\n%s", id, exit, log)
		}
	}
	body, err := os.ReadFile(filepath.Join(r.dir, "hnsplan-diff.md"))
	if err != nil {
		t.Fatal(err)
	}
	checkBody(t, "the comment", string(body), []string{markerOf, "Access: 2 connections newly denied, 2 newly allowed.",
		"- frontend/shop-1 -> web/iis-1  TCP/80: allowed -> denied", "cluster/manifests/web-networkpolicy.yaml:",
		"+ frontend/shop-1 -> web/iis-1  TCP/8080: denied -> allowed"})
	if strings.Contains(string(body), "Access delta not shown") {
		t.Errorf("the comment says the access delta was skipped:\n%s", body)
	}
}

// fakeRelease is a release directory as `make release` lays it out and
// GitHub serves it (BASE/VERSION/ASSET), holding for this machine a
// hnsplan that prints the version line of says.
func fakeRelease(t *testing.T, version, says string) (url, asset string) {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, version)
	os.MkdirAll(dir, 0o755)
	asset = "hnsplan-linux-" + runtime.GOARCH
	bin := "#!/bin/sh\n[ \"$1\" = version ] && echo '" + says + "'\n"
	if err := os.WriteFile(filepath.Join(dir, asset), []byte(bin), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(bin))
	other := sha256.Sum256([]byte("other"))
	sums := fmt.Sprintf("%s  hnsplan-agent-windows-amd64.exe\n%s  %s\n", hex.EncodeToString(other[:]), hex.EncodeToString(sum[:]), asset)
	if err := os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(sums), 0o644); err != nil {
		t.Fatal(err)
	}
	return "file://" + base, asset
}

// TestCIInstall runs the workflows' install steps and the GitLab jobs'
// install line against a file:// release: the binary is installed only
// when it matches SHA256SUMS and says it is the pinned version.
func TestCIInstall(t *testing.T) {
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skip("the examples install the linux/amd64 or linux/arm64 release")
	}
	needTools(t, "curl", "sha256sum", "bash")
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		if !slices.Contains(strings.Fields(makeVar(t, "CLI_PLATFORMS")), p) {
			t.Errorf("make release builds no hnsplan for %s, which the CI examples install", p)
		}
	}
	version := repoChangelog(t).Newest().Version.Tag()
	good := "hnsplan " + version + " (commit 0123456, go1.26.8 linux/amd64)"

	// Each way the examples install: the two workflows' steps, the GitLab
	// jobs' line (into DIR instead of /usr/local/bin).
	var scripts []string
	for _, wfFile := range []string{"ci/github-actions.yml", "ci/github-actions-deploy.yml"} {
		var wf ghWorkflow
		readYAML(t, wfFile, false, &wf)
		for _, job := range wf.Jobs {
			n := 0
			for _, s := range job.Steps {
				if s.ID == "install" {
					scripts = append(scripts, s.Run)
					n++
				}
				if strings.Contains(s.Run, "go install") || strings.HasPrefix(s.Uses, "actions/setup-go") {
					t.Errorf("%s: step %q builds hnsplan from source: install the release", wfFile, s.Name)
				}
			}
			if n != 1 {
				t.Errorf("%s: %d steps with id install, want 1", wfFile, n)
			}
		}
	}
	var jobs map[string]glJob
	readYAML(t, "ci/gitlab-ci.yml", true, &jobs)
	for name, job := range jobs {
		var line string
		for _, l := range job.BeforeScript {
			if strings.Contains(l, "go install") {
				t.Errorf("gitlab-ci.yml %s: %q builds hnsplan from source: install the release", name, l)
			}
			if strings.Contains(l, "hnsplan-pr.sh install") {
				line = l
			}
		}
		if line != `sh ci/hnsplan-pr.sh install "$HNSPLAN_VERSION" /usr/local/bin` {
			t.Errorf("gitlab-ci.yml %s: install line %q", name, line)
		}
		scripts = append(scripts, strings.Replace(line, "/usr/local/bin", `"$RUNNER_TEMP/hnsplan"`, 1))
	}

	for _, tc := range []struct {
		name, says, want string
		corrupt, noLine  bool
		version          string
	}{
		{name: "the release", says: good},
		{name: "another version", says: "hnsplan v0.0.9 (commit 0123456, go1.26.8 linux/amd64)", want: "it is not hnsplan " + version + "; nothing installed"},
		{name: "corrupt download", says: good, corrupt: true, want: "does not match its SHA256SUMS line"},
		{name: "not in SHA256SUMS", says: good, noLine: true, want: "SHA256SUMS lists no hnsplan-linux-"},
		{name: "not released", says: good, version: "v9.9.9", want: "cannot download"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, asset := fakeRelease(t, version, tc.says)
			dir := strings.TrimPrefix(url, "file://") + "/" + version
			if tc.corrupt {
				os.WriteFile(filepath.Join(dir, asset), []byte("#!/bin/sh\necho '"+good+"'\n# changed\n"), 0o644)
			}
			if tc.noLine {
				os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(strings.Repeat("0", 64)+"  "+asset+".sbom.txt\n"), 0o644)
			}
			v := cmpOr(tc.version, version)
			for i, script := range scripts {
				r := newPRRepo(t)
				runner := t.TempDir()
				ghPath := filepath.Join(runner, "github_path")
				env := runnerEnv(&fakeForge{}, "HNSPLAN_RELEASE_URL="+url, "HNSPLAN_VERSION="+v,
					"RUNNER_TEMP="+runner, "GITHUB_PATH="+ghPath)
				exit, log := runShell(t, r.dir, script, env)
				installed := filepath.Join(runner, "hnsplan", "hnsplan")
				_, err := os.Stat(installed)
				if tc.want == "" {
					if exit != 0 || err != nil {
						t.Errorf("script %d: exit %d, %v\n%s", i, exit, err, log)
					} else if got := mustRunEnv(t, runner, nil, installed, "version"); strings.TrimSpace(got) != good {
						t.Errorf("script %d: installed %q", i, got)
					}
					continue
				}
				if exit == 0 || err == nil || !strings.Contains(log, tc.want) {
					t.Errorf("script %d: exit %d (installed: %v), want a failure saying %q:\n%s", i, exit, err == nil, tc.want, log)
				}
			}
		})
	}
}

// fakeHnsplan stands in for hnsplan's publish and rollout (which need a
// cluster): it logs them and exits as $FAKE_HNSPLAN_STATE/exits says, one code a
// line, in turn (0 when none is left); everything else is the real hnsplan.
const fakeHnsplan = `#!/bin/sh
set -eu
state=$FAKE_HNSPLAN_STATE
case $1 in
publish | rollout)
	printf 'hnsplan %s\n' "$*" >>"$state/calls.log"
	[ -n "${KUBECONFIG:-}" ] && grep -q 'server: https://fake.example' "$KUBECONFIG" || { echo "fake hnsplan: no kubeconfig" >&2; exit 1; }
	code=$(head -n 1 "$state/exits" 2>/dev/null || true)
	[ -f "$state/exits" ] && sed -i 1d "$state/exits"
	echo "fake hnsplan $1: exit ${code:-0}" >&2
	exit "${code:-0}"
	;;
compile) printf 'hnsplan %s\n' "$*" >>"$state/calls.log" ;;
esac
exec "$FAKE_REAL_HNSPLAN" "$@"
`

// TestCIDeploy runs the post-merge jobs (GitHub's deploy step, GitLab's
// hnsplan-deploy script) with a real compile and fake publish and rollout
// status: the order of the calls, the signed plans, and what a halted or
// timed-out rollout makes of the job.
func TestCIDeploy(t *testing.T) {
	needTools(t, "git", "bash")
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "hnsplan-ci")
	if err != nil {
		t.Fatal(err)
	}
	key := string(pem.EncodeToMemory(block))

	var wf ghWorkflow
	readYAML(t, "ci/github-actions-deploy.yml", false, &wf)
	var step ghStep
	for _, s := range wf.Jobs["deploy"].Steps {
		if s.ID == "deploy" {
			step = s
		}
	}
	var jobs map[string]glJob
	readYAML(t, "ci/gitlab-ci.yml", true, &jobs)
	gl, ok := jobs["hnsplan-deploy"]
	if !ok || step.Run == "" {
		t.Fatal("want the GitHub step id: deploy and the GitLab job hnsplan-deploy")
	}
	if gl.ResourceGroup == "" || len(gl.Rules) != 1 || gl.Rules[0]["if"] != `$CI_PIPELINE_SOURCE == "push" && $CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH` {
		t.Errorf("hnsplan-deploy: rules %v, resource_group %q: run on pushes to the default branch, one at a time", gl.Rules, gl.ResourceGroup)
	}
	glScript := "set -eo pipefail\n" + strings.Join(gl.Script, "\n") + "\n"

	publish := "hnsplan publish PLANS"
	canary := "hnsplan publish PLANS --canary 1"
	wait := "hnsplan rollout status --wait --timeout 30m"
	compile := "hnsplan compile --color never cluster -o PLANS --inventory TMP/inventory.yaml --sign-key TMP/sign-key"
	for _, tc := range []struct {
		name     string
		exits    []int
		noKey    bool
		exit     int
		calls    []string
		want     string
		wantSigs bool
	}{
		{name: "converged", calls: []string{compile, canary, wait, publish, wait}, wantSigs: true},
		{name: "the canary halts", exits: []int{0, 4}, exit: 1, calls: []string{compile, canary, wait},
			want: "the rollout to the canary node halted (rollout status exit 4)"},
		{name: "the canary times out", exits: []int{0, 5}, exit: 1, calls: []string{compile, canary, wait},
			want: "the rollout to the canary node is still pending after 30m (rollout status exit 5)"},
		{name: "the fleet halts", exits: []int{0, 0, 0, 4}, exit: 1, calls: []string{compile, canary, wait, publish, wait},
			want: "the rollout to every node halted"},
		{name: "publish fails", exits: []int{1}, exit: 1, calls: []string{compile, canary},
			want: "hnsplan publish --canary 1 failed"},
		{name: "no signing key", noKey: true, exit: 1, want: "set the secret HNSPLAN_SIGN_KEY"},
	} {
		for _, forge := range []string{"github", "gitlab"} {
			t.Run(tc.name+"/"+forge, func(t *testing.T) {
				r := newPRRepo(t)
				cluster := fakeCluster(t)
				fake := newFakeForge(t, "hnsplan", fakeHnsplan, "exits", nil)
				var exits []string
				for _, e := range tc.exits {
					exits = append(exits, strconv.Itoa(e))
				}
				os.WriteFile(filepath.Join(fake.state, "exits"), []byte(strings.Join(exits, "\n")+"\n"), 0o644)
				runner := t.TempDir()
				k := key
				if tc.noKey {
					k = ""
				}
				env := runnerEnv(cluster, "FAKE_REAL_HNSPLAN="+filepath.Join(hnsplanBin, "hnsplan"), "RUNNER_TEMP="+runner)
				// The fake hnsplan first; its state is its own.
				env[0] = "PATH=" + fake.bin + string(os.PathListSeparator) + strings.TrimPrefix(env[0], "PATH=")
				env = append(env, "FAKE_HNSPLAN_STATE="+fake.state)
				var script, plans, plansArg string
				if forge == "github" {
					ctx := map[string]string{"secrets.HNSPLAN_DEPLOY_KUBECONFIG": fakeKubeconfig, "secrets.HNSPLAN_SIGN_KEY": k}
					env = append(env, "GITHUB_ACTIONS=true")
					for k, v := range wf.Env {
						env = append(env, k+"="+resolve(t, v, ctx))
					}
					for k, v := range step.Env {
						env = append(env, k+"="+resolve(t, v, ctx))
					}
					script, plans = step.Run, filepath.Join(runner, "plans")
					plansArg = plans
				} else {
					env = append(env, "HNSPLAN_DEPLOY_KUBECONFIG="+fakeKubeconfig, "HNSPLAN_SIGN_KEY="+k)
					for k, v := range gl.Variables {
						env = append(env, k+"="+v)
					}
					script, plans, plansArg = glScript, filepath.Join(r.dir, "hnsplan-plans"), "hnsplan-plans"
				}
				exit, log := runShell(t, r.dir, script, env)
				t.Logf("exit %d:\n%s", exit, log)
				if exit != tc.exit {
					t.Errorf("exit %d, want %d", exit, tc.exit)
				}
				if tc.want != "" && !strings.Contains(log, tc.want) {
					t.Errorf("the job log does not say %q", tc.want)
				}
				if tc.want != "" && forge == "github" && !strings.Contains(log, "::error title=hnsplan deploy::") {
					t.Errorf("no ::error annotation for the failure")
				}
				data, _ := os.ReadFile(filepath.Join(fake.state, "calls.log"))
				var calls []string
				for _, c := range strings.Split(strings.TrimSpace(string(data)), "\n") {
					if c != "" {
						c = regexp.MustCompile(`/tmp/tmp\.[^ /]+/`).ReplaceAllString(c, "TMP/")
						calls = append(calls, strings.ReplaceAll(c, " "+plansArg, " PLANS"))
					}
				}
				if !slices.Equal(calls, tc.calls) {
					t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(tc.calls, "\n"))
				}
				if tc.wantSigs {
					for _, node := range []string{"win-1", "win-2", "win-3"} {
						if _, err := os.Stat(filepath.Join(plans, node+".json.sig")); err != nil {
							t.Errorf("the plan of %s is not signed: %v", node, err)
						}
					}
				}
				// The secrets are gone with the job's temporary files.
				if strings.Contains(log, "PRIVATE KEY") {
					t.Error("the key reached the job log")
				}
			})
		}
	}
}
