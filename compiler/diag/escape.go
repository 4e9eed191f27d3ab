package diag

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxExcerpt is how many characters of the user's content an Excerpt
// shows.
const MaxExcerpt = 40

// maxMessage bounds a finding's message as printed: whatever a message
// quotes, a finding stays a line, not a file.
const maxMessage = 2000

// Excerpt quotes s for a message about the user's content: at most
// MaxExcerpt characters, control characters and invalid UTF-8 escaped,
// and the length of what was cut. A file's content is never echoed beyond
// this.
func Excerpt(s string) string {
	if utf8.RuneCountInString(s) <= MaxExcerpt {
		return strconv.Quote(s)
	}
	cut, n := 0, 0
	for i := range s {
		if n == MaxExcerpt {
			cut = i
			break
		}
		n++
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(s[:cut]), len(s))
}

// unsafeRune reports whether r must not reach a terminal as it is: C0 and
// C1 control characters (ESC starts a terminal escape sequence), DEL, and
// the bidirectional controls that reorder what a reader sees.
func unsafeRune(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
}

// Escape returns s with every control character, bidirectional control
// and invalid UTF-8 byte written as a Go escape (\x1b, \u202e), and the
// rest as it is: what text output prints of anything the user wrote, so
// that no input can move the cursor, retitle the terminal or hide text.
func Escape(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
			q := strconv.QuoteRuneToASCII(r) // '\x1b', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// clip bounds a message as printed.
func clip(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d more bytes)", s[:cut], len(s)-cut)
}

// An Escaper writes to W what it is given with Escape applied, except
// newlines and tabs, and the colour sequences that text output with
// --color writes itself (see sgrEnd). It is the last line of
// defence: whatever a name or message holds, nothing written through it
// can move the cursor, clear the screen, retitle the terminal or write
// a hyperlink. A UTF-8 character split across two writes is kept whole.
type Escaper struct {
	W       io.Writer
	partial []byte // the start of a UTF-8 character the last write ended in
}

// NewEscaper returns an Escaper writing to w.
func NewEscaper(w io.Writer) *Escaper { return &Escaper{W: w} }

// Unwrap returns the writer under e, so that a caller can tell a terminal.
func (e *Escaper) Unwrap() io.Writer { return e.W }

func (e *Escaper) Write(p []byte) (int, error) {
	n := len(p)
	if len(e.partial) > 0 {
		p = append(e.partial, p...)
		e.partial = nil
	}
	// Keep back an incomplete UTF-8 character at the end for the next write.
	if i := lastRuneStart(p); i >= 0 && !utf8.FullRune(p[i:]) && len(p)-i < utf8.UTFMax {
		e.partial = append([]byte(nil), p[i:]...)
		p = p[:i]
	}
	var b strings.Builder
	s := string(p)
	for i := 0; i < len(s); {
		if s[i] == 0x1b {
			if j := sgrEnd(s[i:]); j > 0 {
				b.WriteString(s[i : i+j])
				i += j
				continue
			}
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	if _, err := io.WriteString(e.W, b.String()); err != nil {
		return 0, err
	}
	return n, nil
}

// lastRuneStart is the index of the last byte of p that starts a UTF-8
// character, looking back at most UTFMax bytes; -1 if none.
func lastRuneStart(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			return i
		}
	}
	return -1
}

// sgrEnd returns the length of the colour sequence s starts with, or 0:
// ESC [ params m, each param 0 (reset), 1 (bold), 30 to 37 or 39 (a
// foreground colour), which is all text output writes. Other SGR
// parameters (8 conceals text) are escaped like any other control.
func sgrEnd(s string) int {
	if len(s) < 3 || s[1] != '[' {
		return 0
	}
	end := strings.IndexByte(s, 'm')
	if end < 0 || end > 16 {
		return 0
	}
	for _, p := range strings.Split(s[2:end], ";") {
		switch {
		case p == "0" || p == "1" || p == "39":
		case len(p) == 2 && p[0] == '3' && p[1] >= '0' && p[1] <= '7':
		default:
			return 0
		}
	}
	return end + 1
}

// Thousands writes n with thousands separators, for messages: 1,000.
func Thousands(n int) string {
	if n < 0 {
		return "-" + Thousands(-n)
	}
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
