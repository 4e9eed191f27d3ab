package plan

import (
	"bytes"
	"encoding/json"
	"errors"
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
	f.Add([]byte(`{"kind":"NodePlan","formatVersion":"2","node":"n","digest":"sha256:00"}`))
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

// FuzzDecodePart feeds arbitrary bytes to the part readers, under each
// kind and the name the bytes claim: no panic, and a part accepted
// re-encodes to the same bytes and decodes again; assembling a plan from
// whatever was accepted either succeeds or says which part it lacks.
func FuzzDecodePart(f *testing.F) {
	plans := []*NodePlan{planOn("node-0001", vxlanTable(routeNodes(3)), sampleProgram())}
	parts, err := EncodeParts(plans)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range parts {
		f.Add(e.Data)
	}
	seeds, _ := filepath.Glob("../intent/testdata/plans/_*.json")
	for _, s := range seeds {
		if data, err := os.ReadFile(s); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"kind":"RouteShard","formatVersion":"2","name":"routes-0123456789ab-00","digest":"sha256:00","nodes":[{"node":"a","address":"1.2.3.4","blocks":["10.0.0.0/33"]}]}`))
	ref := plans[0]
	f.Fuzz(func(t *testing.T, data []byte) {
		var claim struct{ Name string }
		_ = json.Unmarshal(data, &claim)
		var ps Parts
		for _, kind := range []string{KindRouteTable, KindRouteShard, KindProgramChunk} {
			v, err := decodeAny(data, claim.Name, kind)
			if err != nil {
				var de *DecodeError
				if !errors.As(err, &de) {
					t.Fatalf("decode error %T %v is not a *DecodeError", err, err)
				}
				continue
			}
			var enc []byte
			switch p := v.(type) {
			case *RouteTable:
				enc, err = encodeDigested(p, &p.Digest)
			case *RouteShard:
				enc, err = encodeDigested(p, &p.Digest)
			case *ProgramChunk:
				enc, err = encodeDigested(p, &p.Digest)
			}
			if err != nil {
				t.Fatalf("an accepted %s does not encode: %v", kind, err)
			}
			if _, err := decodeAny(enc, claim.Name, kind); err != nil {
				t.Fatalf("an accepted %s, re-encoded, does not decode: %v\n%s", kind, err, enc)
			}
			ps.Add(v)
		}
		q := *ref
		q.Routes, q.Program = nil, nil
		if err := ps.Assemble(&q); err != nil && !errors.Is(err, ErrPartMissing) {
			t.Fatalf("Assemble: %v", err)
		}
		_ = Validate(&q)
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
