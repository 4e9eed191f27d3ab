package intent

import (
	"bytes"

	"go.yaml.in/yaml/v3"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

// yamlListItems returns where each item of data is written if data is a
// v1 List in YAML as `kubectl get -o yaml` writes it: one document, a
// block mapping at column 0 whose items key holds a block sequence, each
// item starting with "- " at one column. The items are cut apart by their
// lines; rest is the document without them (its items key then null),
// which the caller parses to check that it is a v1 List, and that nothing
// outside the items is wrong.
//
// It refuses (ok false), and the document is read whole as before,
// whatever it cannot be sure to cut as the parser would: tabs, anchors
// and aliases ('&' or '*' anywhere), line breaks other than LF and CR LF,
// a byte order mark, directives and document markers, a line at column 0
// that is not a plain key, a key written twice, items written inline.
// Where the cut could still fall inside a quoted or flow scalar that
// spans lines, an item parsed alone is unterminated: the caller then
// undoes what the items gave and reads the document whole.
func yamlListItems(data []byte) (items []span, rest []byte, ok bool) {
	if bytes.ContainsAny(data, "\t&*") || bytes.HasPrefix(data, []byte("\ufeff")) ||
		bytes.Contains(data, []byte("\u0085")) || bytes.Contains(data, []byte("\u2028")) || bytes.Contains(data, []byte("\u2029")) {
		return nil, nil, false
	}
	const (
		top = iota
		inItems
	)
	state, indent := top, -1 // indent: the items' column, once known
	seen := map[string]bool{}
	line := 0
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		next := len(data)
		if end >= 0 {
			end += off
			next = end + 1
		} else {
			end = len(data)
		}
		text := data[off:end]
		line++
		if i := bytes.IndexByte(text, '\r'); i >= 0 && i != len(text)-1 {
			return nil, nil, false // a CR that is not part of CR LF
		}
		text = bytes.TrimSuffix(text, []byte("\r"))
		lineStart := off
		off = next
		body := bytes.TrimLeft(text, " ")
		if len(body) == 0 || body[0] == '#' {
			if state == inItems && len(items) > 0 {
				items[len(items)-1].end = off
			} else {
				rest = append(rest, data[lineStart:off]...)
			}
			continue
		}
		col := len(text) - len(body)
		if state == inItems {
			if indent < 0 {
				indent = col
			}
			switch {
			case col == indent && (len(body) == 1 && body[0] == '-' || bytes.HasPrefix(body, []byte("- "))):
				items = append(items, span{start: lineStart, end: off, line: line, col: 1})
				continue
			case col > indent && len(items) > 0:
				items[len(items)-1].end = off
				continue
			case col == 0:
				state = top // the next key
			default:
				return nil, nil, false
			}
		}
		// A key of the top-level mapping, or what its value holds.
		if col > 0 {
			rest = append(rest, data[lineStart:off]...)
			continue
		}
		key, value, isKey := bytes.Cut(body, []byte(":"))
		if !isKey || !plainKey(key) || len(value) > 0 && value[0] != ' ' || seen[string(key)] {
			return nil, nil, false
		}
		seen[string(key)] = true
		rest = append(rest, data[lineStart:off]...)
		if string(key) == "items" {
			if v := bytes.TrimSpace(value); len(v) > 0 && v[0] != '#' {
				return nil, nil, false // items written inline
			}
			state = inItems
		}
	}
	if len(items) == 0 {
		return nil, nil, false
	}
	return items, rest, true
}

// plainKey says whether k is a key the splitter may take as written: a
// plain word of letters, digits, '_', '-' and '.', starting with a letter.
func plainKey(k []byte) bool {
	if len(k) == 0 || !(k[0] >= 'a' && k[0] <= 'z' || k[0] >= 'A' && k[0] <= 'Z') {
		return false
	}
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// yamlListRest checks the document without its items (yamlListItems):
// one mapping, apiVersion v1, kind List, and items null where they were
// cut out, each key once.
func yamlListRest(rest []byte) bool {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(rest))
	if err := dec.Decode(&doc); err != nil || len(doc.Content) != 1 {
		return false
	}
	var more yaml.Node
	if dec.Decode(&more) == nil {
		return false
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return false
	}
	got := map[string]*yaml.Node{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if k.Kind != yaml.ScalarNode || got[k.Value] != nil {
			return false
		}
		got[k.Value] = m.Content[i+1]
	}
	str := func(n *yaml.Node, want string) bool {
		return n != nil && n.Kind == yaml.ScalarNode && n.Tag == "!!str" && n.Value == want
	}
	items := got["items"]
	return str(got["apiVersion"], "v1") && str(got["kind"], "List") && items != nil && items.Tag == "!!null"
}

// yamlMarker starts each item of a YAML List in an itemStream: the item
// keeps its lines, from its "- ", as a one-item sequence.
const yamlMarker = "---\n"

// forEachYAMLItem is forEachObject on a YAML List cut into items
// (yamlListItems), one at a time, as forEachJSONItem. It returns false,
// having handed some items on, when an item does not parse alone as one
// item of a sequence: the cut fell inside something (see
// yamlListItems), and the caller must undo what fn did and read the
// document whole.
func forEachYAMLItem(file string, data []byte, items []span, rule string, errs *diag.List, fn func(obj *yaml.Node, src Source, apiVersion, kind string)) bool {
	dec := yaml.NewDecoder(&itemStream{data: data, items: items, marker: yamlMarker})
	line := 1 // the marker line of the next item in the stream
	for i, s := range items {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil || len(doc.Content) != 1 {
			return false
		}
		seq := doc.Content[0]
		if seq.Kind != yaml.SequenceNode || len(seq.Content) != 1 {
			return false
		}
		item := seq.Content[0]
		moveTo(item, line+1, 1, s)
		lines := bytes.Count(data[s.start:s.end], []byte("\n"))
		if s.end == len(data) && (s.end == s.start || data[s.end-1] != '\n') {
			lines++ // the stream ends the last line
		}
		line += 1 + lines
		isrc := Source{File: file, Doc: 1, Item: i + 1, Pos: nodePos(file, item), node: item}
		if av, k, ok := typeOf(item, isrc, rule, errs); ok {
			fn(item, isrc, av, k)
		}
	}
	return true
}
