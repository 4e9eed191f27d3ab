package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/internal/cli/clitest"
)

// TestEveryCommandHasExample walks every command, cobra's help and
// completion included: a command added without an example fails here.
func TestEveryCommandHasExample(t *testing.T) {
	clitest.CheckExamples(t, newRoot(io.Discard, io.Discard))
}

// exampleNeeds are what some example lines need that a test has not;
// TestExamplesRun runs every other line.
var exampleNeeds = map[string]string{
	"configmap":               "a cluster",
	"hnsplan-agent status":    "a running agent",
	"hnsplan-agent replace":   "a running agent",
	"hnsplan-agent install":   "Windows",
	"hnsplan-agent uninstall": "Windows",
	"C:\\":                    "a Windows node",
	"/etc/":                   "root on a Linux host",
	"~/":                      "a home directory",
}

var (
	hnsplanOnce sync.Once
	hnsplanBin  string
	hnsplanErr  error
)

// removeHnsplan is a testing.M that removes the hnsplan binary
// hnsplanBinary built once every test has run.
type removeHnsplan struct{ *testing.M }

func (m removeHnsplan) Run() int {
	code := m.M.Run()
	if hnsplanBin != "" {
		os.RemoveAll(filepath.Dir(hnsplanBin))
	}
	return code
}

// hnsplanBinary builds hnsplan from this module once per test binary.
func hnsplanBinary(t *testing.T) string {
	t.Helper()
	hnsplanOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hnsplan-bin")
		if err != nil {
			hnsplanErr = err
			return
		}
		hnsplanBin = filepath.Join(dir, "hnsplan")
		if out, err := exec.Command("go", "build", "-o", hnsplanBin, "../hnsplan").CombinedOutput(); err != nil {
			hnsplanErr = &buildError{err, out}
		}
	})
	if hnsplanErr != nil {
		t.Fatalf("building hnsplan: %v", hnsplanErr)
	}
	return hnsplanBin
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + string(e.out) }

// TestExamplesRun runs the examples that need no cluster, Windows or
// running agent, on the in-memory HNS, with the plans of the bundled
// example compiled by hnsplan (as a user following the README has them):
// each must exit 0.
func TestExamplesRun(t *testing.T) {
	bin := hnsplanBinary(t)
	dir := t.TempDir()
	clitest.CopyExamples(t, "../..", dir)
	t.Chdir(dir)
	if out, err := exec.Command(bin, "compile", "examples/calico-vxlan", "--inventory", "examples/inventory/calico-vxlan.yaml", "-o", "plans").CombinedOutput(); err != nil {
		t.Fatalf("hnsplan compile: %v\n%s", err, out)
	}
	lines := clitest.Runnable(newRoot(io.Discard, io.Discard), exampleNeeds)
	var ran []string
	for _, l := range lines {
		var stdout, stderr bytes.Buffer
		if code := run(l.Args, &stdout, &stderr); code != exitOK {
			t.Errorf("%s: exit %d\n%s%s", l.Text, code, stdout.String(), stderr.String())
		}
		ran = append(ran, strings.Join(l.Args[:1], " "))
	}
	for _, want := range []string{"apply", "run", "capture", "version"} {
		if !strings.Contains(strings.Join(ran, ","), want) {
			t.Errorf("no example of %s ran (ran %q)", want, ran)
		}
	}
}

// TestDidYouMean: a mistyped flag or command names the one meant, and is
// a usage error (exit 3).
func TestDidYouMean(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--plan-sorce", "file"}, "hnsplan-agent: unknown flag: --plan-sorce (did you mean --plan-source?)\n"},
		{[]string{"apply", "--once", "--trusted-key", "k"}, "unknown flag: --trusted-key (did you mean --trusted-keys?)"},
		{[]string{"aply", "--once"}, `unknown command "aply" for "hnsplan-agent" (did you mean apply?)`},
		{[]string{"staus"}, `(did you mean status?)`},
	}
	for _, c := range cases {
		var stderr bytes.Buffer
		code := run(c.args, io.Discard, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("hnsplan-agent %q: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr.String(), exitUsage, c.want)
		}
	}
}

func TestCompletion(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--plan-source", ""}, "file\nconfigmap\n:4\n"},
		{[]string{"status", "-o", ""}, "text\njson\n:4\n"},
		{[]string{"run", "--state-dir", ""}, ":16\n"},
		{[]string{"apply", "--plan", ""}, "json\n:8\n"},
	}
	for _, c := range cases {
		var stdout bytes.Buffer
		if code := run(append([]string{cobra.ShellCompRequestCmd}, c.args...), &stdout, io.Discard); code != exitOK || stdout.String() != c.want {
			t.Errorf("__complete %q: exit %d, %q; want %q", c.args, code, stdout.String(), c.want)
		}
	}
	var stdout bytes.Buffer
	run([]string{cobra.ShellCompRequestCmd, "run", "--hns", ""}, &stdout, io.Discard)
	for _, v := range hnsValues {
		if !strings.Contains(stdout.String(), v+"\n") {
			t.Errorf("--hns completion %q lacks %q", stdout.String(), v)
		}
	}
}

// TestREADMEExitCodes runs each example of README.md's exit-code table of
// hnsplan-agent where hnsplan compiled the bundled example's plans, and
// checks its code.
func TestREADMEExitCodes(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| ([0-9]) \\| [^|]+ \\| `hnsplan-agent ([^`]*)` \\|$")
	rows := row.FindAllStringSubmatch(string(data), -1)
	codes := map[int]bool{}
	for _, m := range rows {
		code, _ := strconv.Atoi(m[1])
		codes[code] = true
	}
	if !codes[exitOK] || !codes[exitFailed] || !codes[exitUsage] || len(codes) != 3 {
		t.Fatalf("README.md's exit-code table of hnsplan-agent has codes %v, want 0, 1 and 3 (| code | meaning | `hnsplan-agent ...` |)", codes)
	}
	bin := hnsplanBinary(t)
	example, err := filepath.Abs("../../examples/calico-vxlan")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	if out, err := exec.Command(bin, "compile", example, "-o", "plans").CombinedOutput(); err != nil {
		t.Fatalf("hnsplan compile: %v\n%s", err, out)
	}
	for _, m := range rows {
		code, _ := strconv.Atoi(m[1])
		var stdout, stderr bytes.Buffer
		if got := run(strings.Fields(m[2]), &stdout, &stderr); got != code {
			t.Errorf("hnsplan-agent %s: exit %d, README.md says %d\n%s%s", m[2], got, code, stdout.String(), stderr.String())
		}
	}
}
