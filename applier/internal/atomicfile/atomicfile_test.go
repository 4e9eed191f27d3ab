package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	for _, content := range []string{"first\n", "second, longer\n", ""} {
		if err := Write(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	// A directory that does not exist: an error, nothing written.
	if err := Write(filepath.Join(dir, "missing", "x"), []byte("x")); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}

// TestRemoveStale: the temporary files a killed Write of path left go;
// another file's, and names that only look alike, stay.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	files := map[string]bool{ // name -> removed
		".state.json.tmp123":       true,
		".state.json.tmp4":         true,
		"state.json":               false,
		".state.json.tmp":          false, // no number: not CreateTemp's
		".state.json.tmp12x":       false,
		".state.jsonx.tmp1":        false,
		".other.json.tmp55":        false,
		"state.json.tmp77":         false,
		".state.json.tmp88/inside": false, // a directory of that name stays
	}
	for name := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(`{"half`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := RemoveStale(path); err != nil {
		t.Fatal(err)
	}
	for name, removed := range files {
		_, err := os.Stat(filepath.Join(dir, name))
		if gone := os.IsNotExist(err); gone != removed {
			t.Errorf("%s: removed %v, want %v (%v)", name, gone, removed, err)
		}
	}
	// Nothing to remove, or no such directory: the second is an error.
	if err := RemoveStale(path); err != nil {
		t.Errorf("again: %v", err)
	}
	if err := RemoveStale(filepath.Join(dir, "missing", "x")); err == nil {
		t.Error("a missing directory: no error")
	}
}
