package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/compiler/calicoexport"
)

// copyTree copies the regular files below src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// hnsplanRun runs the CLI in-process and returns its exit code and output.
func hnsplanRun(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// readDir returns the files of dir by name.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = data
	}
	return files
}

// findingRules lists the rule and severity of each finding line of vet's
// text output (positions aside: a value a resource now gives is reported
// at the resource).
func findingRules(out string) []string {
	var rules []string
	for _, line := range strings.Split(out, "\n") {
		if i := strings.Index(line, "]: "); i > 0 {
			if j := strings.LastIndex(line[:i], ": "); j >= 0 {
				rules = append(rules, line[j+2:i+1])
			}
		}
	}
	slices.Sort(rules)
	return rules
}

// TestExportCalicoRoundTrip exports the Calico resources of each bundled
// example, adds them to the intent directory, and checks that the intent
// stays valid with the same findings, compiles to byte-identical plans,
// and exports the same bytes again.
func TestExportCalicoRoundTrip(t *testing.T) {
	for _, ex := range []string{"calico-vxlan", "calico-bgp", "flannel-host-gw"} {
		t.Run(ex, func(t *testing.T) {
			tmp := t.TempDir()
			dir := filepath.Join(tmp, "intent")
			copyTree(t, filepath.Join("../../examples", ex), dir)

			code, vetBefore, stderr := hnsplanRun("vet", "--severity", "info", dir)
			if code != 0 {
				t.Fatalf("vet before export: exit %d\n%s%s", code, vetBefore, stderr)
			}
			if code, out, stderr := hnsplanRun("compile", dir, "-o", filepath.Join(tmp, "plans1")); code != 0 {
				t.Fatalf("compile before export: exit %d\n%s%s", code, out, stderr)
			}
			code, exported, stderr := hnsplanRun("export", "calico", dir)
			if code != 0 || !strings.Contains(exported, "kind: IPPool") {
				t.Fatalf("export: exit %d\n%s%s", code, exported, stderr)
			}
			if code, out, stderr := hnsplanRun("export", "calico", dir, "-o", dir); code != 0 {
				t.Fatalf("export -o: exit %d\n%s%s", code, out, stderr)
			}
			written, err := os.ReadFile(filepath.Join(dir, calicoexport.FileName))
			if err != nil || string(written) != exported {
				t.Fatalf("export -o wrote something else than stdout (%v)", err)
			}

			code, vetAfter, stderr := hnsplanRun("vet", "--severity", "info", dir)
			if code != 0 {
				t.Fatalf("vet after export: exit %d\n%s%s", code, vetAfter, stderr)
			}
			if b, a := findingRules(vetBefore), findingRules(vetAfter); !slices.Equal(b, a) {
				t.Errorf("findings changed with the exported resources:\nbefore %v\nafter  %v\n%s", b, a, vetAfter)
			}
			if code, out, stderr := hnsplanRun("compile", dir, "-o", filepath.Join(tmp, "plans2")); code != 0 {
				t.Fatalf("compile after export: exit %d\n%s%s", code, out, stderr)
			}
			p1, p2 := readDir(t, filepath.Join(tmp, "plans1")), readDir(t, filepath.Join(tmp, "plans2"))
			if len(p1) == 0 || len(p1) != len(p2) {
				t.Fatalf("plans: %d files before, %d after", len(p1), len(p2))
			}
			for name, data := range p1 {
				if !bytes.Equal(data, p2[name]) {
					t.Errorf("plan %s differs after adding the exported resources", name)
				}
			}
			// The resources now in the intent export as they were read.
			if _, again, _ := hnsplanRun("export", "calico", dir); again != exported {
				t.Errorf("a second export differs:\n%s\nwant\n%s", again, exported)
			}
		})
	}
}
