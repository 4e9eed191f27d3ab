package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/txtar"
)

// TestAccessDelta runs testdata/access/*.txtar: each changes the
// calico-vxlan example (files under head/ replace the example's in HEAD,
// files under base/ in BASE) and holds the golden text and markdown diff
// with the example's inventory (want.txt, want.md; HNSPLAN_UPDATE=1
// rewrites them). Each case's access delta (diff -o json) is then checked
// against `hnsplan matrix` run on both sides, on TCP and UDP at every port
// matrix probes on either side and every container port of the
// inventory: the delta must list every cell whose verdict differs, and
// only those.
func TestAccessDelta(t *testing.T) {
	files, _ := filepath.Glob("testdata/access/*.txtar")
	if len(files) < 6 {
		t.Fatalf("%d cases, want the six of the issue", len(files))
	}
	example, _ := filepath.Abs("../../examples/calico-vxlan")
	inventory, _ := filepath.Abs("../../examples/inventory/calico-vxlan.yaml")
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		file, _ := filepath.Abs(file)
		t.Run(name, func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			for _, side := range []string{"base", "head"} {
				copyDir(t, example, filepath.Join(dir, side))
			}
			goldens := map[string]*txtar.File{}
			for i, f := range ar.Files {
				if strings.HasPrefix(f.Name, "want.") {
					goldens[f.Name] = &ar.Files[i]
					continue
				}
				if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			t.Chdir(dir)
			cli := func(args ...string) string {
				t.Helper()
				var out, errOut bytes.Buffer
				if code := run(append(args, "--color", "never"), &out, &errOut); code != 0 && code != exitChanges {
					t.Fatalf("hnsplan %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
				}
				return out.String()
			}
			diffArgs := []string{"diff", "base", "head", "--inventory", inventory}
			update := os.Getenv("HNSPLAN_UPDATE") != ""
			for golden, format := range map[string]string{"want.txt": "text", "want.md": "markdown"} {
				got := cli(append(diffArgs, "-o", format)...)
				if update {
					goldens[golden].Data = []byte(got)
				} else if d := cmp.Diff(string(goldens[golden].Data), got); d != "" {
					t.Errorf("%s (-want +got):\n%s", golden, d)
				}
			}
			if update {
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
			}

			var js struct {
				FormatVersion int `json:"formatVersion"`
				Access        []struct {
					From, To, Protocol, Before, After string
					Port                              uint16
					DecidedBy                         struct {
						Before, After struct{ Direction, Source, ACL, Rule, Because string }
					}
				} `json:"access"`
			}
			if err := json.Unmarshal([]byte(cli(append(diffArgs, "-o", "json")...)), &js); err != nil {
				t.Fatal(err)
			}
			if js.FormatVersion != 1 || len(js.Access) == 0 {
				t.Fatalf("formatVersion %d, %d access changes: every case changes access", js.FormatVersion, len(js.Access))
			}
			delta := map[string]string{}
			for _, a := range js.Access {
				delta[fmt.Sprintf("%s -> %s %s/%d", a.From, a.To, a.Protocol, a.Port)] = a.Before + " -> " + a.After
				for _, d := range []struct{ Direction, Source, ACL, Rule, Because string }{a.DecidedBy.Before, a.DecidedBy.After} {
					if d.Direction != "egress" && d.Direction != "ingress" || d.Because == "" {
						t.Errorf("%s -> %s: decidedBy %+v names no end or reason", a.From, a.To, d)
					}
				}
			}

			// The matrices, on every port either side's matrix probes and
			// every container port of the inventory (80, 8080, 53, 6379).
			ports := map[uint16]bool{80: true, 8080: true, 53: true, 6379: true}
			for _, side := range []string{"base", "head"} {
				for _, c := range matrixCells(t, cli, inventory, side, "TCP", 0) {
					ports[c.Port] = true
				}
			}
			want := map[string]string{}
			for _, proto := range []string{"TCP", "UDP"} {
				for _, port := range slices.Sorted(maps.Keys(ports)) {
					before := matrixCells(t, cli, inventory, "base", proto, port)
					after := map[string]bool{}
					for _, c := range matrixCells(t, cli, inventory, "head", proto, port) {
						after[c.key()] = c.Allowed
					}
					for _, c := range before {
						a, ok := after[c.key()]
						if ok && a != c.Allowed {
							want[c.key()] = verdictWord(c.Allowed) + " -> " + verdictWord(a)
						}
					}
				}
			}
			if d := cmp.Diff(want, delta); d != "" {
				t.Errorf("access delta against the matrices of both sides (-matrix +delta):\n%s", d)
			}
		})
	}
}

type matrixCell struct {
	From, To, Protocol string
	Port               uint16
	Allowed            bool
}

func (c matrixCell) key() string {
	return fmt.Sprintf("%s -> %s %s/%d", c.From, c.To, c.Protocol, c.Port)
}

func matrixCells(t *testing.T, cli func(...string) string, inventory, dir, proto string, port uint16) []matrixCell {
	t.Helper()
	args := []string{"matrix", dir, "--inventory", inventory, "--protocol", proto, "-o", "json"}
	if port != 0 {
		args = append(args, "--port", strconv.Itoa(int(port)))
	}
	var m struct{ Cells []matrixCell }
	if err := json.Unmarshal([]byte(cli(args...)), &m); err != nil {
		t.Fatal(err)
	}
	return m.Cells
}

func verdictWord(allowed bool) string {
	if allowed {
		return "allowed"
	}
	return "denied"
}

// copyDir copies the regular files of src into dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
