package intent

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnreadableFiles loads intents with a file that cannot be read: each
// is one error finding at that file that says what failed and what to do,
// never `error[load]: ` with nothing after it (what an unreadable
// cluster.cue gave, from CUE's loader).
func TestUnreadableFiles(t *testing.T) {
	cases := []struct {
		name  string
		spoil func(t *testing.T, dir string)
		file  string
		want  []string // in the message
	}{
		{"broken symlink", func(t *testing.T, dir string) {
			must(t, os.Symlink(filepath.Join(dir, "gone.cue"), filepath.Join(dir, "nodes.cue")))
		}, "nodes.cue", []string{"symlink to", "does not exist", "remove it"}},
		{"directory named cluster.cue", func(t *testing.T, dir string) {
			must(t, os.Rename(filepath.Join(dir, "c.cue"), filepath.Join(dir, "keep")))
			must(t, os.Mkdir(filepath.Join(dir, "cluster.cue"), 0o755))
			must(t, os.Rename(filepath.Join(dir, "keep"), filepath.Join(dir, "c.cue")))
		}, "cluster.cue", []string{"is a directory", "make it a file"}},
		{"the only .cue a directory", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, "c.cue")))
			must(t, os.Mkdir(filepath.Join(dir, "cluster.cue"), 0o755))
		}, "cluster.cue", []string{"is a directory", "make it a file"}},
		{"manifest a directory", func(t *testing.T, dir string) {
			must(t, os.Mkdir(filepath.Join(dir, "policy.yaml"), 0o755))
		}, "", nil}, // a directory of manifests may be named so: walked, not read
		{"manifest broken symlink", func(t *testing.T, dir string) {
			must(t, os.Symlink(filepath.Join(dir, "gone.yaml"), filepath.Join(dir, "policy.yaml")))
		}, "policy.yaml", []string{"symlink to", "does not exist"}},
		{"no read permission", func(t *testing.T, dir string) {
			if os.Geteuid() == 0 {
				t.Skip("root reads any file (TestUnreadableMessages covers the message)")
			}
			must(t, os.Chmod(filepath.Join(dir, "c.cue"), 0))
		}, "c.cue", []string{"permission denied", "chmod a+r"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeDir(t, map[string]string{"c.cue": minimal})
			c.spoil(t, dir)
			_, findings, err := Load(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range findings.RelativeTo(dir) {
				if strings.TrimSpace(f.Message) == "" {
					t.Errorf("a finding without a message: %s", f)
				}
				if f.Severity.String() == "error" {
					got = append(got, f.String())
				}
			}
			if c.file == "" {
				if len(got) != 0 {
					t.Errorf("errors %q, want none", got)
				}
				return
			}
			if len(got) != 1 || !strings.HasPrefix(got[0], c.file+":") {
				t.Fatalf("errors %q, want one at %s", got, c.file)
			}
			for _, w := range c.want {
				if !strings.Contains(got[0], w) {
					t.Errorf("%q does not say %q", got[0], w)
				}
			}
		})
	}
}

// TestUnreadableMessages checks the messages for causes a test cannot
// always make (root reads every file).
func TestUnreadableMessages(t *testing.T) {
	denied := &fs.PathError{Op: "open", Path: "c.cue", Err: fs.ErrPermission}
	if m := unreadable(denied); !strings.Contains(m, "permission denied") || !strings.Contains(m, "chmod a+r") {
		t.Errorf("unreadable: %q", m)
	}
	if m := unlistable(denied); !strings.Contains(m, "permission denied") || !strings.Contains(m, "chmod a+rx") {
		t.Errorf("unlistable: %q", m)
	}
	if m := unresolvable("/nowhere/x.cue", denied); !strings.Contains(m, "permission denied") {
		t.Errorf("unresolvable: %q", m)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
