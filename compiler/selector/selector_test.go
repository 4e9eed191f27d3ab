package selector_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hnsplan/hnsplan/compiler/selector"
)

// TestParseCanonical covers canonical forms the Calico vectors leave out.
func TestParseCanonical(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a == 'b' && c == 'd'", `(a == "b" && c == "d")`}, // Calico brackets every && and || group
		{"a == 'b' || c == 'd' && e == 'f'", `(a == "b" || (c == "d" && e == "f"))`},
		{"(a == 'b' || c == 'd') && e == 'f'", `((a == "b" || c == "d") && e == "f")`},
		{"a == 'b' && (c == 'd' && e == 'f')", `(a == "b" && (c == "d" && e == "f"))`},
		{"((has(a)))", "has(a)"},
		{"!!has(a)", "has(a)"},
		{"!(!has(a))", "has(a)"}, // Calico prints "!!has(a)"; see operation
		{"!(!(!has(a)))", "!has(a)"},
		{"!(a == 'b' || !has(c))", `!(a == "b" || !has(c))`},
		{"!!all()", "all()"},
		{"\tall(\t)\t", "all()"},
		{"has(\tkubernetes.io/os )", "has(kubernetes.io/os)"},
		{"global( )", "global()"},
		{"a in {}", "a in {}"},
		{"a in {'x',}", `a in {"x"}`}, // Calico accepts a trailing comma
		{"a in{'b','a','b'}", `a in {"a", "b"}`},
		{`a notin {'"', "'"}`, `a not in {'"', "'"}`},
		{"a startswith''", `a starts with ""`},
		{"a ends\twith 'x'", `a ends with "x"`},
		{"app.kubernetes.io/name != 'web'", `app.kubernetes.io/name != "web"`},
		{"a == 'x y\nz'", "a == \"x y\nz\""},
		{"-/. == 'v'", `-/. == "v"`}, // any run of key bytes is a key, as in Calico
	}
	for _, tt := range tests {
		sel := mustParse(t, tt.in)
		if got := sel.String(); got != tt.want {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ in, wantErr string }{
		{`a == `, `selector "a == ": expected a quoted string at offset 5`},
		{`a == b`, `selector "a == b": expected a quoted string, found label "b" at offset 5`},
		{`'b1' == b`, `selector "'b1' == b": expected a label, "has(", "all()", "global()", "!" or "(", found string "b1" at offset 0`},
		{`b`, `selector "b": expected an operator after label "b" at offset 1`},
		{`a b`, `selector "a b": expected an operator after label "a" at offset 2`},
		{`a starts 'x'`, `selector "a starts 'x'": expected an operator after label "a" at offset 2`},
		{`a containsb ''`, `selector "a containsb ''": expected a quoted string, found label "b" at offset 10`},
		{`!`, `selector "!": expected a label, "has(", "all()", "global()", "!" or "(" at offset 1`},
		{`foo == "bar" &`, `selector "foo == \"bar\" &": expected "&&", found "&" at offset 13`},
		{`foo == "bar" |`, `selector "foo == \"bar\" |": expected "||", found "|" at offset 13`},
		{`a = "b"`, `selector "a = \"b\"": expected "==", found "=" at offset 2`},
		{`foo != ||`, `selector "foo != ||": expected a quoted string, found "||" at offset 7`},
		{`foo in {"", ||`, `selector "foo in {\"\", ||": expected a quoted string or "}", found "||" at offset 12`},
		{`foo in {"" "x"}`, `selector "foo in {\"\" \"x\"}": expected "," or "}", found string "x" at offset 11`},
		{`foo in ""`, `selector "foo in \"\"": expected a set literal in "{...}", found string "" at offset 7`},
		{`"FOO`, `selector "\"FOO": unterminated string at offset 0`},
		{`a == 'FOO"`, `selector "a == 'FOO\"": unterminated string at offset 5`},
		{`(a == "foo"`, `selector "(a == \"foo\"": expected "&&", "||" or ")" at offset 11`},
		{`)`, `selector ")": expected a label, "has(", "all()", "global()", "!" or "(", found ")" at offset 0`},
		{`has(a) )`, `selector "has(a) )": expected "&&", "||" or end of selector, found ")" at offset 7`},
		{`%`, `selector "%": unexpected character "%" at offset 0`},
		{`a == "é" && é`, `selector "a == \"é\" && é": unexpected character "é" at offset 13`},
		{"a == 'b'\n", `selector "a == 'b'\n": unexpected character "\n" at offset 8`}, // only space and tab are blanks
		{`has()`, `selector "has()": expected a label key in has(...) at offset 4`},
		{`has(a b)`, `selector "has(a b)": expected ")" to close has( at offset 6`},
		{`has (a)`, `selector "has (a)": expected an operator after label "has", found "(" at offset 4`},
		{`all(x)`, `selector "all(x)": expected ")" to close all( at offset 4`},
		{`has(foo) &&`, `selector "has(foo) &&": expected a label, "has(", "all()", "global()", "!" or "(" at offset 11`},
	}
	for _, tt := range tests {
		sel, err := selector.Parse(tt.in)
		if err == nil {
			t.Errorf("Parse(%q) = %q, want error %q", tt.in, sel, tt.wantErr)
			continue
		}
		if err.Error() != tt.wantErr {
			t.Errorf("Parse(%q) error:\n got %s\nwant %s", tt.in, err, tt.wantErr)
		}
		var se *selector.SyntaxError
		if !errors.As(err, &se) || se.Selector != tt.in {
			t.Errorf("Parse(%q) error %#v is not a *SyntaxError for the input", tt.in, err)
		}
	}
}

func TestEvaluate(t *testing.T) {
	labels := map[string]string{"app": "web", "tier": "api", "empty": ""}
	tests := []struct {
		sel  string
		want bool
	}{
		{"has(empty)", true},
		{"empty == ''", true},
		{"empty in {''}", true},
		{"missing != ''", true}, // absent labels satisfy != and not in
		{"missing not in {''}", true},
		{"!missing == ''", true},
		{"missing contains ''", false}, // but no other label test
		{"missing starts with ''", false},
		{"missing ends with ''", false},
		{"app starts with 'w' && app ends with 'b' && app contains 'e'", true},
		{"app in {'api', 'db'} || tier in {'api', 'db'}", true},
		{"app in {'api', 'db'} || tier not in {'api', 'db'}", false},
		{"global()", true},
		{"!global()", false},
		{"!all()", false},
	}
	for _, tt := range tests {
		sel := selector.MustParse(tt.sel)
		if got := sel.Evaluate(labels); got != tt.want {
			t.Errorf("Parse(%q).Evaluate(%v) = %v, want %v", tt.sel, labels, got, tt.want)
		}
		if got := sel.EvaluateLabels(selector.Map(labels)); got != tt.want {
			t.Errorf("Parse(%q).EvaluateLabels(%v) = %v, want %v", tt.sel, labels, got, tt.want)
		}
	}
	if !selector.MustParse("a != 'x'").Evaluate(nil) {
		t.Error("a != 'x' does not match a nil map")
	}
}

func TestHelpers(t *testing.T) {
	tests := []struct {
		sel   string
		isAll bool
		keys  []string
	}{
		{"", true, nil},
		{"  ", true, nil},
		{"(all())", true, nil},
		{"!!all()", true, nil},
		{"global()", false, nil},
		{"all() && all()", false, nil},
		{"!all()", false, nil},
		{"has(b) && a == 'x' || !(c in {'1'} && b != 'y')", false, []string{"a", "b", "c"}},
		{"k8s.io/z contains 'q' || a/b starts with '' || a/b ends with ''", false, []string{"a/b", "k8s.io/z"}},
	}
	for _, tt := range tests {
		sel := selector.MustParse(tt.sel)
		if got := sel.IsAll(); got != tt.isAll {
			t.Errorf("Parse(%q).IsAll() = %v, want %v", tt.sel, got, tt.isAll)
		}
		if diff := cmp.Diff(tt.keys, sel.LabelKeys()); diff != "" {
			t.Errorf("Parse(%q).LabelKeys() (-want +got):\n%s", tt.sel, diff)
		}
	}
}

func TestZeroSelector(t *testing.T) {
	var zero selector.Selector
	all := selector.MustParse("all()")
	if !zero.IsAll() || !zero.Evaluate(nil) || zero.String() != "all()" || zero.LabelKeys() != nil {
		t.Errorf("zero Selector is not all(): %q", zero)
	}
	if zero.UniqueID() != all.UniqueID() || !zero.Equal(all) || !cmp.Equal(zero, all) {
		t.Errorf("zero Selector differs from all()")
	}
}

// TestUniqueID checks the formula documented on UniqueID independently.
func TestUniqueID(t *testing.T) {
	for _, s := range []string{"", "a == 'b'", "!(has(b) || !has(a))", "a in {'z', 'a'}"} {
		sel := selector.MustParse(s)
		sum := sha256.Sum224([]byte("s:" + sel.String()))
		want := "s:" + base64.RawURLEncoding.EncodeToString(sum[:])
		if got := sel.UniqueID(); got != want {
			t.Errorf("Parse(%q).UniqueID() = %q, want %q", s, got, want)
		}
	}
}

func TestText(t *testing.T) {
	type policy struct {
		Selector selector.Selector `json:"selector"`
	}
	var p policy
	if err := json.Unmarshal([]byte(`{"selector": "b == 'x'&&has(a)"}`), &p); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"selector":"(b == \"x\" \u0026\u0026 has(a))"}`; string(out) != want {
		t.Errorf("Marshal = %s, want %s", out, want)
	}
	if err := json.Unmarshal([]byte(`{"selector": "a =="}`), &p); err == nil {
		t.Error("Unmarshal of a bad selector succeeded")
	}
	// Equal makes go-cmp compare selectors by canonical form.
	a, b := selector.MustParse("a in {'x','y'}"), selector.MustParse("a in {'y', 'x', 'x'}")
	if !cmp.Equal(a, b) || cmp.Equal(a, selector.MustParse("a in {'x'}")) {
		t.Error("cmp.Equal does not compare canonical forms")
	}
}

func TestMustParsePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MustParse of a bad selector did not panic")
		}
	}()
	selector.MustParse("a ==")
}

// FuzzParse: Parse never panics, and the canonical form of anything it
// accepts reparses to itself and evaluates the same.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "all()", "global()", "has(a)", `a == "b"`, "a != 'b'", `a in {"a", "b"}`,
		"a not in {'\"'}", "a contains 'x'", "a starts with 'x'", "a endswith 'x'",
		"!(!a == 'b' || has(c)) && !!d in {}", "((a == 'b'))", "a in {'x',}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := selector.Parse(s)
		if err != nil {
			var se *selector.SyntaxError
			if !errors.As(err, &se) || se.Selector != s || se.Offset < 0 || se.Offset > len(s) {
				t.Fatalf("Parse(%q): bad error %#v", s, err)
			}
			return
		}
		re, err := selector.Parse(sel.String())
		if err != nil {
			t.Fatalf("Parse(%q): canonical %q does not reparse: %v", s, sel.String(), err)
		}
		if re.String() != sel.String() {
			t.Fatalf("Parse(%q): canonical %q reparses as %q", s, sel.String(), re.String())
		}
		// Compare evaluation on no labels and on every mentioned key set
		// to "", to each string in the selector, and to the selector itself.
		keys := sel.LabelKeys()
		for _, v := range []string{"", "a", "b", "x", `"`, "'", s} {
			labels := map[string]string{}
			for _, k := range keys {
				labels[k] = v
			}
			for _, l := range []map[string]string{nil, labels} {
				if sel.Evaluate(l) != re.Evaluate(l) {
					t.Fatalf("Parse(%q) and its canonical %q disagree on %v", s, sel.String(), l)
				}
			}
		}
	})
}

// BenchmarkEvaluate measures one evaluation of a typical policy selector
// against a pod's labels.
func BenchmarkEvaluate(b *testing.B) {
	sel := selector.MustParse(`projectcalico.org/orchestrator == 'k8s' && app.kubernetes.io/name in {"api", "db", "web"} && !has(quarantine) && tier != "test"`)
	labels := map[string]string{
		"projectcalico.org/orchestrator": "k8s",
		"app.kubernetes.io/name":         "web",
		"app.kubernetes.io/instance":     "web-7f9c",
		"pod-template-hash":              "7f9c5d6b8",
		"kubernetes.io/os":               "windows",
		"tier":                           "frontend",
		"team":                           "payments",
		"version":                        "v1.4.2",
	}
	for b.Loop() {
		if !sel.Evaluate(labels) {
			b.Fatal("selector does not match")
		}
	}
}

// BenchmarkParse measures parsing the same selector.
func BenchmarkParse(b *testing.B) {
	const s = `projectcalico.org/orchestrator == 'k8s' && app.kubernetes.io/name in {"api", "db", "web"} && !has(quarantine) && tier != "test"`
	for b.Loop() {
		if _, err := selector.Parse(s); err != nil {
			b.Fatal(err)
		}
	}
}

func TestRequiredEquals(t *testing.T) {
	for _, tt := range []struct {
		sel  string
		want map[string]string
	}{
		{`a == "x"`, map[string]string{"a": "x"}},
		{`a == "x" && (b in {"y"} && has(c))`, map[string]string{"a": "x", "b": "y"}},
		{`a == "x" || b == "y"`, map[string]string{}},
		{`!(a == "x")`, map[string]string{}},
		{`a in {"x", "y"}`, map[string]string{}},
		{`all()`, map[string]string{}},
	} {
		got := selector.MustParse(tt.sel).RequiredEquals()
		if len(got) != len(tt.want) {
			t.Errorf("%s: %v, want %v", tt.sel, got, tt.want)
			continue
		}
		for k, v := range tt.want {
			if got[k] != v {
				t.Errorf("%s: %v, want %v", tt.sel, got, tt.want)
			}
		}
	}
}

func TestForRuleNamespaces(t *testing.T) {
	ns := map[string]string{"env": "prod"}
	for _, tc := range []struct {
		in, want string
		changed  bool
		matches  bool
	}{
		{"global()", "!all()", true, false},
		{"!global()", "all()", true, true},
		{"global() || env == 'prod'", `(!all() || env == "prod")`, true, true},
		{"global() && env == 'prod'", `(!all() && env == "prod")`, true, false},
		{"all()", "all()", false, true},
		{"env == 'dev'", `env == "dev"`, false, false},
		{"", "all()", false, true},
	} {
		got, changed := selector.MustParse(tc.in).ForRuleNamespaces()
		if got.String() != tc.want || changed != tc.changed || got.Evaluate(ns) != tc.matches {
			t.Errorf("%q: got %q changed=%v matches=%v, want %q %v %v", tc.in, got, changed, got.Evaluate(ns), tc.want, tc.changed, tc.matches)
		}
	}
}
