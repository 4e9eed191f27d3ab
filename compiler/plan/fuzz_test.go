package plan

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the agent's plan reader: Decode must
// not panic, and a plan it accepts (or any JSON object taken as a plan)
// must survive the round trip (Encode, then Decode again, to the same
// bytes) and render as text.
func FuzzDecode(f *testing.F) {
	seeds, _ := filepath.Glob("../intent/testdata/plans/*.json")
	for _, s := range seeds {
		if data, err := os.ReadFile(s); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"kind":"NodePlan","formatVersion":"1","node":"n","digest":"sha256:00"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(data, "")
		if err != nil {
			// A mutation almost always breaks the digest: take what the
			// JSON says as a plan anyway, so that the fields' decoding and
			// the text rendering get fuzzed too.
			var u NodePlan
			if len(data) > MaxSize || json.Unmarshal(data, &u) != nil {
				return
			}
			u.Kind, u.FormatVersion = Kind, FormatVersion
			p = &u
		}
		enc, err := Encode(p)
		if err != nil {
			t.Fatalf("a decoded plan does not encode: %v", err)
		}
		q, err := Decode(enc, p.Node)
		if err != nil {
			t.Fatalf("an encoded plan does not decode: %v\n%s", err, enc)
		}
		again, err := Encode(q)
		if err != nil || !bytes.Equal(enc, again) {
			t.Fatalf("encode(decode(encode(p))) differs from encode(p): %v", err)
		}
		if err := WriteText(io.Discard, q); err != nil {
			t.Fatalf("WriteText: %v", err)
		}
	})
}

// FuzzIndexEntry: whatever an index entry says, IsPlanFile accepts only a
// file name directly in the directory that no index can be.
func FuzzIndexEntry(f *testing.F) {
	f.Add("win-1", "win-1.json")
	f.Add("..", "..")
	f.Add("index", "index.json")
	f.Add("a", "../a.json")
	f.Fuzz(func(t *testing.T, node, file string) {
		e := IndexEntry{Node: node, File: file}
		if !e.IsPlanFile() {
			return
		}
		if strings.ContainsAny(file, `/\:`) || file == "." || file == ".." || strings.HasPrefix(file, ".") ||
			file == IndexFile || len(file) > 255 || filepath.Base(file) != file {
			t.Fatalf("IsPlanFile accepted node %q, file %q", node, file)
		}
	})
}
