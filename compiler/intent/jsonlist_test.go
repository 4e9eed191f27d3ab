package intent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

// seen is what forEachObject handed on: each object's source, type and
// tree (values, lines and columns), and the findings.
type seen struct {
	Objects  []string
	Findings []string
}

func collect(read func(errs *diag.List, fn func(*yaml.Node, Source, string, string))) seen {
	var s seen
	var errs diag.List
	read(&errs, func(obj *yaml.Node, src Source, apiVersion, kind string) {
		var b strings.Builder
		var walk func(n *yaml.Node, depth int)
		walk = func(n *yaml.Node, depth int) {
			fmt.Fprintf(&b, "%*s%d %s %q %d:%d\n", depth, "", n.Kind, n.Tag, n.Value, n.Line, n.Column)
			for _, c := range n.Content {
				walk(c, depth+1)
			}
		}
		walk(obj, 0)
		s.Objects = append(s.Objects, fmt.Sprintf("%s doc %d item %d at %s: %s %s\n%s", src.File, src.Doc, src.Item, src.Pos, apiVersion, kind, b.String()))
	})
	for _, f := range errs {
		s.Findings = append(s.Findings, f.String())
	}
	return s
}

// TestJSONListSameAsYAML: an inventory List in JSON, read an item at a
// time, hands on the same objects, trees, positions and findings as the
// YAML parser reading the whole document — pretty-printed as kubectl
// writes it, on one line, with characters of several bytes before an
// item, and with items that are not objects.
func TestJSONListSameAsYAML(t *testing.T) {
	pod := `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p-é€😀", "namespace": "n", "labels": {"a": "b"}},
   "spec": {"nodeName": "win-1", "containers": [{"name": "c", "ports": [{"containerPort": 80, "protocol": "TCP"}]}]},
   "status": {"podIP": "10.0.0.1", "x": [1, 2.5, true, null, "\u00e9\n"]}}`
	cases := map[string]string{
		"kubectl": `{
    "apiVersion": "v1",
    "items": [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "n", "labels": {"team": "ü"}}
        },
        ` + pod + `
    ],
    "kind": "List",
    "metadata": {
        "resourceVersion": ""
    }
}
`,
		"one line":          `{"kind":"List","apiVersion":"v1","items":[` + strings.ReplaceAll(pod, "\n", "") + `,{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"ñ"}}]}`,
		"wide before":       `{"metadata":{"note":"日本語😀"},"kind":"List","apiVersion":"v1","items":[   ` + pod + `]}`,
		"not objects":       `{"apiVersion":"v1","kind":"List","items":[1, "x", [], {"kind":"Pod"}, null, ` + pod + `]}`,
		"empty items":       `{"apiVersion":"v1","kind":"List","items":[]}`,
		"crlf":              strings.ReplaceAll(`{"apiVersion":"v1","kind":"List","items":[`+"\n"+pod+"\n]}\n", "\n", "\r\n"),
		"lone cr":           strings.ReplaceAll(`{"apiVersion":"v1","kind":"List","items":[`+"\n"+pod+"\n,"+pod+"]}\n", "\n", "\r"),
		"breaks in strings": `{"apiVersion":"v1","kind":"List","metadata":{"a":"x` + "\u2028y\u2029z\u0085w" + `"},"items":[{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a` + "\u2028" + `b"}},` + "\n  " + pod + `]}`,
		"leading space":     "\n\n  " + `{"apiVersion":"v1","kind":"List","items":[` + pod + `]}`,
	}
	for name, text := range cases {
		t.Run(name, func(t *testing.T) {
			data := []byte(text)
			items, ok := jsonListItems(data)
			if !ok {
				t.Fatal("not read as a JSON List")
			}
			fast := collect(func(errs *diag.List, fn func(*yaml.Node, Source, string, string)) {
				if !forEachJSONItem("inv.json", data, items, RuleInventory, errs, fn) {
					t.Error("an item did not parse alone")
				}
			})
			whole := collect(func(errs *diag.List, fn func(*yaml.Node, Source, string, string)) {
				forEachDocument("inv.json", data, RuleInventory, errs, nil, fn)
			})
			if diff := cmp.Diff(whole, fast); diff != "" {
				t.Errorf("item at a time differs from the whole document (-whole +items):\n%s", diff)
			}
			if name != "empty items" && len(whole.Objects) == 0 {
				t.Error("no objects read: the test compares nothing")
			}
		})
	}
}

// TestJSONListRefused: what is not exactly one JSON v1 List is left to
// the YAML parser, which reads it (or says what is wrong) as before.
func TestJSONListRefused(t *testing.T) {
	for name, text := range map[string]string{
		"yaml":           "apiVersion: v1\nkind: List\nitems: []\n",
		"not a list":     `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`,
		"other version":  `{"apiVersion":"v2","kind":"List","items":[]}`,
		"items twice":    `{"apiVersion":"v1","kind":"List","items":[],"items":[{"apiVersion":"v1","kind":"Pod"}]}`,
		"kind twice":     `{"apiVersion":"v1","kind":"Pod","kind":"List","items":[]}`,
		"items not list": `{"apiVersion":"v1","kind":"List","items":{}}`,
		"items null":     `{"apiVersion":"v1","kind":"List","items":null}`,
		"no items":       `{"apiVersion":"v1","kind":"List"}`,
		"kind not str":   `{"apiVersion":"v1","kind":1,"items":[]}`,
		"two documents":  `{"apiVersion":"v1","kind":"List","items":[]}` + "\n---\n" + `{"apiVersion":"v1","kind":"List","items":[]}`,
		"two values":     `{"apiVersion":"v1","kind":"List","items":[]} {}`,
		"invalid":        `{"apiVersion":"v1","kind":"List","items":[}`,
		"bom":            "\ufeff" + `{"apiVersion":"v1","kind":"List","items":[]}`,
		"comment":        `{"apiVersion":"v1","kind":"List","items":[]} # c`,
		"array":          `[{"apiVersion":"v1","kind":"List","items":[]}]`,
	} {
		if _, ok := jsonListItems([]byte(text)); ok {
			t.Errorf("%s: read as a JSON List: %s", name, text)
		}
	}
}

// TestJSONListUndo: valid JSON the YAML parser refuses in an item (an
// escaped surrogate pair, "\/", a key over 1,024 characters) is what the
// whole document says it is — an error, and no object of the List —
// though the items before it were read.
func TestJSONListUndo(t *testing.T) {
	ns := `{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}`
	for name, bad := range map[string]string{
		"surrogates": `{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "\ud83d\ude00"}}`,
		"solidus":    `{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a\/b"}}`,
		"long key":   `{"apiVersion": "v1", "kind": "Namespace", "metadata": {"` + strings.Repeat("k", 1100) + `": 1}}`,
	} {
		t.Run(name, func(t *testing.T) {
			data := []byte(`{"apiVersion": "v1", "kind": "List", "items": [` + ns + ",\n" + bad + ",\n" + ns + "]}\n")
			var byItem, whole Inventory
			var itemErrs, wholeErrs diag.List
			if byItem.readList("inv.json", data, &itemErrs) {
				t.Fatal("read an item at a time, past an item the YAML parser refuses")
			}
			forEachObject("inv.json", data, RuleInventory, &wholeErrs, func(obj *yaml.Node, src Source, apiVersion, kind string) {
				whole.add(obj, src, apiVersion, kind, &wholeErrs)
			})
			if len(byItem.Namespaces) != 0 || len(itemErrs) != 0 {
				t.Errorf("not undone: %d namespaces, findings %v", len(byItem.Namespaces), itemErrs)
			}
			if len(wholeErrs) == 0 || len(whole.Namespaces) != 0 {
				t.Errorf("the whole document: %d namespaces, findings %v; want an error and none", len(whole.Namespaces), wholeErrs)
			}
		})
	}
}
