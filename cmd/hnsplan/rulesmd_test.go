package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/policies"
)

// TestRulesDoc keeps docs/rules.md equal to `hnsplan rules -o markdown`.
// HNSPLAN_UPDATE=1 rewrites it instead of failing.
func TestRulesDoc(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"rules", "-o", "markdown"}, &out, &errOut); code != exitOK {
		t.Fatalf("hnsplan rules -o markdown: exit %d: %s", code, errOut.String())
	}
	path := filepath.Join("..", "..", filepath.FromSlash(rulesDocPath))
	if os.Getenv("HNSPLAN_UPDATE") != "" {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: generate it with HNSPLAN_UPDATE=1 go test ./cmd/hnsplan -run TestRulesDoc", err)
	}
	if !bytes.Equal(got, out.Bytes()) {
		t.Errorf("%s is stale (%s): regenerate it with HNSPLAN_UPDATE=1 go test ./cmd/hnsplan -run TestRulesDoc and commit it",
			rulesDocPath, firstDiff(got, out.Bytes()))
	}
}

// firstDiff says where a and b first differ, by line.
func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y || i >= len(al) || i >= len(bl) {
			return fmt.Sprintf("line %d is %q, the catalog gives %q", i+1, x, y)
		}
	}
	return "no difference"
}

// TestRulesMarkdown checks the document's shape on the real catalog: every
// rule has a table row under its family and a section with its remedy, and
// no row has more cells than the table.
func TestRulesMarkdown(t *testing.T) {
	rules, err := intent.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := writeRulesMarkdown(&b, rules); err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	for _, r := range rules {
		row := fmt.Sprintf("| [`%s`](#%s) | %s | %s | ", r.ID, r.ID, r.Severity, r.Phase)
		i := strings.Index(doc, row)
		if i < 0 {
			t.Errorf("rule %s: no table row %q", r.ID, row)
			continue
		}
		if fam := strings.LastIndex(doc[:i], "\n## Family "); fam < 0 || !strings.HasPrefix(doc[fam:], "\n## Family "+r.Family+"\n") {
			t.Errorf("rule %s: its row is not under ## Family %s", r.ID, r.Family)
		}
		if !strings.Contains(doc, "\n### "+r.ID+"\n\n- **When:** ") {
			t.Errorf("rule %s: no section", r.ID)
		}
		if !strings.Contains(doc, "- **Remedy:** "+mdEscape(r.Remedy)+"\n") {
			t.Errorf("rule %s: remedy missing", r.ID)
		}
	}
	for n, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "| ") {
			if cells := strings.Count(strings.ReplaceAll(line, `\|`, ""), "|"); cells != 5 {
				t.Errorf("line %d has %d unescaped '|', want 5: %s", n+1, cells, line)
			}
		}
	}
	var again bytes.Buffer
	if err := writeRulesMarkdown(&again, rules); err != nil || again.String() != doc {
		t.Errorf("a second rendering differs (err %v)", err)
	}
}

func TestMarkdownEscape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"cluster.nodes.<name>.address", `cluster.nodes.\<name>.address`},
		{"a | b", `a \| b`},
		{"flannel-*, or static-routes", `flannel-\*, or static-routes`},
		{"2^(32-blockSize) - 4 > 0", "2^(32-blockSize) - 4 > 0"},
		{"use_single_network [x] `y`", "use\\_single\\_network \\[x\\] \\`y\\`"},
		{`back\slash`, `back\\slash`},
		{"two\nlines", "two lines"},
	} {
		if got := mdEscape(tc.in); got != tc.want {
			t.Errorf("mdEscape(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	var b bytes.Buffer
	rules := []policies.Rule{{ID: "x-rule", Family: "zeta", Severity: "info", Phase: "vet", Summary: "a | b <c>", Remedy: "set *d*"}}
	if err := writeRulesMarkdown(&b, rules); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| [`x-rule`](#x-rule) | info | vet | a \\| b \\<c> |\n",
		"- **Remedy:** set \\*d\\*\n",
		"- **References:** none (an hnsplan rule)\n",
		"[zeta](#family-zeta) (1)",
		"The catalog has 1 rule in 1 family.",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}
