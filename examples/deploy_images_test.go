package examples_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/internal/imagebuild"
)

// makeVar is the default of a `NAME ?= value` variable of the Makefile.
func makeVar(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s*\??:?=\s*(.*)$`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("the Makefile sets no %s", name)
	}
	return strings.TrimSpace(string(m[1]))
}

// TestDeployImageStartsAgent: the DaemonSet's agent container, run on the
// image `make images` builds, starts the image's hnsplan-agent.exe, under
// both HostProcess mount behaviours and on a host that has a copy of its
// own (hcsshim's rules, imagebuild.ResolveHostProcess). A command or
// workingDir added to the DaemonSet, or an image entrypoint changed, that
// would start another program or none fails here.
func TestDeployImageStartsAgent(t *testing.T) {
	ds := agentDaemonSet(t)
	var found bool
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Image != "ghcr.io/hnsplan/hnsplan-agent" && !strings.HasPrefix(c.Image, "ghcr.io/hnsplan/hnsplan-agent:") &&
			!strings.HasPrefix(c.Image, "ghcr.io/hnsplan/hnsplan-agent@") {
			continue
		}
		found = true
		cfg := imagebuild.AgentConfig(imagebuild.Meta{})
		hp := imagebuild.HostProcess{
			Entrypoint: cfg.Entrypoint, Cmd: cfg.Cmd, WorkingDir: cfg.WorkingDir, Env: cfg.Env,
			Command: c.Command, Args: c.Args, PodWorkingDir: c.WorkingDir,
			ImageFiles: []string{imagebuild.AgentExe},
		}
		if err := imagebuild.CheckHostProcess(hp, imagebuild.AgentExe); err != nil {
			t.Errorf("container %s: %v", c.Name, err)
		}
		hp.Behavior = imagebuild.Bind
		files, path := imagebuild.DefaultHost()
		hp.HostFiles, hp.HostPath = files, path
		r, err := imagebuild.ResolveHostProcess(hp)
		if err != nil || !strings.HasPrefix(r.CommandLine, `cmd /c C:\hpc\hnsplan-agent.exe run `) {
			t.Errorf("container %s with bind mounts: command line %q, %v", c.Name, r.CommandLine, err)
		}
	}
	if !found {
		t.Fatal("the DaemonSet runs no ghcr.io/hnsplan/hnsplan-agent container")
	}
	if ds.Spec.Template.Annotations["microsoft.com/hostprocess-mount-behavior"] != "bind" {
		t.Error("the DaemonSet does not ask for bind mounts")
	}
}
