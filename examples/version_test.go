package examples_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/hnsplan/hnsplan/internal/changelog"
)

// repoChangelog is the repository's CHANGELOG.md, parsed strictly.
func repoChangelog(t *testing.T) *changelog.Log {
	t.Helper()
	data, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	log, err := changelog.Parse("CHANGELOG.md", data)
	if err != nil {
		t.Fatal(err)
	}
	return log
}

// TestVersionsAgree: one version everywhere a user meets it. The CI
// examples install, the kustomize base runs, and the Helm chart (when the
// repository has one) packages the changelog's newest release.
func TestVersionsAgree(t *testing.T) {
	newest := repoChangelog(t).Newest().Version
	tag := newest.Tag()

	var wf ghWorkflow
	readYAML(t, "ci/github-actions.yml", false, &wf)
	var jobs map[string]glJob
	readYAML(t, "ci/gitlab-ci.yml", false, &jobs)
	got := map[string]string{
		"examples/ci/github-actions.yml env HNSPLAN_VERSION":    wf.Env["HNSPLAN_VERSION"],
		"examples/ci/gitlab-ci.yml variables HNSPLAN_VERSION":   glVariable(jobs, "HNSPLAN_VERSION"),
		"deploy/kustomization.yaml images hnsplan-agent newTag": loadKustomization(t).image("hnsplan-agent"),
	}
	want := map[string]string{
		"deploy/kustomization.yaml images hnsplan-agent newTag": "ghcr.io/hnsplan/hnsplan-agent:" + tag,
	}
	chart := "../deploy/helm/hnsplan/Chart.yaml"
	if data, err := os.ReadFile(chart); err == nil {
		var c struct {
			Version    string `yaml:"version"`
			AppVersion string `yaml:"appVersion"`
		}
		if err := yaml.Unmarshal(data, &c); err != nil {
			t.Fatalf("%s: %v", chart, err)
		}
		got["deploy/helm/hnsplan/Chart.yaml version"] = c.Version
		got["deploy/helm/hnsplan/Chart.yaml appVersion"] = c.AppVersion
		want["deploy/helm/hnsplan/Chart.yaml version"] = newest.String()
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for where, v := range got {
		w, ok := want[where]
		if !ok {
			w = tag
		}
		if v != w {
			t.Errorf("%s is %q; CHANGELOG.md's newest release is %s: want %q", where, v, tag, w)
		}
	}
}

// glVariable is a variable of the GitLab example, set at the top level or
// on a job; two different values fail the test by returning "".
func glVariable(jobs map[string]glJob, name string) string {
	v := ""
	for _, j := range jobs {
		if x, ok := j.Variables[name]; ok {
			if v != "" && v != x {
				return ""
			}
			v = x
		}
	}
	return v
}

// TestReleaseRefuses: make release builds nothing for a changelog it
// cannot vouch for, and says why. (The build itself is TestRelease, in
// make test-release.)
func TestReleaseRefuses(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	pending := strings.Replace(string(good), "## [Unreleased]\n", "## [Unreleased]\n\n### Fixed\n\n- a fix not released yet\n", 1)
	for _, tc := range []struct {
		name, changelog string
		vars            []string
		want            string
	}{
		{"unreleased changes", pending, nil, "[Unreleased] lists 1 change(s): move them into a release section"},
		{"unreleased changes, an older version named", pending, []string{"RELEASE_VERSION=v0.1.0"}, "ALLOW_UNRELEASED=1"},
		{"a version the changelog does not list", string(good), []string{"RELEASE_VERSION=v9.9.9"}, "the changelog has no release v9.9.9"},
		{"a broken changelog", strings.Replace(string(good), "### Added", "### New", 1), nil, `subsection "New": Keep a Changelog's are`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cl := filepath.Join(dir, "CHANGELOG.md")
			if err := os.WriteFile(cl, []byte(tc.changelog), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "release")
			args := append([]string{"--no-print-directory", "release", "CHANGELOG=" + cl, "RELEASE_DIR=" + out}, tc.vars...)
			got, code := runCode(t, repo, "make", args...)
			if code == 0 || !strings.Contains(got, tc.want) {
				t.Errorf("make %s: exit %d, want a failure saying %q:\n%s", strings.Join(args, " "), code, tc.want, got)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("a refused release wrote %s (%v)", out, err)
			}
		})
	}
}
