package examples_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type ghStep struct {
	ID              string            `yaml:"id"`
	Name            string            `yaml:"name"`
	Uses            string            `yaml:"uses"`
	Run             string            `yaml:"run"`
	If              string            `yaml:"if"`
	Env             map[string]string `yaml:"env"`
	With            map[string]string `yaml:"with"`
	ContinueOnError string            `yaml:"continue-on-error"`
}

type ghWorkflow struct {
	Env  map[string]string `yaml:"env"`
	Jobs map[string]struct {
		Steps []ghStep `yaml:"steps"`
	} `yaml:"jobs"`
}

type glJob struct {
	Image         string              `yaml:"image"`
	Rules         []map[string]string `yaml:"rules"`
	Interruptible bool                `yaml:"interruptible"`
	Variables     map[string]string   `yaml:"variables"`
	BeforeScript  []string            `yaml:"before_script"`
	Script        []string            `yaml:"script"`
	ResourceGroup string              `yaml:"resource_group"`
	Timeout       string              `yaml:"timeout"`
	Artifacts     struct {
		When    string            `yaml:"when"`
		Paths   []string          `yaml:"paths"`
		Reports map[string]string `yaml:"reports"`
	} `yaml:"artifacts"`
}

// readYAML decodes path into v; strict refuses keys v has no field for.
func readYAML(t *testing.T, path string, strict bool, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(strict)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

var expr = regexp.MustCompile(`^\$\{\{\s*(.*?)\s*\}\}$`)

// resolve gives a step's env value as the runner would, from ctx; an
// expression the test does not know fails it.
func resolve(t *testing.T, v string, ctx map[string]string) string {
	t.Helper()
	m := expr.FindStringSubmatch(v)
	if m == nil {
		if strings.Contains(v, "${{") {
			t.Fatalf("env value %q: only a whole-value expression is emulated", v)
		}
		return v
	}
	r, ok := ctx[m[1]]
	if !ok {
		t.Fatalf("env value %q: the test does not know %s", v, m[1])
	}
	return r
}

// TestCIGitHubWorkflow runs the workflow's own steps, "Read the cluster's
// inventory" (as on a fork: no secret), "Vet and diff", "Vet as SARIF" and
// "Comment on the pull request", through a pull request's pushes, with a fake
// gh that already holds a comment quoting the marker (by someone else) and
// another bot comment; neither may be touched. The SARIF is validated
// against the SARIF 2.1.0 schema code scanning reads.
func TestCIGitHubWorkflow(t *testing.T) {
	needTools(t, "git", "jq", "bash")
	var wf ghWorkflow
	readYAML(t, "ci/github-actions.yml", false, &wf)
	job, ok := wf.Jobs["plan"]
	if !ok {
		t.Fatal("the workflow has no job plan")
	}
	step := map[string]ghStep{}
	for _, s := range job.Steps {
		if s.Run != "" && strings.Contains(s.Run, "${{") {
			t.Errorf("step %q puts an expression into its script: pass it through env (script injection)", s.Name)
		}
		if s.Uses == "actions/checkout@v4" && s.With["fetch-depth"] != "0" {
			t.Errorf("checkout without fetch-depth: 0: the merge base is missing")
		}
		step[s.ID] = s
	}
	inventory, plan, sarif, comment := step["inventory"], step["plan"], step["sarif"], step["comment"]
	if inventory.Run == "" || plan.Run == "" || sarif.Run == "" || comment.Run == "" {
		t.Fatalf("the workflow needs the steps id: inventory, plan, sarif and comment with run scripts")
	}
	upload := false
	for _, s := range job.Steps {
		if strings.HasPrefix(s.Uses, "github/codeql-action/upload-sarif@") {
			upload = s.With["sarif_file"] == "${{ runner.temp }}/hnsplan.sarif" && s.If == "${{ !cancelled() && steps.sarif.outcome == 'success' }}"
		}
	}
	if !upload {
		t.Error("no upload-sarif step of ${{ runner.temp }}/hnsplan.sarif after the sarif step")
	}
	schema := sarifSchema(t)
	// The comment must follow a failed plan (vet errors), and be skipped
	// when the plan never ran.
	if comment.If != "${{ !cancelled() && steps.plan.outputs.comment != '' }}" {
		t.Errorf("comment step if: %q; the emulation below assumes it runs unless cancelled, whenever the plan set comment", comment.If)
	}

	r := newPRRepo(t)
	const login = "github-actions[bot]"
	canned := []map[string]any{
		{"id": 11, "user": map[string]any{"login": "alice"}, "body": markerOf + "quoting the bot"},
		{"id": 12, "user": map[string]any{"login": login}, "body": "another bot's comment"},
	}
	fake := newFakeForge(t, "gh", fakeGH, "comments.json", canned,
		"FAKE_REPO=octo/cluster", "FAKE_PR=7", "FAKE_LOGIN="+login)

	var runnerTemp string
	runStep := func(s ghStep, ctx map[string]string) (int, string, map[string]string, string) {
		t.Helper()
		dir := t.TempDir()
		output, summary := filepath.Join(dir, "output"), filepath.Join(dir, "summary")
		for _, f := range []string{output, summary} {
			if err := os.WriteFile(f, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		env := runnerEnv(fake, "GITHUB_OUTPUT="+output, "GITHUB_STEP_SUMMARY="+summary,
			"GITHUB_REPOSITORY=octo/cluster", "GITHUB_BASE_REF=main", "CI=true", "RUNNER_TEMP="+runnerTemp)
		for k, v := range wf.Env {
			env = append(env, k+"="+resolve(t, v, ctx))
		}
		for k, v := range s.Env {
			env = append(env, k+"="+resolve(t, v, ctx))
		}
		exit, log := runShell(t, r.dir, s.Run, env)
		data, err := os.ReadFile(output)
		if err != nil {
			t.Fatal(err)
		}
		outputs, err := parseGitHubOutput(string(data))
		if err != nil {
			t.Fatalf("step %q: $GITHUB_OUTPUT would fail the step: %v\n%s", s.Name, err, data)
		}
		sum, err := os.ReadFile(summary)
		if err != nil {
			t.Fatal(err)
		}
		return exit, log, outputs, string(sum)
	}

	pullRequestPushes(t, r, "PATCH", func(name string) (int, string, []string) {
		ctx := map[string]string{
			"github.base_ref":                          "main",
			"github.event.pull_request.number":         "7",
			"github.token":                             "ghs_test",
			"github.event.pull_request.head.repo.fork": "true",
			"secrets.HNSPLAN_INVENTORY_KUBECONFIG":     "",
		}
		runnerTemp = t.TempDir()
		if iexit, ilog, _, _ := runStep(inventory, ctx); iexit != 0 {
			t.Errorf("%s: inventory step exit %d:\n%s", name, iexit, ilog)
		}
		exit, log, outputs, _ := runStep(plan, ctx)
		t.Logf("%s: plan step (exit %d):\n%s", name, exit, log)
		want := map[string]string{"valid": "true", "changes": "false", "comment": "update"}
		switch name {
		case "push with a vet error":
			want = map[string]string{"valid": "false", "changes": "unknown", "comment": "create"}
			if !strings.Contains(outputs["findings"], "error[vxlan-port]") {
				t.Errorf("%s: findings output %q lacks the error", name, outputs["findings"])
			}
		case "changing push", "second changing push":
			want = map[string]string{"valid": "true", "changes": "true", "comment": "create"}
		}
		checkPlanOutputs(t, outputs, want)
		if !strings.HasPrefix(outputs["summary"], "cluster: ") {
			t.Errorf("%s: summary %q is not vet's summary line", name, outputs["summary"])
		}

		if sexit, slog, _, _ := runStep(sarif, ctx); sexit != 0 {
			t.Errorf("%s: sarif step exit %d:\n%s", name, sexit, slog)
		}
		checkSARIF(t, schema, filepath.Join(runnerTemp, "hnsplan.sarif"), name == "push with a vet error")

		ctx["steps.plan.outputs.comment"] = outputs["comment"]
		cexit, clog, coutputs, sum := runStep(comment, ctx)
		if cexit != 0 || len(coutputs) != 0 {
			t.Errorf("%s: comment step exit %d, outputs %v:\n%s", name, cexit, coutputs, clog)
		}
		md, err := os.ReadFile(filepath.Join(r.dir, "hnsplan-diff.md"))
		if err != nil || sum != string(md) {
			t.Errorf("%s: the job summary is not the comment: %v\n%s", name, err, sum)
		}

		var comments []struct {
			ID   int
			User struct{ Login string }
			Body string
		}
		fake.load(t, "comments.json", &comments)
		body := ""
		defer func() {
			// A fork's run has no secret: the comment says the access delta was skipped, and why.
			const skipped = "**Access delta not shown** (who gains or loses access): no kubeconfig to read the cluster with: the secret HNSPLAN_INVENTORY_KUBECONFIG is not set for this run (pull requests from forks get no secrets)"
			if body != "" && name != "push with a vet error" && !strings.Contains(body, skipped) {
				t.Errorf("%s: the comment does not say the access delta was skipped:\n%s", name, body)
			}
		}()
		for _, c := range comments {
			switch {
			case c.ID == 11 || c.ID == 12:
				if c.Body != canned[c.ID-11]["body"] {
					t.Errorf("%s: comment %d by %s was changed: %q", name, c.ID, c.User.Login, c.Body)
				}
			case body != "":
				t.Errorf("%s: a second comment: %+v", name, c)
			default:
				body = c.Body
				if c.User.Login != login {
					t.Errorf("%s: comment by %s", name, c.User.Login)
				}
			}
		}
		return exit, body, fake.calls(t)
	})
}

// TestCIGitLabJob runs the job's script (not before_script, which installs
// jq, kubectl and hnsplan; TestCIInstall runs its install line) through a
// merge request's pushes, as from a fork (no inventory variable), with a
// fake curl serving the notes API: 150 notes by others first, one of them
// quoting the marker, so finding our note takes the second page. The code
// quality report is read as GitLab reads it.
func TestCIGitLabJob(t *testing.T) {
	needTools(t, "git", "jq", "bash")
	var jobs map[string]glJob
	readYAML(t, "ci/gitlab-ci.yml", true, &jobs)
	job, ok := jobs["hnsplan"]
	if _, deploy := jobs["hnsplan-deploy"]; !ok || !deploy || len(jobs) != 2 {
		t.Fatalf("gitlab-ci.yml must hold the jobs hnsplan and hnsplan-deploy: %v", jobs)
	}
	if len(job.Rules) != 1 || job.Rules[0]["if"] != `$CI_PIPELINE_SOURCE == "merge_request_event"` || len(job.Rules[0]) != 1 {
		t.Errorf("rules %v: run on every merge request event, with no changes: filter (a push that reverts must still run)", job.Rules)
	}
	if job.Variables["GIT_DEPTH"] != "0" || job.Variables["INTENT_DIR"] != "cluster" {
		t.Errorf("variables %v: want GIT_DEPTH 0 (the merge base) and INTENT_DIR cluster", job.Variables)
	}
	if !strings.Contains(strings.Join(job.BeforeScript, "\n"), `sh ci/hnsplan-pr.sh install "$HNSPLAN_VERSION" /usr/local/bin`) {
		t.Errorf("before_script %q does not install the pinned hnsplan release", job.BeforeScript)
	}
	if job.Artifacts.When != "always" || len(job.Artifacts.Paths) != 1 || job.Artifacts.Paths[0] != "hnsplan-diff.md" ||
		len(job.Artifacts.Reports) != 1 || job.Artifacts.Reports["codequality"] != "gl-code-quality-report.json" {
		t.Errorf("artifacts %+v: keep hnsplan-diff.md always, and report gl-code-quality-report.json as codequality", job.Artifacts)
	}
	if !job.Interruptible {
		t.Error("the job should be interruptible: a newer push supersedes it")
	}

	r := newPRRepo(t)
	const me = 99
	var canned []map[string]any
	for i := 1; i <= 150; i++ {
		body := "a review note"
		if i == 3 {
			body = markerOf + "quoted by a reviewer"
		}
		canned = append(canned, map[string]any{"id": i, "author": map[string]any{"id": 1000 + i%3}, "system": false, "body": body})
	}
	fake := newFakeForge(t, "curl", fakeCurl, "notes.json", canned,
		"FAKE_API=https://gitlab.example.com/api/v4", "FAKE_PROJECT=42", "FAKE_MR=7",
		"FAKE_TOKEN=glpat-test", "FAKE_USER_ID=99")
	base := r.git("rev-parse", "main")
	script := "set -eo pipefail\n" + strings.Join(job.Script, "\n") + "\n"

	pullRequestPushes(t, r, "PUT", func(name string) (int, string, []string) {
		// CI_MERGE_REQUEST_DIFF_BASE_SHA is the merge base, which stays at
		// the branch point when main moves on.
		env := runnerEnv(fake, "CI=true", "GITLAB_CI=true", "CI_PIPELINE_SOURCE=merge_request_event",
			"CI_API_V4_URL=https://gitlab.example.com/api/v4", "CI_PROJECT_ID=42", "CI_MERGE_REQUEST_IID=7",
			"CI_MERGE_REQUEST_DIFF_BASE_SHA="+base, "CI_MERGE_REQUEST_TARGET_BRANCH_NAME=main",
			"HNSPLAN_NOTE_TOKEN=glpat-test")
		for k, v := range job.Variables {
			env = append(env, k+"="+v)
		}
		exit, log := runShell(t, r.dir, script, env)
		t.Logf("%s: job (exit %d):\n%s", name, exit, log)
		out, err := os.ReadFile(filepath.Join(r.dir, "hnsplan.out"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parseGitHubOutput(string(out)); err != nil {
			t.Errorf("%s: the plan's standard output: %v\n%s", name, err, out)
		}
		checkCodeQuality(t, filepath.Join(r.dir, "gl-code-quality-report.json"), name == "push with a vet error")
		var notes []struct {
			ID     int
			Author struct{ ID int }
			Body   string
		}
		fake.load(t, "notes.json", &notes)
		body := ""
		for _, n := range notes {
			switch {
			case n.ID <= 150:
				if n.Body != canned[n.ID-1]["body"] {
					t.Errorf("%s: note %d by %d was changed: %q", name, n.ID, n.Author.ID, n.Body)
				}
			case body != "":
				t.Errorf("%s: a second note: %+v", name, n)
			default:
				body = n.Body
				if n.Author.ID != me {
					t.Errorf("%s: note by %d", name, n.Author.ID)
				}
			}
		}
		return exit, body, fake.calls(t)
	})
}

// TestCIWorkflowsLint runs actionlint (a tool dependency in go.mod) on the
// example and on this repository's own workflows. actionlint checks the run
// scripts with shellcheck when shellcheck is installed; the script itself
// is checked the same way.
func TestCIWorkflowsLint(t *testing.T) {
	own, err := filepath.Glob("../.github/workflows/*.yml")
	if err != nil || len(own) == 0 {
		t.Fatalf("no workflows in ../.github/workflows: %v", err)
	}
	args := append([]string{"tool", "actionlint", "-no-color", "ci/github-actions.yml", "ci/github-actions-deploy.yml"}, own...)
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if _, err := exec.LookPath("shellcheck"); err != nil {
		t.Log("shellcheck is not installed: the run scripts and hnsplan-pr.sh are not shellchecked")
		return
	}
	if out, err := exec.Command("shellcheck", "-s", "sh", "ci/hnsplan-pr.sh").CombinedOutput(); err != nil {
		t.Errorf("shellcheck ci/hnsplan-pr.sh: %v\n%s", err, out)
	}
}
