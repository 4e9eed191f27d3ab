package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/internal/cli"
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
	"hnsplan rollout":         "a cluster",
	"--live":                  "a cluster",
	"hnsplan publish cluster": "a cluster and a signing key",
	"origin/main":             "a git repository with a remote",
	"/etc/":                   "root on a Linux host",
	"~/":                      "a home directory",
}

// TestExamplesRun runs the examples that need no cluster, from a copy of
// the repository's examples/, as a user in a clone would: each must exit 0.
func TestExamplesRun(t *testing.T) {
	dir := t.TempDir()
	clitest.CopyExamples(t, "../..", dir)
	t.Chdir(dir)
	t.Setenv("NO_COLOR", "1")
	lines := clitest.Runnable(newRoot(io.Discard, io.Discard), exampleNeeds)
	if len(lines) < 15 {
		t.Fatalf("only %d example lines to run: %q", len(lines), lines)
	}
	for _, l := range lines {
		var stdout, stderr bytes.Buffer
		if code := run(l.Args, &stdout, &stderr); code != exitOK {
			t.Errorf("%s: exit %d\n%s%s", l.Text, code, stdout.String(), stderr.String())
			continue
		}
		if l.Stdout != "" {
			if err := os.MkdirAll(filepath.Dir(l.Stdout), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(l.Stdout, stdout.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		} else if stdout.Len() == 0 {
			t.Errorf("%s: printed nothing", l.Text)
		}
	}
}

// TestIntentFlagsOnlyWhereMeaningful: the flags that bound reading an
// intent, and --color, are on the commands that read one, and on no other
// (not rollout, not version), where they are an unknown flag.
func TestIntentFlagsOnlyWhereMeaningful(t *testing.T) {
	flags := []string{"color", "max-file-size", "cue-timeout", "cue-memory"}
	seen := map[string]bool{}
	cli.Walk(newRoot(io.Discard, io.Discard), func(c *cobra.Command) {
		_, reads := intentCommands[c.CommandPath()]
		seen[c.CommandPath()] = true
		for _, f := range flags {
			if has := c.Flags().Lookup(f) != nil; has != reads {
				t.Errorf("%s: has --%s: %v, want %v", c.CommandPath(), f, has, reads)
			}
		}
	})
	for path := range intentCommands {
		if !seen[path] {
			t.Errorf("intentCommands names %q, which is not a command", path)
		}
	}
	for _, args := range [][]string{{"rollout", "status", "--cue-timeout", "1s"}, {"version", "--color", "never"}} {
		var stderr bytes.Buffer
		if code := run(args, io.Discard, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "unknown flag: --"+strings.TrimPrefix(args[len(args)-2], "--")) {
			t.Errorf("hnsplan %q: exit %d, %s", args, code, stderr.String())
		}
	}
	// And where they are, they work.
	var stderr bytes.Buffer
	if code := run([]string{"vet", "../../examples/calico-vxlan", "--max-file-size", "100B"}, io.Discard, &stderr); code != exitInvalid {
		t.Errorf("vet --max-file-size 100B: exit %d, %s", code, stderr.String())
	}
}

// completions runs cobra's completion request as a shell does and returns
// the values offered and the directive.
func completions(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(append([]string{cobra.ShellCompRequestCmd}, args...), &stdout, &stderr); code != exitOK {
		t.Fatalf("__complete %q: exit %d\n%s", args, code, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	var values []string
	for _, l := range lines[:len(lines)-1] {
		v, _, _ := strings.Cut(l, "\t")
		values = append(values, v)
	}
	return values, lines[len(lines)-1]
}

func TestCompletion(t *testing.T) {
	const (
		intent    = "../../examples/calico-vxlan"
		inventory = "../../examples/inventory/calico-vxlan.yaml"
		noFiles   = ":4"
		dirs      = ":16"
		files     = ":8"
	)
	cases := []struct {
		args      []string
		want      []string
		directive string
	}{
		// The intent's Windows nodes; cp-1, its Linux node, is not one.
		{[]string{"plan", intent, "--node", ""}, []string{"win-1", "win-2", "win-3"}, noFiles},
		{[]string{"plan", intent, "--node", "win-2"}, []string{"win-2"}, noFiles},
		{[]string{"publish", intent, "--nodes", ""}, []string{"win-1", "win-2", "win-3"}, noFiles},
		{[]string{"plan", "--node", ""}, nil, noFiles}, // no intent named yet
		{[]string{"plan", "nosuch", "--node", ""}, nil, noFiles},
		// Pods of the inventory, as NS/POD.
		{[]string{"explain", intent, "--inventory", inventory, "--from", "front"}, []string{"frontend/admin-1", "frontend/shop-1"}, noFiles},
		{[]string{"explain", intent, "--inventory", inventory, "--from", "frontend/shop-1", "--to", "web/i"}, []string{"web/iis-1", "web/iis-2"}, noFiles},
		{[]string{"explain", intent, "--to", ""}, nil, noFiles}, // no inventory
		// Each command's own output formats.
		{[]string{"vet", "-o", ""}, []string{"text", "json", "sarif", "github"}, noFiles},
		{[]string{"plan", "-o", ""}, []string{"text", "json", "yaml"}, noFiles},
		{[]string{"diff", "-o", "m"}, []string{"markdown"}, noFiles},
		{[]string{"rules", "--output", ""}, []string{"text", "json", "markdown"}, noFiles},
		{[]string{"matrix", "-o", ""}, []string{"text", "json"}, noFiles},
		{[]string{"rollout", "status", "-o", ""}, []string{"text", "json"}, noFiles},
		{[]string{"compile", intent, "-o", ""}, nil, dirs}, // compile's -o is a directory
		{[]string{"export", "calico", intent, "-o", ""}, nil, dirs},
		// Fixed values.
		{[]string{"vet", intent, "--severity", ""}, []string{"error", "warning", "info"}, noFiles},
		{[]string{"matrix", intent, "--protocol", "u"}, []string{"UDP"}, noFiles},
		{[]string{"explain", intent, "--protocol", ""}, []string{"TCP", "UDP", "SCTP", "ICMP"}, noFiles},
		{[]string{"vet", intent, "--color", ""}, []string{"auto", "always", "never"}, noFiles},
		{[]string{"export", "calico", intent, "--as", ""}, []string{"apply", "patch"}, noFiles},
		{[]string{"rollout", "status", "-n", ""}, []string{publishNamespace}, noFiles},
		{[]string{"rollout", "resume", "--namespace", ""}, []string{publishNamespace}, noFiles},
		// Directories for intents; files for inventories.
		{[]string{"vet", ""}, nil, dirs},
		{[]string{"diff", intent, ""}, nil, dirs},
		{[]string{"diff", intent, intent, ""}, nil, noFiles},
		{[]string{"vet", intent, ""}, nil, noFiles},
		{[]string{"vet", intent, "--inventory", ""}, []string{"yaml", "yml", "json"}, files},
		// Commands, and no intent flags where they mean nothing.
		{[]string{"rollout", "st"}, []string{"status"}, noFiles},
		{[]string{"rollout", "status", "--c"}, []string{"--context"}, noFiles},
	}
	for _, c := range cases {
		got, directive := completions(t, c.args...)
		if !slices.Equal(got, c.want) || directive != c.directive {
			t.Errorf("complete %q = %q %s, want %q %s", c.args, got, directive, c.want, c.directive)
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
		{[]string{"vet", "--inventroy", "x.yaml", "dir"}, "hnsplan: unknown flag: --inventroy (did you mean --inventory?)\n"},
		{[]string{"explain", "dir", "--protcol", "UDP"}, "unknown flag: --protcol (did you mean --protocol?)"},
		{[]string{"rollout", "status", "--namepsace", "x"}, "unknown flag: --namepsace (did you mean --namespace?)"},
		{[]string{"vet", "-inventory", "x.yaml", "dir"}, "unknown shorthand flag: 'i' in -inventory (did you mean --inventory?)"},
		{[]string{"vet", "--frobnicate"}, "unknown flag: --frobnicate (see 'hnsplan vet --help' for its flags)"},
		{[]string{"vte", "dir"}, `unknown command "vte" for "hnsplan" (did you mean vet?)` + "\n"},
		{[]string{"comple", "dir"}, `(did you mean compile?)`},
		{[]string{"rollout", "stauts"}, `unknown command "stauts" for "hnsplan rollout" (did you mean status?)`},
		{[]string{"export", "calcio", "dir"}, `(did you mean calico?)`},
		{[]string{"frobnicate"}, `unknown command "frobnicate" for "hnsplan" (its commands: `},
	}
	for _, c := range cases {
		var stderr bytes.Buffer
		code := run(c.args, io.Discard, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("hnsplan %q: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr.String(), exitUsage, c.want)
		}
	}
}

// readmeExitCodes reads the exit-code table of README.md: code -> the
// example command of its row.
func readmeExitCodes(t *testing.T) map[int]string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| ([0-9]) \\| [^|]+ \\| `hnsplan ([^`]*)` \\|$")
	codes := map[int]string{}
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		code, _ := strconv.Atoi(m[1])
		codes[code] = m[2]
	}
	for code := 0; code <= exitTimeout; code++ {
		if codes[code] == "" {
			t.Fatalf("README.md's exit-code table has no row for %d with an example (| %d | meaning | `hnsplan ...` |)", code, code)
		}
	}
	if len(codes) != exitTimeout+1 {
		t.Fatalf("README.md's exit-code table has codes %v; the binary has 0 to %d", codes, exitTimeout)
	}
	return codes
}

// TestREADMEExitCodes runs each example of README.md's exit-code table,
// from the repository's root, and checks its code; the rollout rows need
// a cluster and run in TestREADMEExitCodesRollout (integration).
func TestREADMEExitCodes(t *testing.T) {
	codes := readmeExitCodes(t)
	t.Chdir("../..")
	t.Setenv("NO_COLOR", "1")
	ran := 0
	for code, example := range codes {
		if strings.HasPrefix(example, "rollout ") {
			continue
		}
		var stdout, stderr bytes.Buffer
		if got := run(strings.Fields(example), &stdout, &stderr); got != code {
			t.Errorf("hnsplan %s: exit %d, README.md says %d\n%s%s", example, got, code, stdout.String(), stderr.String())
		}
		ran++
	}
	if ran < 4 {
		t.Errorf("ran %d of the table's examples, want 0 to 3", ran)
	}
}
