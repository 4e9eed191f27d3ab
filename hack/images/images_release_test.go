//go:build release

package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/hnsplan/hnsplan/internal/imagebuild"
)

// TestImagesRelease is `make images` from real release binaries, twice:
// the two builds must be the same files, byte for byte; the linux/amd64
// CLI, taken out of its layer, must run; every Windows manifest's agent
// must be an amd64 program, the very bytes of the release's exe and of
// SHA256SUMS. It needs make, git and the Go toolchain (make test-release).
func TestImagesRelease(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// The version, commit and time, read once: both builds are of the
	// same commit even if the checkout moves while they run.
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		if err != nil {
			t.Fatalf("git %s: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	commit := git("rev-parse", "HEAD")
	stamp := []string{"VERSION=" + git("describe", "--tags", "--always", "--dirty"), "COMMIT=" + commit,
		"SOURCE_DATE_EPOCH=" + git("log", "-1", "--format=%ct")}
	dirs := []string{t.TempDir(), t.TempDir()}
	for _, d := range dirs {
		cmd := exec.Command("make", append([]string{"--no-print-directory", "-C", root, "images", "IMAGES_DIR=" + d}, stamp...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make images IMAGES_DIR=%s: %v\n%s", d, err, out)
		}
		t.Logf("make images:\n%s", out)
	}

	a, b := tree(t, dirs[0]), tree(t, dirs[1])
	if len(a) == 0 {
		t.Fatal("make images wrote nothing")
	}
	for name, sum := range a {
		if b[name] != sum {
			t.Errorf("%s differs between two builds", name)
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			t.Errorf("%s only in the second build", name)
		}
	}

	release := filepath.Join(dirs[0], "release")
	sums := readSums(t, filepath.Join(release, "SHA256SUMS"))

	// The CLI: linux/amd64 and linux/arm64, the release's binaries; the
	// amd64 one runs.
	cli := platformImages(t, filepath.Join(dirs[0], "hnsplan"))
	if len(cli) != 2 || cli["linux/amd64"] == nil || cli["linux/arm64"] == nil {
		t.Fatalf("CLI platforms %v, want linux/amd64 and linux/arm64", keys(cli))
	}
	for p, img := range cli {
		bin := fileOf(t, img, imagebuild.CLIPath)
		name := "hnsplan-" + strings.ReplaceAll(p, "/", "-")
		if sum(bin) != sums[name] {
			t.Errorf("%s's /%s is not the release's %s", p, imagebuild.CLIPath, name)
		}
	}
	exe := filepath.Join(t.TempDir(), "hnsplan")
	if err := os.WriteFile(exe, fileOf(t, cli["linux/amd64"], imagebuild.CLIPath), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("hnsplan version, taken out of the image: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "commit "+commit) {
		t.Errorf("hnsplan version says %q, not the commit %s", out, commit)
	}
	t.Logf("hnsplan version (from the image): %s", out)

	// The agent: every Windows build's manifest holds the release's exe.
	agent := platformImages(t, filepath.Join(dirs[0], "hnsplan-agent"))
	if len(agent) != len(imagebuild.WindowsBuilds) {
		t.Errorf("agent manifests %v, want one per %v", keys(agent), imagebuild.WindowsBuilds)
	}
	for p, img := range agent {
		got := fileOf(t, img, "Files/"+imagebuild.AgentExe)
		if err := imagebuild.IsAMD64PE(got); err != nil {
			t.Errorf("%s: %v", p, err)
		}
		if sum(got) != sums["hnsplan-agent-windows-amd64.exe"] || sums["hnsplan-agent-windows-amd64.exe"] == "" {
			t.Errorf("%s: the exe is not the release's hnsplan-agent-windows-amd64.exe", p)
		}
	}
}

// tree is every file under dir with its SHA-256.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = sum(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 {
			out[strings.TrimPrefix(f[1], "*")] = f[0]
		}
	}
	return out
}

// platformImages reads a layout written by WriteLayout: index.json names
// one image index, whose manifests are the platforms' images.
func platformImages(t *testing.T, dir string) map[string]v1.Image {
	t.Helper()
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil || len(tm.Manifests) != 1 {
		t.Fatalf("%s/index.json: %v, %v: want one image index", dir, tm, err)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]v1.Image{}
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		p := d.Platform.OS + "/" + d.Platform.Architecture
		if d.Platform.OSVersion != "" {
			p += ":" + d.Platform.OSVersion
		}
		out[p] = img
	}
	return out
}

func keys(m map[string]v1.Image) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// fileOf is the content of name in img's layers (the topmost copy).
func fileOf(t *testing.T, img v1.Image, name string) []byte {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var found []byte
	for _, l := range ls {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Name == name {
				var buf bytes.Buffer
				if _, err := io.Copy(&buf, tr); err != nil {
					t.Fatal(err)
				}
				found = buf.Bytes()
			}
		}
		rc.Close()
	}
	if found == nil {
		t.Fatalf("no %s in the image", name)
	}
	return found
}
