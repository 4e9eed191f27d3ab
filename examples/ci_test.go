package examples_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCIScript runs examples/ci/hnsplan-pr.sh as the CI examples do: in a
// git repository whose work tree changes the VNI of the calico-vxlan
// example against HEAD. It must print changes=true and write markdown
// that calls out the replaced networks.
func TestCIScript(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed: %v", err)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "hnsplan"), "../cmd/hnsplan")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	repo := t.TempDir()
	run := func(dir string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	cluster := filepath.Join(repo, "cluster")
	if err := os.CopyFS(cluster, os.DirFS("calico-vxlan")); err != nil {
		t.Fatal(err)
	}
	run(repo, "git", "init", "-q")
	run(repo, "git", "add", ".")
	run(repo, "git", "commit", "-q", "-m", "base")
	c, err := os.ReadFile(filepath.Join(cluster, "cluster.cue"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(c), "vni: 4096") {
		t.Fatal("the example no longer sets vni: 4096")
	}
	if err := os.WriteFile(filepath.Join(cluster, "cluster.cue"), []byte(strings.Replace(string(c), "vni: 4096", "vni: 5000", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs("ci/hnsplan-pr.sh")
	out := run(repo, "sh", script, "cluster", "HEAD", "diff.md")
	if !strings.Contains(out, "changes=true") {
		t.Errorf("script output:\n%s", out)
	}
	md, err := os.ReadFile(filepath.Join(repo, "diff.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**Plan: 3 nodes to change, 3 networks to replace.**", "network(s) will be replaced", "VNI: 4096 -> 5000"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	// No change: changes=false, exit 0.
	run(repo, "git", "checkout", "-q", "--", ".")
	if out := run(repo, "sh", script, "cluster", "HEAD", "diff.md"); !strings.Contains(out, "changes=false") {
		t.Errorf("unchanged: %s", out)
	}
}
