package examples_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dockerfile is what the tests read of a Dockerfile: its instructions,
// continuation lines joined, comments dropped.
type dockerfile struct {
	name  string
	instr [][2]string // keyword (upper case), the rest
}

func readDockerfile(t *testing.T, path string) *dockerfile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := &dockerfile{name: filepath.Base(path)}
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || line == "" && cur.Len() == 0 {
			continue
		}
		if rest, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(rest + " ")
			continue
		}
		cur.WriteString(line)
		kw, rest, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		d.instr = append(d.instr, [2]string{strings.ToUpper(kw), strings.TrimSpace(rest)})
		cur.Reset()
	}
	return d
}

func (d *dockerfile) all(kw string) []string {
	var out []string
	for _, in := range d.instr {
		if in[0] == kw {
			out = append(out, in[1])
		}
	}
	return out
}

// bases are the images of the FROM lines, stage names and --platform left
// out; a FROM of an earlier stage is not a base.
func (d *dockerfile) bases() []string {
	var out, stages []string
	for _, f := range d.all("FROM") {
		var image string
		fields := strings.Fields(f)
		for i, w := range fields {
			if strings.HasPrefix(w, "--") {
				continue
			}
			if image == "" {
				image = w
			}
			if strings.EqualFold(w, "AS") && i+1 < len(fields) {
				stages = append(stages, fields[i+1])
			}
		}
		if !slices.Contains(stages, image) {
			out = append(out, image)
		}
	}
	return out
}

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

// The images are pinned by tag or digest, and built from what the release
// builds: the agent's COPY names the windows/amd64 agent `make release`
// writes, the CLI's build stage compiles as the release does with the Go
// of go.mod.
func TestDeployImages(t *testing.T) {
	pinned := regexp.MustCompile(`^[a-z0-9./-]+(:[A-Za-z0-9_][A-Za-z0-9_.-]*|@sha256:[0-9a-f]{64})$`)
	files, err := filepath.Glob("../deploy/images/*.Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Fatalf("deploy/images has %d Dockerfiles, want agent-windows and hnsplan", len(files))
	}
	for _, f := range files {
		d := readDockerfile(t, f)
		for _, b := range d.bases() {
			if !pinned.MatchString(b) || strings.HasSuffix(b, ":latest") || strings.Contains(b, "$") {
				t.Errorf("%s: base image %q is not pinned by a tag or digest", d.name, b)
			}
		}
	}

	// The agent: the binary the release writes for windows/amd64.
	agent := readDockerfile(t, "../deploy/images/agent-windows.Dockerfile")
	if b := agent.bases(); len(b) != 1 || !strings.HasPrefix(b[0], "mcr.microsoft.com/oss/kubernetes/windows-host-process-containers-base-image:") {
		t.Errorf("agent-windows.Dockerfile builds on %q, want the HostProcess base image", b)
	}
	if !slices.Contains(strings.Fields(makeVar(t, "AGENT_PLATFORMS")), "windows/amd64") {
		t.Error("make release builds no windows/amd64 agent")
	}
	releaseDir := strings.ReplaceAll(makeVar(t, "RELEASE_DIR"), "$(BIN)", makeVar(t, "BIN"))
	want := releaseDir + "/hnsplan-agent-windows-amd64.exe"
	if args := agent.all("ARG"); !slices.Contains(args, "AGENT="+want) {
		t.Errorf("agent-windows.Dockerfile ARGs %q: want AGENT=%s, what make release writes", args, want)
	}
	if c := agent.all("COPY"); !slices.Equal(c, []string{"${AGENT} /hnsplan-agent.exe"}) {
		t.Errorf("agent-windows.Dockerfile copies %q, want ${AGENT} /hnsplan-agent.exe", c)
	}
	if e := agent.all("ENTRYPOINT"); !slices.Equal(e, []string{`["hnsplan-agent.exe"]`}) {
		t.Errorf("agent-windows.Dockerfile's entrypoint %q, want [\"hnsplan-agent.exe\"] (the DaemonSet passes run and its flags)", e)
	}
	if r := agent.all("RUN"); len(r) > 0 {
		t.Errorf("agent-windows.Dockerfile RUNs %q: an image for Windows built on Linux cannot", r)
	}

	// The CLI: compiled as the release compiles, with go.mod's Go.
	cli := readDockerfile(t, "../deploy/images/hnsplan.Dockerfile")
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	// The toolchain line, if any, else the go line: the Go that builds.
	m := regexp.MustCompile(`(?m)^toolchain go(\S+)$`).FindSubmatch(mod)
	if m == nil {
		m = regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	}
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	goVersion := string(m[1])
	if b := cli.bases(); len(b) != 2 || !strings.HasPrefix(b[0], "golang:"+goVersion) {
		t.Errorf("hnsplan.Dockerfile's bases %q: want a golang:%s build stage and a runtime image", b, goVersion)
	}
	var build string
	for _, r := range cli.all("RUN") {
		if strings.Contains(r, "go build") {
			build = r
		}
	}
	for _, w := range []string{"CGO_ENABLED=0", "-trimpath", "-buildvcs=false", "-s -w",
		"-X github.com/hnsplan/hnsplan/internal/buildinfo.version=${VERSION}",
		"-X github.com/hnsplan/hnsplan/internal/buildinfo.commit=${COMMIT}", "./cmd/hnsplan"} {
		if !strings.Contains(build, w) {
			t.Errorf("hnsplan.Dockerfile builds with %q, without %s", build, w)
		}
	}
	if r := strings.Join(cli.all("RUN"), "\n"); !regexp.MustCompile(`apk add [^&\n]*\bgit\b`).MatchString(r) {
		t.Error("hnsplan.Dockerfile's image has no git: hnsplan diff --base needs it")
	}
}
