package intent

import (
	"bytes"
	"encoding/json"
	"io"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

// A span is where one item of a JSON v1 List is written: its bytes and
// the line and column (as the YAML parser counts them: 1-based, in
// characters) of its first byte.
type span struct {
	start, end int
	line, col  int
}

// jsonListItems returns where each item of data is written if data is a
// single JSON object that is a v1 List — what `kubectl get -o json` writes
// — and nil otherwise (ok false): not JSON, not a List, a key written
// twice, items not an array. It allocates next to nothing (a span per
// item): reading such a List through the YAML parser whole builds a tree
// of ~270 bytes a value, 360 MB for a 30,000-pod inventory, while each
// item alone is a few kilobytes. A List it refuses is read as before.
func jsonListItems(data []byte) (items []span, ok bool) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(data) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	seen := map[string]bool{}
	var apiVersion, kind string
	haveItems := false
	pos := position{data: data, line: 1, col: 1}
	for dec.More() {
		t, err := dec.Token()
		key, isKey := t.(string)
		if err != nil || !isKey || seen[key] {
			return nil, false
		}
		seen[key] = true
		switch key {
		case "apiVersion", "kind":
			v, err := dec.Token()
			s, isStr := v.(string)
			if err != nil || !isStr {
				return nil, false
			}
			if key == "kind" {
				kind = s
			} else {
				apiVersion = s
			}
		case "items":
			if t, err := dec.Token(); err != nil || t != json.Delim('[') {
				return nil, false
			}
			haveItems = true
			for dec.More() {
				var raw json.RawMessage
				off := int(dec.InputOffset())
				if err := dec.Decode(&raw); err != nil {
					return nil, false
				}
				// The decoder's offset is before the separator and
				// white space that precede the item.
				start := off + bytes.IndexByte(data[off:], raw[0])
				line, col := pos.advance(start)
				items = append(items, span{start: start, end: start + len(raw), line: line, col: col})
			}
			if t, err := dec.Token(); err != nil || t != json.Delim(']') {
				return nil, false
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, false
			}
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	if apiVersion != "v1" || kind != "List" || !haveItems {
		return nil, false
	}
	return items, true
}

// position counts lines and columns forward through data as the YAML
// parser does: columns in characters, and CR LF, CR, LF, NEL, LS and PS
// each a line break (JSON allows the last three raw inside a string).
type position struct {
	data      []byte
	off       int
	line, col int
}

// advance moves to off (at or after the last one) and returns its line
// and column.
func (p *position) advance(off int) (line, col int) {
	for p.off < off {
		r, n := utf8.DecodeRune(p.data[p.off:])
		if r == '\r' && p.off+1 < len(p.data) && p.data[p.off+1] == '\n' {
			n = 2
		}
		p.off += n
		switch r {
		case '\r', '\n', '\u0085', '\u2028', '\u2029':
			p.line, p.col = p.line+1, 1
		default:
			p.col++
		}
	}
	return p.line, p.col
}

// forEachJSONItem is forEachObject on a JSON List whose items are at
// items (jsonListItems): each item is parsed, handed to fn and dropped
// before the next, so that only one item's tree is alive at a time. It
// returns false, having handed some items on, if the YAML parser refuses
// an item (valid JSON it cannot read, if there is any): the caller must
// undo what fn did and read the document whole, which says what is wrong.
//
// One YAML decoder reads them all, as the documents of a stream that
// writes each item after a document marker ("--- ITEM\n", itemStream):
// a parser per item would grow its buffers anew 30,000 times. No line of
// a JSON value can start with "---" or "...", so the markers are the only
// document boundaries.
func forEachJSONItem(file string, data []byte, items []span, rule string, errs *diag.List, fn func(obj *yaml.Node, src Source, apiVersion, kind string)) bool {
	dec := yaml.NewDecoder(&itemStream{data: data, items: items, marker: jsonMarker})
	pos := position{data: data, line: 1, col: 1}
	line := 1 // where the next item starts in the stream
	for i, s := range items {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil || len(doc.Content) != 1 {
			return false
		}
		item := doc.Content[0]
		// In the stream the item starts at line, after "--- ".
		moveTo(item, line, len(jsonMarker)+1, s)
		end, _ := pos.advance(s.end)
		line += end - s.line + 1
		isrc := Source{File: file, Doc: 1, Item: i + 1, Pos: nodePos(file, item), node: item}
		if av, k, ok := typeOf(item, isrc, rule, errs); ok {
			fn(item, isrc, av, k)
		}
	}
	return true
}

// jsonMarker starts each item of a JSON List in an itemStream.
const jsonMarker = "--- "

// itemStream reads the items of a List as a YAML stream, each after a
// document marker and ending with a line break.
type itemStream struct {
	data   []byte
	items  []span
	marker string
	next   int    // the next item to write
	buf    []byte // what is left of the current one
}

func (r *itemStream) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.next == len(r.items) {
			return 0, io.EOF
		}
		s := r.items[r.next]
		r.next++
		r.buf = append(append(r.buf[:0], r.marker...), r.data[s.start:s.end]...)
		if r.buf[len(r.buf)-1] != '\n' {
			r.buf = append(r.buf, '\n')
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// moveTo moves a tree parsed from a stream, where its first line is line
// and it starts at column col, to s: lines by the difference, and the
// columns of what is on its first line by theirs.
func moveTo(n *yaml.Node, line, col int, s span) {
	if n.Line == line {
		n.Column += s.col - col
	}
	n.Line += s.line - line
	for _, c := range n.Content {
		moveTo(c, line, col, s)
	}
}
