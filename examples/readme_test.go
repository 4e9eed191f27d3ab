package examples_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestREADME follows the README as a new user would, with binaries built
// by `make build`: every command of the tour runs and succeeds, every
// output it shows is what the command prints now (a line "…" stands for
// lines left out, "…" in a line for text left out), the tour's intent is
// valid, the tour writes only into git-ignored directories, the version is
// stamped from git, and the recipe for the `cue` command works with the
// real cue CLI (a tool dependency in go.mod).
func TestREADME(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries with make")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	tour := section(t, string(data), "\n## A 5-minute tour\n", "\n## ")
	bin := filepath.Join(t.TempDir(), "bin")
	mustRun(t, repo, "make", "--no-print-directory", "build", "BIN="+bin)

	t.Run("version", func(t *testing.T) { testVersion(t, repo, bin) })
	t.Run("tour", func(t *testing.T) { testTour(t, repo, bin, tour) })
	t.Run("cue-recipe", func(t *testing.T) {
		testCueRecipe(t, repo, bin, tour)
	})
}

// testVersion: both binaries print, for `version` and `--version`, the
// version git describe gives and the commit, as make build stamps them.
func testVersion(t *testing.T, repo, bin string) {
	describe, err1 := output(repo, "git", "describe", "--tags", "--always", "--dirty")
	commit, err2 := output(repo, "git", "rev-parse", "HEAD")
	for _, name := range []string{"hnsplan", "hnsplan-agent"} {
		v := mustRun(t, repo, filepath.Join(bin, name), "version")
		if flag := mustRun(t, repo, filepath.Join(bin, name), "--version"); flag != v {
			t.Errorf("%s --version says %q, version %q", name, flag, v)
		}
		want := name + " (devel) (commit unknown, "
		if err1 == nil && err2 == nil {
			want = name + " " + strings.TrimSpace(describe) + " (commit " + strings.TrimSpace(commit) + ", "
		}
		if !strings.HasPrefix(v, want) {
			t.Errorf("%s version = %q, want it to start with %q", name, v, want)
		}
	}
}

// A textCheck produces the output a ```text block of the tour shows.
type textCheck struct {
	prefix string                    // the block's first line starts with it
	run    func(t *testing.T) string // the command's output now
}

func testTour(t *testing.T, repo, bin, tour string) {
	// The user's directory: the clone's examples, the built binaries and
	// the tour's own intent directory.
	root := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(root, "bin")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(repo, "examples"), filepath.Join(root, "examples")); err != nil {
		t.Fatal(err)
	}
	examplesBefore := tree(t, filepath.Join(repo, "examples"))

	blocks := fenced(tour)
	var intentCUE, constraintsCUE string
	for _, b := range blocks {
		switch {
		case b.lang == "cue" && strings.HasPrefix(b.body, "package cluster\n\ncluster: {") && intentCUE == "":
			intentCUE = b.body
		case b.lang == "cue" && strings.HasPrefix(b.body, "cluster: constraints:"):
			constraintsCUE = b.body
		}
	}
	if intentCUE == "" || constraintsCUE == "" {
		t.Fatalf("the tour's intent or its constraints block is missing")
	}
	writeIntent := func(t *testing.T, src string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, "tour"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "tour", "cluster.cue"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hnsplan := func(t *testing.T, args ...string) (string, int) {
		t.Helper()
		return runCode(t, root, filepath.Join(bin, "hnsplan"), args...)
	}

	// The tour's intent is valid as shown, and with its constraints.
	writeIntent(t, intentCUE)
	if out, code := hnsplan(t, "vet", "tour"); code != 0 {
		t.Errorf("the tour's intent does not vet (exit %d):\n%s", code, out)
	}
	writeIntent(t, intentCUE+"\n"+constraintsCUE)
	if out, code := hnsplan(t, "vet", "tour"); code != 0 {
		t.Errorf("the tour's intent with its constraints block does not vet (exit %d):\n%s", code, out)
	}

	// Every command of the tour's sh blocks that needs neither a cluster
	// nor a git remote runs, in order, and succeeds; a "# ..." line right
	// after a command is its whole output.
	outputs := map[string]string{}
	for _, b := range blocks {
		if b.lang != "sh" {
			continue
		}
		lines := joinContinued(b.body)
		for i, line := range lines {
			cmdline := strings.TrimSpace(stripComment(line))
			if !strings.HasPrefix(cmdline, "bin/") || strings.Contains(cmdline, "--kubeconfig") ||
				strings.Contains(cmdline, "origin/main") || strings.Contains(cmdline, "BASE HEAD") {
				continue
			}
			if strings.Contains(cmdline, "hnsplan-agent run") {
				continue
			}
			f := strings.Fields(cmdline)
			out, code := runCode(t, root, filepath.Join(root, f[0]), f[1:]...)
			if code != 0 {
				t.Errorf("%s: exit %d\n%s", cmdline, code, out)
			}
			outputs[cmdline] = out
			if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "# ") && !strings.HasPrefix(cmdline, "bin/hnsplan version") {
				if want := strings.TrimPrefix(lines[i+1], "# ") + "\n"; out != want {
					t.Errorf("%s prints\n%s\nthe README shows\n%s", cmdline, out, want)
				}
			}
		}
	}
	shown := func(prefix string) func(t *testing.T) string {
		return func(t *testing.T) string {
			for cmd, out := range outputs {
				if strings.HasPrefix(cmd, prefix) {
					return out
				}
			}
			t.Fatalf("the tour no longer runs %q", prefix)
			return ""
		}
	}
	// edited runs `bin/hnsplan vet tour` on the tour's intent with the
	// edits the README's prose asks for (each must be named there).
	edited := func(edits ...string) func(t *testing.T) string {
		return func(t *testing.T) string {
			src := intentCUE
			for i := 0; i < len(edits); i += 3 {
				if !strings.Contains(tour, edits[i+2]) {
					t.Errorf("the README no longer asks for %s", edits[i+2])
				}
				if !strings.Contains(src, edits[i]) {
					t.Fatalf("the tour's intent has no %q to edit", edits[i])
				}
				src = strings.Replace(src, edits[i], edits[i+1], 1)
			}
			writeIntent(t, src)
			out, _ := hnsplan(t, "vet", "tour")
			return "$ bin/hnsplan vet tour\n" + out
		}
	}
	checks := []textCheck{
		{"$ bin/hnsplan vet tour", nil}, // two blocks; told apart below
		{"Node win-1 ", shown("bin/hnsplan plan examples/calico-vxlan --node win-1")},
		{"frontend/shop-1 -> web/iis-2", shown("bin/hnsplan explain ")},
		{"node win-1, plan ", shown("bin/hnsplan-agent apply --once")},
		{"head/cluster.cue:", func(t *testing.T) string { return diffVNI(t, root, bin) }},
	}
	mistakes := edited(
		"strictAffinity: true", `strictAffinity: "yes"`, "`strictAffinity: \"yes\"`",
		`{cidr: "192.168.0.0/16"}`, `{cidr: "192.168.0.0/16", encapsulation: "vxlan"}`, "`encapsulation: \"vxlan\"`",
		`"win-1": {os: "windows", address:`, `"win-1": {os: "windows", adress:`, "`adress`")
	rules := edited(
		"\tipam: strictAffinity: true\n", "\tipam: strictAffinity: true\n\tvxlan: vni: 4095\n", "`vxlan: vni: 4095`",
		"maxPods: 60", "maxPods: 61", "`maxPods` to 61")
	for _, b := range blocks {
		if b.lang != "text" {
			continue
		}
		first, _, _ := strings.Cut(b.body, "\n")
		i := slices.IndexFunc(checks, func(c textCheck) bool { return strings.HasPrefix(first, c.prefix) })
		var got string
		switch {
		case i < 0:
			t.Errorf("the tour shows an output no check covers; add one to this test:\n%s", b.body)
			continue
		case i == 0 && strings.Contains(b.body, "error[schema]"):
			got = mistakes(t)
		case i == 0:
			got = rules(t)
		default:
			got = checks[i].run(t)
		}
		if !matchExcerpt(b.body, got) {
			t.Errorf("the README shows\n%s\nbut the command prints\n%s", b.body, got)
		}
	}

	// The tour wrote only into bin/ and tour/, which git ignores, and
	// nothing into the clone's examples.
	ignore, err := os.ReadFile(filepath.Join(repo, ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "examples" {
			continue
		}
		if !slices.Contains(strings.Split(string(ignore), "\n"), "/"+e.Name()+"/") {
			t.Errorf("the tour writes %s, which .gitignore does not ignore", e.Name())
		}
	}
	if after := tree(t, filepath.Join(repo, "examples")); !slices.Equal(after, examplesBefore) {
		t.Errorf("the tour changed examples/: before %v, after %v", examplesBefore, after)
	}
}

// diffVNI is the diff the README describes: examples/calico-vxlan with
// its VNI raised to 4097 and its web policy moved to port 8080, with the
// inventory.
func diffVNI(t *testing.T, root, bin string) string {
	t.Helper()
	dir := t.TempDir()
	base, head := filepath.Join(dir, "base"), filepath.Join(dir, "head")
	mustRun(t, root, "cp", "-r", filepath.Join(root, "examples", "calico-vxlan")+"/.", base)
	mustRun(t, root, "cp", "-r", base+"/.", head)
	edit(t, filepath.Join(head, "cluster.cue"), "vni: 4096", "vni: 4097")
	edit(t, filepath.Join(head, "manifests", "web-networkpolicy.yaml"), "port: 80\n", "port: 8080\n")
	// From dir, so that the policies' sources read as head/..., as in the README.
	out, code := runCode(t, dir, filepath.Join(bin, "hnsplan"), "diff", "base", "head", "--inventory", filepath.Join(root, "examples", "inventory", "calico-vxlan.yaml"))
	if code != 0 {
		t.Fatalf("diff: exit %d\n%s", code, out)
	}
	return out
}

// testCueRecipe runs the recipe of "The schema in your CUE module" in an
// empty directory with the real cue CLI: the schema vendored by `hnsplan
// schema` and imported by the tour's intent makes `cue vet` accept the
// intent and reject a mistake, and hnsplan reads the intent as before.
func testCueRecipe(t *testing.T, repo, bin, tour string) {
	recipe := section(t, tour, "\n### The schema in your CUE module", "\n### ")
	cueBin, err := output(repo, "go", "tool", "-n", "cue")
	if err != nil {
		t.Fatalf("go tool -n cue: %v (cuelang.org/go/cmd/cue is a tool dependency in go.mod)", err)
	}
	path := t.TempDir()
	for name, target := range map[string]string{"cue": strings.TrimSpace(cueBin), "hnsplan": filepath.Join(bin, "hnsplan")} {
		if err := os.Symlink(target, filepath.Join(path, name)); err != nil {
			t.Fatal(err)
		}
	}
	work := t.TempDir()
	var sh, importCUE, intentCUE string
	for _, b := range fenced(recipe) {
		switch {
		case b.lang == "sh" && sh == "":
			sh = b.body
		case b.lang == "cue":
			importCUE = b.body
		}
	}
	for _, b := range fenced(tour) {
		if b.lang == "cue" && strings.HasPrefix(b.body, "package cluster\n\ncluster: {") {
			intentCUE = b.body
			break
		}
	}
	if sh == "" || importCUE == "" || intentCUE == "" {
		t.Fatal("the recipe's commands, its import or the tour's intent is missing")
	}
	env := append(os.Environ(), "PATH="+path+string(os.PathListSeparator)+os.Getenv("PATH"), "CUE_CACHE_DIR="+t.TempDir())
	shell := func(t *testing.T, script string) (string, int) {
		t.Helper()
		cmd := exec.Command("sh", "-ec", script)
		cmd.Dir, cmd.Env = work, env
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	if out, code := shell(t, sh); code != 0 {
		t.Fatalf("the recipe's commands fail (exit %d):\n%s\n%s", code, sh, out)
	}
	// The recipe's file: its head (package, import, #Intent) and the
	// tour's cluster.
	head, _, ok := strings.Cut(importCUE, "cluster: {")
	_, body, ok2 := strings.Cut(intentCUE, "cluster: {")
	if !ok || !ok2 || !strings.Contains(head, "import ") || !strings.Contains(head, "#Intent") {
		t.Fatalf("the recipe's CUE does not import #Intent:\n%s", importCUE)
	}
	src := head + "cluster: {" + body
	if err := os.MkdirAll(filepath.Join(work, "cluster"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(src string) {
		if err := os.WriteFile(filepath.Join(work, "cluster", "cluster.cue"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(src)
	for _, script := range []string{"cue vet ./cluster", "hnsplan vet cluster"} {
		if !strings.Contains(recipe, script) {
			t.Errorf("the recipe no longer says %q", script)
		}
		if out, code := shell(t, script); code != 0 {
			t.Errorf("%s: exit %d\n%s", script, code, out)
		}
	}
	// The schema is applied: a string for a bool fails cue vet.
	write(strings.Replace(src, "strictAffinity: true", `strictAffinity: "yes"`, 1))
	if out, code := shell(t, "cue vet ./cluster"); code == 0 || !strings.Contains(out, "strictAffinity") {
		t.Errorf("cue vet accepts strictAffinity \"yes\" (exit %d):\n%s", code, out)
	}
}

// A block is a fenced code block: its language and its text.
type block struct{ lang, body string }

var fenceRE = regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```$")

func fenced(s string) []block {
	var out []block
	for _, m := range fenceRE.FindAllStringSubmatch(s, -1) {
		out = append(out, block{m[1], m[2]})
	}
	return out
}

// section returns s from the heading start up to the next end.
func section(t *testing.T, s, start, end string) string {
	t.Helper()
	i := strings.Index(s, start)
	if i < 0 {
		t.Fatalf("README has no %q", strings.TrimSpace(start))
	}
	rest := s[i+len(start):]
	if j := strings.Index(rest, end); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// joinContinued joins shell lines continued with a backslash.
func joinContinued(s string) []string {
	var out []string
	cur := ""
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\")
			continue
		}
		out = append(out, cur+l)
		cur = ""
	}
	return out
}

// stripComment drops a trailing "  # comment" of a shell line.
func stripComment(l string) string {
	if i := strings.Index(l, " #"); i >= 0 {
		return l[:i]
	}
	if strings.HasPrefix(l, "#") {
		return ""
	}
	return l
}

// matchExcerpt reports whether got is the output the excerpt shows: its
// lines in order, from the first to the last, where a line that is only
// "…" stands for any number of lines and a "…" in a line for any text.
func matchExcerpt(excerpt, got string) bool {
	var re strings.Builder
	re.WriteString(`\A`)
	for _, l := range strings.Split(strings.TrimRight(excerpt, "\n"), "\n") {
		if strings.TrimSpace(l) == "…" {
			re.WriteString(`(?:[^\n]*\n)*`)
			continue
		}
		parts := strings.Split(l, "…")
		for i, p := range parts {
			if i > 0 {
				re.WriteString(`[^\n]*`)
			}
			re.WriteString(regexp.QuoteMeta(p))
		}
		re.WriteString(`\n`)
	}
	re.WriteString(`\z`)
	if !strings.HasSuffix(got, "\n") {
		got += "\n"
	}
	return regexp.MustCompile(re.String()).MatchString(got)
}

func edit(t *testing.T, file, old, new string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(old)) {
		t.Fatalf("%s has no %q", file, old)
	}
	if err := os.WriteFile(file, bytes.Replace(data, []byte(old), []byte(new), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tree lists the files below dir.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func output(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	return string(out), err
}

// runCode runs a command in dir and returns its combined output and exit
// code.
func runCode(t *testing.T, dir, name string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s: %v", name, err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

func mustRun(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	out, code := runCode(t, dir, name, args...)
	if code != 0 {
		t.Fatalf("%s %s: exit %d\n%s", name, strings.Join(args, " "), code, out)
	}
	return out
}
