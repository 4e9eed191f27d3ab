//go:build integration && linux

package kube

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hnsplan/hnsplan/internal/kubetest"
)

// privateAPIServer is a second kube-apiserver on the test environment's
// etcd, started with the shared one's arguments (read from
// /proc/<pid>/cmdline, the PID from $KAS_RUN_DIR/kube-apiserver.pid) except
// for its port. Two API servers on one etcd is Kubernetes' ordinary HA
// set-up, so objects written through either are seen through both.
//
// Why not stop the shared API server (SIGSTOP/SIGCONT, or kill and restart
// it)? Other packages' integration tests run in parallel against it; a
// private one can be killed and restarted without disturbing them, and a
// real kill (connections reset, watch cache rebuilt on start) tests more
// than a pause, which leaves every TCP connection and watch intact.
type privateAPIServer struct {
	t    testing.TB
	args []string
	log  string
	host string
	cmd  *exec.Cmd
}

func newPrivateAPIServer(t testing.TB) *privateAPIServer {
	t.Helper()
	dir := os.Getenv("KAS_RUN_DIR")
	if dir == "" {
		t.Fatal("KAS_RUN_DIR is not set: the restart test reads the API server's arguments from $KAS_RUN_DIR/kube-apiserver.pid")
	}
	pidText, err := os.ReadFile(filepath.Join(dir, "kube-apiserver.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil {
		t.Fatalf("%s/kube-apiserver.pid: %v", dir, err)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatalf("arguments of kube-apiserver (pid %d): %v", pid, err)
	}
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	replaced := false
	for i, a := range args {
		if strings.HasPrefix(a, "--secure-port=") {
			args[i] = fmt.Sprintf("--secure-port=%d", port)
			replaced = true
		}
	}
	if !replaced {
		t.Fatalf("no --secure-port in %q", args)
	}
	s := &privateAPIServer{t: t, args: args, log: filepath.Join(t.TempDir(), "kube-apiserver.log"),
		host: fmt.Sprintf("https://127.0.0.1:%d", port)}
	t.Cleanup(s.stop)
	return s
}

func (s *privateAPIServer) start(ctx context.Context, cfg *rest.Config) {
	s.t.Helper()
	f, err := os.OpenFile(s.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	s.cmd = exec.Command(s.args[0], s.args[1:]...)
	s.cmd.Stdout, s.cmd.Stderr = f, f
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start kube-apiserver: %v", err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	deadline := time.Now().Add(90 * time.Second)
	for {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(s.log)
			s.t.Fatalf("private kube-apiserver not ready: %v\n%s", err, tail(string(out), 3000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop ends the process this test started (and only it): SIGTERM, then
// SIGKILL after 30s.
func (s *privateAPIServer) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func TestIntegrationAPIServerRestart(t *testing.T) {
	ctx := testCtx(t, 4*time.Minute)
	cfg := kubetest.Config(t)
	shared, _ := clients(t, cfg)
	node, ns := kubetest.UniqueName("win-restart"), kubetest.UniqueName("restart")
	createNode(t, ctx, shared, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
	createNamespace(t, ctx, shared, ns, nil)
	runPod(t, ctx, shared, testPod(ns, "before", node, map[string]string{"v": "1"}), "10.244.8.2")

	kas := newPrivateAPIServer(t)
	pcfg := rest.CopyConfig(cfg)
	pcfg.Host = kas.host
	kas.start(ctx, pcfg)
	private, dyn := clients(t, pcfg)

	c := New(private, dyn, node)
	c.Start(ctx)
	if !c.WaitForSync(ctx) {
		t.Fatal("cache did not sync")
	}
	podsOn := func() map[string]Pod {
		out := map[string]Pod{}
		for _, p := range c.PodsOnNode() {
			out[p.Name] = p
		}
		return out
	}
	if _, ok := podsOn()["before"]; !ok {
		t.Fatalf("PodsOnNode() = %v, want the pod 'before'", podsOn())
	}

	// Kill the cache's API server; change things through the other one
	// while it is down.
	kas.stop()
	runPod(t, ctx, shared, testPod(ns, "during", node, nil), "10.244.8.3")
	if _, err := shared.CoreV1().Pods(ns).Patch(ctx, "before", "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"v":"2"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // let the reflectors fail and back off
	if _, ok := podsOn()["during"]; ok {
		t.Fatal("the cache saw a pod created while its API server was down: the test is not testing a restart")
	}

	kas.start(ctx, pcfg)
	// A change made through the restarted API server.
	runPod(t, ctx, private, testPod(ns, "after", node, nil), "10.244.8.4")
	t0 := time.Now()
	eventually(t, 2*time.Minute, func() string {
		got := podsOn()
		if got["before"].Labels["v"] != "2" {
			return fmt.Sprintf("pod 'before' labels = %v, want v=2 (changed during the outage)", got["before"].Labels)
		}
		for _, name := range []string{"during", "after"} {
			if _, ok := got[name]; !ok {
				return fmt.Sprintf("pod %q missing from PodsOnNode() after the restart", name)
			}
		}
		return ""
	})
	t.Logf("cache caught up %v after the API server was ready again", time.Since(t0).Round(time.Millisecond))
	if !c.Synced() {
		t.Error("Synced() = false after recovery")
	}
}
