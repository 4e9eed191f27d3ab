// Package golden is the tests' cases kept in txtar archives: the input
// files of a case written out to a directory, and its golden file compared
// with what the test got — or, with HNSPLAN_UPDATE set, rewritten in the
// archive (then review the diff).
package golden

import (
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/txtar"
)

// Update reports whether the goldens are being rewritten: HNSPLAN_UPDATE
// is set.
func Update() bool { return os.Getenv("HNSPLAN_UPDATE") != "" }

// A Case is one archive: its files written into Dir, and its golden.
type Case struct {
	Dir    string
	file   string
	ar     *txtar.Archive
	golden *txtar.File
}

// Extract reads the archive file and writes its files into a new
// temporary directory (the golden too, which the test does not read
// there). The archive must hold a golden file named golden.
func Extract(t testing.TB, file, golden string) *Case {
	t.Helper()
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	c := &Case{Dir: t.TempDir(), file: file, ar: ar}
	if err := txtar.Write(ar, c.Dir); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ar.Files, func(f txtar.File) bool { return f.Name == golden })
	if i < 0 {
		t.Fatalf("%s has no golden file %s", file, golden)
	}
	c.golden = &ar.Files[i]
	return c
}

// Check compares got with the golden; with HNSPLAN_UPDATE set, it writes
// got into the archive instead. what names the golden in a failure.
func (c *Case) Check(t testing.TB, what, got string) {
	t.Helper()
	if Update() {
		c.golden.Data = []byte(got)
		if err := os.WriteFile(c.file, txtar.Format(c.ar), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if d := cmp.Diff(string(c.golden.Data), got); d != "" {
		t.Errorf("%s: %s (-want +got):\n%s", c.file, what, d)
	}
}
