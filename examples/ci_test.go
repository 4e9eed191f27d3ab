package examples_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The CI examples are tested the way a runner uses them: the workflow's and
// the GitLab job's own shell steps run in a git repository with a base and
// a pull request branch, with the hnsplan built here and a fake gh or curl
// on PATH; $GITHUB_OUTPUT is read as the runner reads it.

var hnsplanBin string // directory with the hnsplan this package's tests built

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hnsplan-ci-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "hnsplan"), "../cmd/hnsplan").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build ../cmd/hnsplan: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	hnsplanBin = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// needTools fails the test when a program the examples rely on is missing:
// git for the diff's base, jq for the fakes (and for the GitLab job itself).
func needTools(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Fatalf("%s is needed to run the CI examples (apt-get install %s): %v", n, n, err)
		}
	}
}

// prRepo is a git repository whose main branch holds a copy of the
// calico-vxlan example in cluster/, with origin/main pointing at it and the
// branch pr checked out.
type prRepo struct {
	t   *testing.T
	dir string
}

func newPRRepo(t *testing.T) *prRepo {
	t.Helper()
	r := &prRepo{t: t, dir: t.TempDir()}
	if err := os.CopyFS(filepath.Join(r.dir, "cluster"), os.DirFS("calico-vxlan")); err != nil {
		t.Fatal(err)
	}
	// The script where the README tells users to copy it, without the exec
	// bit (the examples run it with sh).
	script, err := os.ReadFile("ci/hnsplan-pr.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(r.dir, "ci"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.dir, "ci", "hnsplan-pr.sh"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	r.git("init", "-q", "-b", "main")
	// What the CI writes into the work tree is not part of any push.
	if err := os.WriteFile(filepath.Join(r.dir, ".git", "info", "exclude"), []byte("hnsplan-diff.md\nhnsplan.out\nhnsplan-inventory.yaml*\ngl-code-quality-report.json\nhnsplan-plans/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.git("add", ".")
	r.git("commit", "-q", "-m", "base")
	r.git("update-ref", "refs/remotes/origin/main", "HEAD")
	r.git("checkout", "-q", "-b", "pr")
	return r
}

func (r *prRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// edit replaces old with new in the intent file name; old must be there.
func (r *prRepo) edit(name, old, new string) {
	r.t.Helper()
	p := filepath.Join(r.dir, "cluster", name)
	data, err := os.ReadFile(p)
	if err != nil {
		r.t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		r.t.Fatalf("%s no longer contains %q", p, old)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// push commits the work tree on the checked-out branch, as a push would.
func (r *prRepo) push(msg string) {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "--allow-empty", "-m", msg)
}

// runnerEnv is the environment of a step: PATH with hnsplan and the fake
// first, git without the user's configuration, and vars.
func runnerEnv(fake *fakeForge, vars ...string) []string {
	env := []string{
		"PATH=" + hnsplanBin + string(os.PathListSeparator) + fake.bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
	}
	env = append(env, fake.env...)
	return append(env, vars...)
}

// runShell runs script with bash as the runners do (-e, pipefail) in dir and
// returns its exit code and standard error.
func runShell(t *testing.T, dir, script string, env []string) (int, string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "step.sh")
	if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", f)
	cmd.Dir = dir
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stderr.String()
	default:
		t.Fatalf("bash %s: %v", f, err)
		return 0, ""
	}
}

var outputKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// parseGitHubOutput reads a $GITHUB_OUTPUT file as the runner does: every
// line is key=value, or key<<DELIMITER opening a block that a line equal to
// DELIMITER closes. Anything else fails the step on a real runner, so it
// fails the test.
func parseGitHubOutput(data string) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		key, value := "", ""
		if k, delim, ok := strings.Cut(line, "<<"); ok && !strings.Contains(k, "=") {
			if delim == "" {
				return nil, fmt.Errorf("line %d: %q: a block without a delimiter", n, line)
			}
			key = k
			var lines []string
			closed := false
			for sc.Scan() {
				n++
				if sc.Text() == delim {
					closed = true
					break
				}
				lines = append(lines, sc.Text())
			}
			if !closed {
				return nil, fmt.Errorf("line %d: block %s: no closing %s", n, key, delim)
			}
			value = strings.Join(lines, "\n")
		} else if k, v, ok := strings.Cut(line, "="); ok {
			key, value = k, v
		} else {
			return nil, fmt.Errorf("line %d: %q is neither key=value nor key<<DELIMITER", n, line)
		}
		if !outputKey.MatchString(key) {
			return nil, fmt.Errorf("line %d: %q is not an output name", n, key)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("line %d: output %s set twice", n, key)
		}
		out[key] = value
	}
	return out, sc.Err()
}

func TestParseGitHubOutput(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
		err  string
	}{
		{in: "a=1\nb=x=y\n", want: map[string]string{"a": "1", "b": "x=y"}},
		{in: "f<<EOF\none\ntwo\nEOF\nc=\n", want: map[string]string{"f": "one\ntwo", "c": ""}},
		{in: "f<<EOF\nEOF\n", want: map[string]string{"f": ""}},
		{in: "cluster: valid: 4 nodes\nchanges=true\n", err: "neither key=value"},
		{in: "f<<EOF\none\n", err: "no closing EOF"},
		{in: "a=1\na=2\n", err: "set twice"},
		{in: "f<<\n", err: "without a delimiter"},
		{in: "a b=1\n", err: "not an output name"},
	} {
		got, err := parseGitHubOutput(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// planOutputs are the outputs every run of "hnsplan-pr.sh plan" writes.
var planOutputs = []string{"changes", "comment", "findings", "summary", "valid"}

func checkPlanOutputs(t *testing.T, outputs map[string]string, want map[string]string) {
	t.Helper()
	for _, k := range planOutputs {
		if _, ok := outputs[k]; !ok {
			t.Errorf("output %s is missing: %v", k, outputs)
		}
	}
	if len(outputs) != len(planOutputs) {
		t.Errorf("outputs %v, want exactly %v", outputs, planOutputs)
	}
	for k, v := range want {
		if outputs[k] != v {
			t.Errorf("output %s = %q, want %q", k, outputs[k], v)
		}
	}
}

// markerOf is the first line of every comment the script writes for cluster/.
const markerOf = "<!-- hnsplan-diff cluster -->\n"

// The comment's body for each state of the pull request.
var (
	vni5000   = []string{markerOf, "**Plan: 3 nodes to change, 3 networks to replace. VXLAN VNI 4096 -> 5000: ", "> [!CAUTION]", `FelixConfiguration "default" spec.vxlanVNI 4096 -> 5000`, "VNI: 4096 -> 5000"}
	vni5001   = []string{markerOf, "**Plan: 3 nodes to change, 3 networks to replace. VXLAN VNI 4096 -> 5001: ", "> [!CAUTION]", `FelixConfiguration "default" spec.vxlanVNI 4096 -> 5001`, "VNI: 4096 -> 5001"}
	vetErrors = []string{markerOf, "`cluster` is invalid", "cluster/cluster.cue:", "error[vxlan-port]", "VXLAN port 4790", "cluster: invalid: 1 error"}
	noChanges = []string{markerOf, "**No changes. The Windows nodes' HNS plans are the same.**"}
)

func checkBody(t *testing.T, what, body string, want []string) {
	t.Helper()
	if !strings.HasPrefix(body, markerOf) {
		t.Errorf("%s does not start with the marker:\n%s", what, body)
	}
	// In this order.
	rest := body
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Errorf("%s lacks %q (after %q):\n%s", what, w, want[:slices.Index(want, w)], body)
			return
		}
		rest = rest[i+len(w):]
	}
	// The base branch gained win-4 after the pull request branched; from
	// the merge base, it is no part of the pull request's diff.
	if strings.Contains(body, "win-4") {
		t.Errorf("%s shows the base branch's own change (win-4): the diff must start at the merge base:\n%s", what, body)
	}
}

// pullRequestPushes drives a pull request through the states its comment
// must follow. run runs the CI for the current HEAD and returns the plan's
// exit code, the comment's body afterwards ("" if none) and the forge calls
// it made; update is the HTTP method the forge updates a comment with.
func pullRequestPushes(t *testing.T, r *prRepo, update string, run func(step string) (exit int, body string, calls []string)) {
	check := func(step string, wantExit int, wantWrite string, want []string) {
		t.Helper()
		exit, body, calls := run(step)
		if exit != wantExit {
			t.Errorf("%s: plan exit %d, want %d", step, exit, wantExit)
		}
		// Reads may take several pages; writes are what must be right.
		var writes []string
		for _, c := range calls {
			f := strings.Fields(c)
			for i := 0; i+1 < len(f); i++ {
				if (f[i] == "--method" || f[i] == "--request") && f[i+1] != "GET" {
					writes = append(writes, f[i+1])
				}
			}
		}
		if len(calls) == 0 || (wantWrite == "" && len(writes) != 0) || (wantWrite != "" && fmt.Sprint(writes) != "["+wantWrite+"]") {
			t.Errorf("%s: forge calls %q, want reads and then one %q", step, calls, wantWrite)
		}
		if want == nil {
			if body != "" {
				t.Errorf("%s: a comment was posted:\n%s", step, body)
			}
			return
		}
		if body == "" {
			t.Errorf("%s: no comment", step)
			return
		}
		checkBody(t, step+": the comment", body, want)
	}

	// A pull request that does not touch the intent gets no comment.
	if err := os.WriteFile(filepath.Join(r.dir, "NOTES.md"), []byte("unrelated\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.push("unrelated")
	check("unrelated push", 0, "", nil)

	r.edit("cluster.cue", "vni: 4096", "vni: 5000")
	r.push("vni 5000")
	check("changing push", 0, "POST", vni5000)

	// main moves on; the pull request is not rebased.
	r.git("checkout", "-q", "main")
	r.edit("nodes.cue", "\t\"win-3\": {ip: \"10.240.0.23\"", "\t\"win-4\": {ip: \"10.240.0.24\", build: \"10.0.17763.6893\", zone: \"us-east-1c\"}\n\t\"win-3\": {ip: \"10.240.0.23\"")
	r.push("main: win-4")
	r.git("update-ref", "refs/remotes/origin/main", "HEAD")
	r.git("checkout", "-q", "pr")

	r.edit("cluster.cue", "vni: 5000", "vni: 5001")
	r.push("vni 5001")
	check("second changing push", 0, update, vni5001)

	r.edit("cluster.cue", "port: 4789", "port: 4790")
	r.push("port 4790")
	check("push with a vet error", 1, update, vetErrors)

	r.edit("cluster.cue", "port: 4790", "port: 4789")
	r.edit("cluster.cue", "vni: 5001", "vni: 4096")
	r.push("revert")
	check("push that takes the changes out", 0, update, noChanges)
}

// TestCIScriptPlan runs "hnsplan-pr.sh plan" on the cases the pull request
// flow above does not reach: warnings, findings that try to break the
// markdown, a failure before the diff, and refused arguments.
func TestCIScriptPlan(t *testing.T) {
	needTools(t, "git")
	for _, tc := range []struct {
		name     string
		change   func(r *prRepo)
		args     []string // after "plan"
		exit     int
		outputs  map[string]string // nil: standard output must be empty
		body     []string
		bodyNot  []string
		bodyPres int // how many <pre> blocks the body has
	}{{
		name: "valid with a warning",
		change: func(r *prRepo) {
			r.edit("cluster.cue", "disableHostSubnetNATExclusion: false", "disableHostSubnetNATExclusion: true")
		},
		args:     []string{"cluster", "origin/main", "out.md"},
		outputs:  map[string]string{"valid": "true", "changes": "true", "comment": "create"},
		body:     []string{"**Plan: ", "<details><summary>hnsplan vet: cluster: valid: cluster \"shop-prod\"", "; 1 warning", "warning[host-subnet-nat-disabled]"},
		bodyPres: 1,
	}, {
		name: "findings that would break the markdown",
		change: func(r *prRepo) {
			if err := os.WriteFile(filepath.Join(r.dir, "cluster", "manifests", "evil<pre>```-->.yaml"), []byte("kind: [\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		args:     []string{"cluster/", "origin/main", "out.md"},
		exit:     1,
		outputs:  map[string]string{"valid": "false", "changes": "unknown", "comment": "create"},
		body:     []string{"cluster/manifests/evil&lt;pre&gt;```--&gt;.yaml:", "error[manifest]"},
		bodyNot:  []string{"evil<pre>", "```-->"},
		bodyPres: 1,
	}, {
		name:     "no merge base",
		args:     []string{"cluster", "origin/gone", "out.md"},
		exit:     1,
		outputs:  map[string]string{"valid": "true", "changes": "unknown", "comment": "create"},
		body:     []string{"**no merge base of origin/gone and HEAD: check out the full history", "fatal: "},
		bodyPres: 1,
	}, {
		name: "an intent name that would end the marker",
		args: []string{"clu--ster", "origin/main", "out.md"},
		exit: 1,
	}, {
		name: "usage",
		args: []string{"cluster", "origin/main"},
		exit: 2,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newPRRepo(t)
			if tc.change != nil {
				tc.change(r)
				r.push(tc.name)
			}
			cmd := exec.Command("sh", append([]string{"ci/hnsplan-pr.sh", "plan"}, tc.args...)...)
			cmd.Dir = r.dir
			cmd.Env = runnerEnv(&fakeForge{})
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			exit := 0
			if ee, ok := err.(*exec.ExitError); ok {
				exit = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if exit != tc.exit {
				t.Errorf("exit %d, want %d", exit, tc.exit)
			}
			t.Logf("standard error:\n%s", stderr.String())
			if tc.outputs == nil {
				if stdout.Len() != 0 || !strings.Contains(stderr.String(), "hnsplan-pr.sh") {
					t.Errorf("want only a message on standard error; stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
				}
				return
			}
			outputs, err := parseGitHubOutput(stdout.String())
			if err != nil {
				t.Fatalf("standard output as $GITHUB_OUTPUT: %v\n%s", err, stdout.String())
			}
			checkPlanOutputs(t, outputs, tc.outputs)
			data, err := os.ReadFile(filepath.Join(r.dir, "out.md"))
			if err != nil {
				t.Fatal(err)
			}
			body := string(data)
			checkBody(t, "out.md", body, tc.body)
			for _, s := range tc.bodyNot {
				if strings.Contains(body, s) {
					t.Errorf("out.md has %q:\n%s", s, body)
				}
			}
			if n, m := strings.Count(body, "<pre>"), strings.Count(body, "</pre>"); n != tc.bodyPres || m != tc.bodyPres {
				t.Errorf("out.md has %d <pre> and %d </pre>, want %d:\n%s", n, m, tc.bodyPres, body)
			}
		})
	}
}

// TestCIScriptCommentRefuses: "hnsplan-pr.sh comment" posts nothing it
// cannot vouch for, and says what is missing.
func TestCIScriptCommentRefuses(t *testing.T) {
	needTools(t, "jq")
	dir := t.TempDir()
	for name, body := range map[string]string{"good.md": markerOf + "body\n", "plain.md": "# a diff\n", "bad.md": "<!-- hnsplan-diff a--b -->\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script, err := filepath.Abs("ci/hnsplan-pr.sh")
	if err != nil {
		t.Fatal(err)
	}
	gh := newFakeForge(t, "gh", fakeGH, "comments.json", []any{}, "FAKE_REPO=o/r", "FAKE_PR=7", "FAKE_LOGIN=github-actions[bot]")
	ghEnv := []string{"GH_TOKEN=t", "GITHUB_REPOSITORY=o/r", "HNSPLAN_PR=7"}
	gl := newFakeForge(t, "curl", fakeCurl, "notes.json", []any{}, "FAKE_API=https://gl/api/v4", "FAKE_PROJECT=1", "FAKE_MR=7", "FAKE_TOKEN=x", "FAKE_USER_ID=5")
	glEnv := []string{"CI_API_V4_URL=https://gl/api/v4", "CI_PROJECT_ID=1", "CI_MERGE_REQUEST_IID=7"}
	for _, tc := range []struct {
		fake *fakeForge
		env  []string
		args []string
		exit int
		msg  string
	}{
		{gh, ghEnv, []string{"github", "plain.md", "create"}, 1, "does not start with the <!-- hnsplan-diff INTENT_DIR --> marker"},
		{gh, ghEnv, []string{"github", "bad.md", "create"}, 1, "intent directory \"a--b\""},
		{gh, ghEnv, []string{"github", "missing.md", "create"}, 1, "missing.md is missing or empty"},
		{gh, ghEnv, []string{"github", "good.md", "always"}, 2, "usage:"},
		{gh, ghEnv[:2], []string{"github", "good.md", "create"}, 2, "HNSPLAN_PR"},
		{gh, []string{"GH_TOKEN=t", "GITHUB_REPOSITORY=o/r/x", "HNSPLAN_PR=7"}, []string{"github", "good.md", "create"}, 1, "is not owner/name"},
		{gh, []string{"GH_TOKEN=t", "GITHUB_REPOSITORY=o/r", "HNSPLAN_PR=7 8"}, []string{"github", "good.md", "create"}, 1, "is not a pull request number"},
		{gh, append(ghEnv, `HNSPLAN_COMMENT_AUTHOR=x") or true or ("`), []string{"github", "good.md", "create"}, 1, "is not a GitHub login"},
		{gl, glEnv, []string{"gitlab", "good.md", "create"}, 2, "HNSPLAN_NOTE_TOKEN to an access token with the api scope"},
		{gl, append(glEnv, "HNSPLAN_NOTE_TOKEN=wrong"), []string{"gitlab", "good.md", "create"}, 1, "401 Unauthorized"},
	} {
		cmd := exec.Command("sh", append([]string{script, "comment"}, tc.args...)...)
		cmd.Dir = dir
		cmd.Env = runnerEnv(tc.fake, tc.env...)
		out, err := cmd.CombinedOutput()
		exit := 0
		if ee, ok := err.(*exec.ExitError); ok {
			exit = ee.ExitCode()
		}
		if exit != tc.exit || !strings.Contains(string(out), tc.msg) {
			t.Errorf("comment %v with %v: exit %d, want %d with %q:\n%s", tc.args, tc.env, exit, tc.exit, tc.msg, out)
		}
		for _, c := range tc.fake.calls(t) {
			if strings.Contains(c, "--method") || strings.Contains(c, "--request") {
				t.Errorf("comment %v with %v: a write: %s", tc.args, tc.env, c)
			}
		}
	}
}
