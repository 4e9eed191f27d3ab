package diag

import (
	"bytes"
	"strings"
	"testing"
)

func TestEscape(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"plain − text", "plain − text"},
		{"red \x1b[31mX\x1b[0m", `red \x1b[31mX\x1b[0m`},
		{"title \x1b]0;pwned\x07", `title \x1b]0;pwned\a`},
		{"bidi \u202eevil", `bidi \u202eevil`},
		{"bad \xff utf8", `bad \xff utf8`},
		{"c1 \u009b2J", `c1 \u009b2J`},
		{"line\nbreak", `line\nbreak`},
	} {
		if got := Escape(tt.in); got != tt.want {
			t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestExcerpt(t *testing.T) {
	if got := Excerpt("short"); got != `"short"` {
		t.Errorf("Excerpt(short) = %s", got)
	}
	long := strings.Repeat("root:x:0:0:", 100)
	got := Excerpt(long)
	if !strings.HasSuffix(got, "… (1100 bytes)") || len(got) > MaxExcerpt+30 {
		t.Errorf("Excerpt of 1100 bytes = %s", got)
	}
	if got := Excerpt("\x1b[2J"); got != `"\x1b[2J"` {
		t.Errorf("Excerpt(ESC) = %s", got)
	}
}

// TestEscaper: control sequences from the input are escaped, the
// colours text output writes itself pass, and a character split across
// writes stays whole.
func TestEscaper(t *testing.T) {
	var b bytes.Buffer
	e := NewEscaper(&b)
	e.Write([]byte("\x1b[1;31merror\x1b[0m: pod \x1b]8;;http://x\x07link\x1b[2J\tok\n"))
	e.Write([]byte("hidden \x1b[8mtext\x1b[0m\n"))
	e.Write([]byte("split \xe2\x88"))
	e.Write([]byte("\x92 done\n"))
	want := "\x1b[1;31merror\x1b[0m: pod \\x1b]8;;http://x\\alink\\x1b[2J\tok\nhidden \\x1b[8mtext\x1b[0m\nsplit − done\n"
	if b.String() != want {
		t.Errorf("got  %q\nwant %q", b.String(), want)
	}
}

func TestFindingStringEscapes(t *testing.T) {
	f := Finding{Rule: "r", Severity: Error, Pos: Pos{File: "a\x1b.yaml", Line: 1}, Message: "name \x1b[31m" + strings.Repeat("x", 3000)}
	s := f.String()
	if strings.ContainsRune(s, 0x1b) || !strings.Contains(s, `a\x1b.yaml`) || !strings.Contains(s, "more bytes)") || len(s) > 2200 {
		t.Errorf("unsafe or unbounded: %.200q", s)
	}
}
