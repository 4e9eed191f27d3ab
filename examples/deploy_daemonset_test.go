package examples_test

import (
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
)

// agentDaemonSet is the one DaemonSet of deploy/, as kustomize renders it.
func agentDaemonSet(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	var found []*appsv1.DaemonSet
	for _, objs := range deployObjects(t) {
		for _, o := range objs {
			if ds, ok := o.(*appsv1.DaemonSet); ok {
				found = append(found, ds)
			}
		}
	}
	if len(found) != 1 || found[0].Name != "hnsplan-agent" {
		t.Fatalf("deploy/ has %d DaemonSets, want one, hnsplan-agent", len(found))
	}
	return found[0]
}

// agentArgs splits the container's --flag=value arguments after the
// command ("run"); a flag given twice fails.
func agentArgs(t *testing.T, c *corev1.Container) (string, map[string]string) {
	t.Helper()
	if len(c.Command) != 0 {
		t.Errorf("container %s sets command %q: the image's entrypoint is the agent", c.Name, c.Command)
	}
	if len(c.Args) == 0 {
		t.Fatalf("container %s has no args", c.Name)
	}
	flags := map[string]string{}
	for _, a := range c.Args[1:] {
		name, value, ok := strings.Cut(a, "=")
		if !ok || !strings.HasPrefix(name, "--") {
			t.Errorf("argument %q: write flags as --name=value, so that each is one argument", a)
			continue
		}
		if _, dup := flags[name]; dup {
			t.Errorf("flag %s is given twice", name)
		}
		flags[name] = value
	}
	return c.Args[0], flags
}

// TestDeployDaemonSet keeps the agent's DaemonSet as deploy/README.md
// describes it: a HostProcess pod as SYSTEM in the host's network on
// every Windows node, the node's name from the downward API, in-cluster
// auth with the pod's ServiceAccount token, the plan from its ConfigMap,
// the host's state directory, probes on the agent's own endpoints.
func TestDeployDaemonSet(t *testing.T) {
	ds := agentDaemonSet(t)
	pod := ds.Spec.Template.Spec
	if ds.Namespace != deployNamespace {
		t.Errorf("DaemonSet in %q, want %s: the admission policies match the agent's ServiceAccount there", ds.Namespace, deployNamespace)
	}

	// One node at a time, never two agents on one node.
	u := ds.Spec.UpdateStrategy
	switch {
	case u.Type != appsv1.RollingUpdateDaemonSetStrategyType || u.RollingUpdate == nil:
		t.Errorf("updateStrategy %+v, want RollingUpdate", u)
	case u.RollingUpdate.MaxUnavailable == nil || u.RollingUpdate.MaxUnavailable.String() != "1":
		t.Errorf("maxUnavailable %v, want 1", u.RollingUpdate.MaxUnavailable)
	case u.RollingUpdate.MaxSurge != nil && u.RollingUpdate.MaxSurge.String() != "0":
		t.Errorf("maxSurge %v, want 0: two agents on one node contend for its state directory", u.RollingUpdate.MaxSurge)
	}
	sel := ds.Spec.Selector
	if sel == nil || len(sel.MatchLabels) == 0 || len(sel.MatchExpressions) > 0 {
		t.Errorf("selector %v, want matchLabels only", sel)
	} else {
		for k, v := range sel.MatchLabels {
			if ds.Spec.Template.Labels[k] != v {
				t.Errorf("selector %s=%s does not select the template (labels %v)", k, v, ds.Spec.Template.Labels)
			}
		}
	}

	// HostProcess, as SYSTEM, in the host's network.
	wo := (*corev1.WindowsSecurityContextOptions)(nil)
	if pod.SecurityContext != nil {
		wo = pod.SecurityContext.WindowsOptions
	}
	if wo == nil || wo.HostProcess == nil || !*wo.HostProcess {
		t.Error("the pod is not a HostProcess pod (securityContext.windowsOptions.hostProcess)")
	}
	if wo == nil || wo.RunAsUserName == nil || *wo.RunAsUserName != `NT AUTHORITY\SYSTEM` {
		t.Errorf("windowsOptions %+v, want runAsUserName NT AUTHORITY\\SYSTEM: HNS needs it", wo)
	}
	if !pod.HostNetwork {
		t.Error("hostNetwork is false: a HostProcess pod is in the host's network and must say so")
	}
	if got := ds.Spec.Template.Annotations["microsoft.com/hostprocess-mount-behavior"]; got != "bind" {
		t.Errorf("annotation microsoft.com/hostprocess-mount-behavior %q, want bind: with symlinks client-go finds no in-cluster token", got)
	}
	// Windows nodes, and of them those switched to hnsplan: an agent that
	// started on every Windows node would fight Calico's or flannel's
	// Windows dataplane where it still runs.
	if want := map[string]string{"kubernetes.io/os": "windows", "hnsplan.io/agent": "true"}; !maps.Equal(pod.NodeSelector, want) {
		t.Errorf("nodeSelector %v, want %v", pod.NodeSelector, want)
	}
	if pod.PriorityClassName != "system-node-critical" {
		t.Errorf("priorityClassName %q, want system-node-critical", pod.PriorityClassName)
	}
	// The taints a Windows node agent must run through.
	for _, taint := range []corev1.Taint{
		{Key: "os", Value: "windows", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/os", Value: "windows", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoExecute},
		{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute},
		{Key: "node.kubernetes.io/network-unavailable", Effect: corev1.TaintEffectNoSchedule},
		{Key: "CriticalAddonsOnly", Value: "true", Effect: corev1.TaintEffectNoSchedule},
	} {
		if !slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool {
			return tol.ToleratesTaint(klog.Background(), &taint, false)
		}) {
			t.Errorf("the agent does not tolerate the taint %s", taint.ToString())
		}
	}

	// In-cluster auth with the pod's own projected token.
	rbac := loadRBAC(t)
	if pod.ServiceAccountName != "hnsplan-agent" || !rbac.sas[deployNamespace+"/"+pod.ServiceAccountName] {
		t.Errorf("serviceAccountName %q, want hnsplan-agent, the ServiceAccount of rbac.yaml", pod.ServiceAccountName)
	}
	if pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken is not true: the agent authenticates with the pod's token")
	}

	if len(pod.Containers) != 1 || len(pod.InitContainers) != 0 {
		t.Fatalf("%d containers and %d init containers, want one container", len(pod.Containers), len(pod.InitContainers))
	}
	c := &pod.Containers[0]
	if c.SecurityContext != nil && c.SecurityContext.WindowsOptions != nil {
		t.Errorf("container %s overrides the pod's windowsOptions", c.Name)
	}
	command, flags := agentArgs(t, c)
	if command != "run" {
		t.Errorf("the container runs %q, want the service, run", command)
	}
	if _, ok := flags["--kubeconfig"]; ok {
		t.Error("--kubeconfig is set: in the pod the agent uses the in-cluster configuration")
	}
	if flags["--plan-source"] != "configmap" {
		t.Errorf("--plan-source %q, want configmap", flags["--plan-source"])
	}
	for _, f := range []string{"--plan", "--hns", "--simulate-cni", "--mem-quirks", "--until-converged"} {
		if _, ok := flags[f]; ok {
			t.Errorf("%s is set: the DaemonSet runs the host's HNS on the published plan", f)
		}
	}

	// The node's name from the downward API.
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if flags["--node"] != "$(NODE_NAME)" {
		t.Errorf("--node %q, want $(NODE_NAME)", flags["--node"])
	}
	if e := env["NODE_NAME"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("env NODE_NAME %+v, want it from the downward API, fieldRef spec.nodeName", e)
	}
	// The API server's own address, not the kubernetes Service's.
	if !slices.ContainsFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool {
		return e.ConfigMapRef != nil && e.ConfigMapRef.Name == "kubernetes-services-endpoint" &&
			(e.ConfigMapRef.Optional == nil || !*e.ConfigMapRef.Optional)
	}) {
		t.Error("no required envFrom of the ConfigMap kubernetes-services-endpoint (KUBERNETES_SERVICE_HOST and _PORT)")
	}

	// The host's state directory, the Windows default, with nothing
	// mounted over it.
	const stateDir = `C:\ProgramData\hnsplan`
	if flags["--state-dir"] != stateDir {
		t.Errorf("--state-dir %q, want %s", flags["--state-dir"], stateDir)
	}
	for _, m := range c.VolumeMounts {
		if strings.EqualFold(filepath.Clean(m.MountPath), stateDir) || strings.HasPrefix(strings.ToLower(m.MountPath), strings.ToLower(stateDir)+`\`) {
			t.Errorf("volume %s is mounted at %s, over the state directory: the agent creates it private on the host", m.Name, m.MountPath)
		}
	}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %s is a hostPath (%s): a HostProcess container reads the host's files directly", v.Name, v.HostPath.Path)
		}
	}

	// The probes ask the agent where it listens, on the paths it serves.
	host, port, err := net.SplitHostPort(flags["--listen"])
	if err != nil {
		t.Fatalf("--listen %q: %v", flags["--listen"], err)
	}
	served := agentHTTPPaths(t)
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"startupProbe", c.StartupProbe, "/healthz"}, {"livenessProbe", c.LivenessProbe, "/healthz"}, {"readinessProbe", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: none, or not an HTTP GET", p.name)
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path || !slices.Contains(served, g.Path) {
			t.Errorf("%s asks %s, want %s (the agent serves %q)", p.name, g.Path, p.path, served)
		}
		if g.Host != host || g.Port.String() != port {
			t.Errorf("%s asks %s:%s, the agent listens on %s", p.name, g.Host, g.Port.String(), flags["--listen"])
		}
	}

	// Requests, and a memory limit above them.
	req, lim := c.Resources.Requests, c.Resources.Limits
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := req[r]; !ok || q.IsZero() {
			t.Errorf("no %s request", r)
		}
	}
	if l, ok := lim[corev1.ResourceMemory]; !ok || l.Cmp(req[corev1.ResourceMemory]) < 0 || l.Cmp(resource.MustParse("256Mi")) < 0 {
		t.Errorf("memory limit %v: want one, at least 256Mi and the request (%v)", lim.Memory(), req.Memory())
	}

	// The image as kustomize renders it: a registry name and a tag (or a
	// digest), never latest.
	if !regexp.MustCompile(`^[a-z0-9.-]+\.[a-z]+(:[0-9]+)?/[a-z0-9/._-]+(:[A-Za-z0-9_][A-Za-z0-9_.-]*|@sha256:[0-9a-f]{64})$`).MatchString(c.Image) ||
		strings.HasSuffix(c.Image, ":latest") {
		t.Errorf("image %q: want registry/name:tag or @sha256:digest, set by kustomization.yaml's images:", c.Image)
	}
}

// The namespace admits the DaemonSet's pods: HostProcess pods pass only
// the privileged Pod Security level.
func TestDeployNamespaceAdmitsHostProcess(t *testing.T) {
	for _, o := range deployObjects(t)["deploy/namespace.yaml"] {
		if ns, ok := o.(*corev1.Namespace); ok && ns.Name == deployNamespace {
			if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "privileged" {
				t.Errorf("namespace %s enforces Pod Security level %q: the agent's HostProcess pods need privileged", ns.Name, got)
			}
			return
		}
	}
	t.Fatalf("deploy/namespace.yaml has no Namespace %s", deployNamespace)
}

// TestDeployAgentFlags: every flag the DaemonSet passes is one the agent's
// run takes, as its --help says (a renamed flag fails the pod at start).
func TestDeployAgentFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the agent")
	}
	ds := agentDaemonSet(t)
	command, flags := agentArgs(t, &ds.Spec.Template.Spec.Containers[0])
	bin := filepath.Join(t.TempDir(), "hnsplan-agent")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/hnsplan-agent").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, command, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("hnsplan-agent %s --help: %v\n%s", command, err, out)
	}
	for f := range flags {
		if !regexp.MustCompile(`(?m)^\s+(-\w, )?` + regexp.QuoteMeta(f) + `\b`).Match(out) {
			t.Errorf("hnsplan-agent %s has no flag %s", command, f)
		}
	}
}

// agentHTTPPaths are the paths the agent's HTTP server registers, read
// from its source (wherever the server lives: cmd/hnsplan-agent or
// applier).
func agentHTTPPaths(t *testing.T) []string {
	t.Helper()
	re := regexp.MustCompile(`\.Handle(?:Func)?\(\s*("/[^"]*")`)
	var paths []string
	for _, dir := range []string{"../cmd/hnsplan-agent", "../applier"} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range re.FindAllSubmatch(src, -1) {
				p, err := strconv.Unquote(string(m[1]))
				if err != nil {
					return err
				}
				paths = append(paths, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(paths) == 0 {
		t.Fatal("found no HTTP path the agent serves in cmd/hnsplan-agent or applier")
	}
	return paths
}
