package intent

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

const kubectlPod = `- apiVersion: v1
  kind: Pod
  metadata:
    labels:
      app: web
    name: p-é
    namespace: n
  spec:
    containers:
    - image: i
      name: c
      ports:
      - containerPort: 80
        name: http
        protocol: TCP
    nodeName: win-1
  status:
    phase: Running
    podIP: 10.0.0.4
`

// yamlLists are v1 Lists in YAML; stream says whether the inventory must
// read them an item at a time (the others it may read either way).
var yamlLists = []struct {
	name, text string
	stream     bool
}{
	{"kubectl", "apiVersion: v1\nitems:\n" + kubectlPod + "- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: n\n    labels: {team: a}\n" + kubectlPod + "kind: List\nmetadata:\n  resourceVersion: \"\"\n", true},
	{"indented items", "apiVersion: v1\nkind: List\nitems:\n" + indent(kubectlPod+kubectlPod, "  "), true},
	{"crlf", strings.ReplaceAll("apiVersion: v1\nkind: List\nitems:\n"+kubectlPod+kubectlPod, "\n", "\r\n"), true},
	{"no final newline", "apiVersion: v1\nkind: List\nitems:\n" + strings.TrimSuffix(kubectlPod, "\n"), true},
	{"comments and blank lines", "# a list\napiVersion: v1\nkind: List\nitems:\n\n# first\n" + kubectlPod + "\n  # inside\n\n" + kubectlPod + "# after\nmetadata: {}\n", true},
	{"block scalar", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: n\n    annotations:\n      a: |\n        line one\n\n        - not an item\n" + kubectlPod, true},
	{"quoted keys", "apiVersion: v1\nkind: List\nitems:\n- \"apiVersion\": 'v1'\n  \"kind\": Namespace\n  metadata: {name: \"n\"}\n", true},
	{"not objects", "apiVersion: v1\nkind: List\nitems:\n- 1\n- [a]\n- kind: Pod\n-\n" + kubectlPod, true},
	// The cut falls inside a value that spans lines: the whole document
	// decides, as before.
	{"quoted across lines", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: \"n\nfoo: x\"\n" + kubectlPod, false},
	{"quoted item marker", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: \"n\n- x\"\n" + kubectlPod, false},
	{"flow across lines", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: n,\nlabels: {a: b}}\n" + kubectlPod, false},
	{"broken metadata", "apiVersion: v1\nkind: List\nmetadata: {a: [\nitems:\n" + kubectlPod, false},
	{"broken item", "apiVersion: v1\nkind: List\nitems:\n" + kubectlPod + "- a: [b\n" + kubectlPod, false},
	{"anchors", "apiVersion: v1\nkind: List\nitems:\n- &p\n  apiVersion: v1\n  kind: Namespace\n  metadata: {name: n}\n- *p\n", false},
	{"items twice", "apiVersion: v1\nkind: List\nitems:\n" + kubectlPod + "items:\n" + kubectlPod, false},
	{"not a list", "apiVersion: v1\nkind: PodList\nitems:\n" + kubectlPod, false},
	{"two documents", "apiVersion: v1\nkind: List\nitems:\n" + kubectlPod + "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: m}\n", false},
	{"tab", "apiVersion: v1\nkind: List\nitems:\n" + kubectlPod + "- apiVersion: v1\n  kind: Namespace\n  metadata: {name:\tm}\n", false},
	{"items inline", "apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: Namespace, metadata: {name: n}}]\n", false},
	{"odd indent", "apiVersion: v1\nkind: List\nitems:\n  - apiVersion: v1\n    kind: Namespace\n    metadata: {name: n}\n - x\n", false},
}

func indent(s, by string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = by + l
		}
	}
	return strings.Join(lines, "")
}

// TestYAMLListSameAsWhole: an inventory in YAML read an item at a time
// gives the same objects, positions and findings as the whole document
// parsed at once — kubectl's shape, its variations, and documents the
// cut would split inside a value, which must be read whole.
func TestYAMLListSameAsWhole(t *testing.T) {
	for _, tc := range yamlLists {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.text)
			var fast, whole Inventory
			var fastErrs, wholeErrs diag.List
			streamed := fast.readList("inv.yaml", data, &fastErrs)
			if !streamed {
				forEachObject("inv.yaml", data, RuleInventory, &fastErrs, func(obj *yaml.Node, src Source, apiVersion, kind string) {
					fast.add(obj, src, apiVersion, kind, &fastErrs)
				})
			}
			forEachObject("inv.yaml", data, RuleInventory, &wholeErrs, func(obj *yaml.Node, src Source, apiVersion, kind string) {
				whole.add(obj, src, apiVersion, kind, &wholeErrs)
			})
			if tc.stream && !streamed {
				t.Error("read whole; want an item at a time")
			}
			if diff := cmp.Diff(whole, fast, cmpopts.IgnoreUnexported(Source{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("inventory differs (-whole +read):\n%s", diff)
			}
			if diff := cmp.Diff(findingStrings(wholeErrs), findingStrings(fastErrs)); diff != "" {
				t.Errorf("findings differ (-whole +read):\n%s", diff)
			}
			if len(whole.Pods)+len(whole.Namespaces)+len(wholeErrs) == 0 {
				t.Error("nothing read: the test compares nothing")
			}
		})
	}
}

// TestYAMLListItemTrees: the trees of the items, cut apart and parsed in
// one stream, are the whole document's, line and column.
func TestYAMLListItemTrees(t *testing.T) {
	for _, tc := range yamlLists {
		if !tc.stream {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.text)
			items, _, ok := yamlListItems(data)
			if !ok {
				t.Fatal("not cut into items")
			}
			fast := collect(func(errs *diag.List, fn func(*yaml.Node, Source, string, string)) {
				if !forEachYAMLItem("inv.yaml", data, items, RuleInventory, errs, fn) {
					t.Error("an item did not parse alone")
				}
			})
			whole := collect(func(errs *diag.List, fn func(*yaml.Node, Source, string, string)) {
				forEachDocument("inv.yaml", data, RuleInventory, errs, nil, fn)
			})
			if diff := cmp.Diff(whole, fast); diff != "" {
				t.Errorf("items differ from the whole document (-whole +items):\n%s", diff)
			}
		})
	}
}

func findingStrings(l diag.List) []string {
	var out []string
	for _, f := range l {
		out = append(out, f.String())
	}
	return out
}
