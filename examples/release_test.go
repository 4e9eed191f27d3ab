//go:build release

package examples_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestRelease runs `make release` for this machine's platform, twice,
// into two directories, with the commit given: each binary prints the
// changelog's newest version and the commit, RELEASE_NOTES.md is that
// version's section, SHA256SUMS lists every file and matches it, the SBOM lists
// the module and its dependencies, no path of the build machine is in a
// binary, and the two runs wrote the same bytes (the output's directory
// does not reach the binaries). The full matrix (make release, four
// platforms) is not run here: it compiles every dependency once per
// platform, minutes. It rebuilds every dependency with release flags, so it
// runs in make test-release (build tag release), not in make test.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries with make")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	for _, p := range []string{"linux/amd64", "linux/arm64", "darwin/arm64", "windows/amd64"} {
		if !slices.Contains(strings.Fields(makeVar(t, "CLI_PLATFORMS")), p) {
			t.Errorf("make release builds no hnsplan for %s", p)
		}
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	log := repoChangelog(t)
	version, notes := log.Newest().Version.Tag(), log.Notes(log.Newest())
	const commit = "0123456789abcdef0123456789abcdef01234567"
	platform := runtime.GOOS + "/" + runtime.GOARCH
	ext := map[bool]string{true: ".exe"}[runtime.GOOS == "windows"]
	suffix := "-" + runtime.GOOS + "-" + runtime.GOARCH
	var sums []string
	// The first as a release is served (BASE/VERSION/ASSET), for the CI
	// examples' install below.
	base := t.TempDir()
	for _, dir := range []string{filepath.Join(base, version), filepath.Join(t.TempDir(), "b", "c")} {
		mustRun(t, repo, "make", "--no-print-directory", "release", "RELEASE_DIR="+dir,
			"CLI_PLATFORMS="+platform, "AGENT_PLATFORMS="+platform, "COMMIT="+commit)
		want := []string{"SHA256SUMS", "RELEASE_NOTES.md"}
		if got, err := os.ReadFile(filepath.Join(dir, "RELEASE_NOTES.md")); err != nil || string(got) != notes {
			t.Errorf("RELEASE_NOTES.md: %v\n%s\nwant the changelog's section:\n%s", err, got, notes)
		}
		for _, name := range []string{"hnsplan", "hnsplan-agent"} {
			bin := filepath.Join(dir, name+suffix+ext)
			want = append(want, name+suffix+ext, name+suffix+".sbom.txt")
			if got, prefix := mustRun(t, repo, bin, "version"), name+" "+version+" (commit "+commit+", "; !strings.HasPrefix(got, prefix) {
				t.Errorf("%s version = %q, want it to start with %q", bin, got, prefix)
			}
			data, err := os.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{repo, dir} {
				if strings.Contains(string(data), p) {
					t.Errorf("%s holds the build machine's path %s: build with -trimpath", bin, p)
				}
			}
			sbom, err := os.ReadFile(filepath.Join(dir, name+suffix+".sbom.txt"))
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range []string{"\tpath\tgithub.com/hnsplan/hnsplan/cmd/" + name + "\n", "\tmod\tgithub.com/hnsplan/hnsplan\t", "\tdep\tk8s.io/client-go\tv", "\tbuild\t-trimpath=true\n", "\tbuild\tCGO_ENABLED=0\n"} {
				if !strings.Contains(string(sbom), line) {
					t.Errorf("%s.sbom.txt has no line with %q:\n%s", name+suffix, line, sbom)
				}
			}
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range entries {
			got = append(got, e.Name())
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("make release wrote %q, want %q", got, want)
		}
		// SHA256SUMS: sha256sum's format, every file but itself, each right.
		data, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		var listed []string
		for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			sum, name, ok := strings.Cut(line, "  ")
			if !ok {
				t.Fatalf("SHA256SUMS line %q is not sha256sum's", line)
			}
			content, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatalf("SHA256SUMS lists %s: %v", name, err)
			}
			if h := sha256.Sum256(content); hex.EncodeToString(h[:]) != sum {
				t.Errorf("SHA256SUMS: %s is %x, listed as %s", name, h, sum)
			}
			listed = append(listed, name)
		}
		slices.Sort(listed)
		if !slices.Equal(listed, slices.DeleteFunc(slices.Clone(want), func(s string) bool { return s == "SHA256SUMS" })) {
			t.Errorf("SHA256SUMS lists %q", listed)
		}
		sums = append(sums, string(data))
	}
	// The CI examples install this release as they would from GitHub: the
	// binary checked against SHA256SUMS, and its version.
	if runtime.GOOS == "linux" && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64") {
		dir := t.TempDir()
		cmd := exec.Command("sh", "ci/hnsplan-pr.sh", "install", version, dir)
		cmd.Env = append(os.Environ(), "HNSPLAN_RELEASE_URL=file://"+base)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("hnsplan-pr.sh install %s from the release: %v\n%s", version, err, out)
		} else if got := mustRun(t, dir, filepath.Join(dir, "hnsplan"), "version"); !strings.HasPrefix(got, "hnsplan "+version+" (commit "+commit) {
			t.Errorf("the installed hnsplan says %q", got)
		}
	}
	if sums[0] != sums[1] {
		t.Errorf("two release builds of one commit differ:\n%s\n%s", sums[0], sums[1])
	}
}
