// Package diag holds findings: what the loader, the constraint rules and the
// compilers report about an intent, each with a rule id, a severity and the
// file:line:col of its cause. Findings accumulate; a run reports all of them.
package diag

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Severity is how bad a finding is. The zero Severity is invalid.
type Severity int

const (
	Info Severity = iota + 1
	Warning
	Error
)

var severityNames = [...]string{Info: "info", Warning: "warning", Error: "error"}

func (s Severity) String() string {
	if s < Info || s > Error {
		return fmt.Sprintf("Severity(%d)", int(s))
	}
	return severityNames[s]
}

// ParseSeverity parses "error", "warning" or "info".
func ParseSeverity(s string) (Severity, error) {
	for i, n := range severityNames {
		if n != "" && n == s {
			return Severity(i), nil
		}
	}
	return 0, fmt.Errorf("unknown severity %q (want error, warning or info)", s)
}

func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

func (s *Severity) UnmarshalText(b []byte) error {
	v, err := ParseSeverity(string(b))
	*s = v
	return err
}

// Pos is a position in an input file. Line and Col count from 1; the zero
// Pos means "no position".
type Pos struct {
	File string
	Line int
	Col  int
}

// IsValid reports whether p names a file.
func (p Pos) IsValid() bool { return p.File != "" }

// String formats p as file:line:col, dropping the parts that are unknown.
func (p Pos) String() string {
	switch {
	case !p.IsValid():
		return ""
	case p.Line == 0:
		return p.File
	case p.Col == 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Compare orders positions by file, line and column; invalid positions last.
func (p Pos) Compare(q Pos) int {
	if p.IsValid() != q.IsValid() {
		if p.IsValid() {
			return -1
		}
		return 1
	}
	return cmp.Or(cmp.Compare(p.File, q.File), cmp.Compare(p.Line, q.Line), cmp.Compare(p.Col, q.Col))
}

// A Finding is one thing a rule found.
type Finding struct {
	Rule     string   // stable rule id: "schema", "cidr-host-bits", ...
	Severity Severity //
	Node     string   // the node the finding is about, if any
	Path     string   // data path: "cluster.pools.default.cidr" or "spec.ingress[0].ports[1]"
	Pos      Pos      // where the cause is written
	Message  string   // what is wrong and what to do; lower case, no trailing period

	// Related are the other places that contribute, sorted, without Pos
	// and at most MaxRelated of them; set them with Relate.
	Related []Related
	// RelatedOmitted counts the related positions past MaxRelated.
	RelatedOmitted int
}

// String formats f as one line: "file:line:col: error[rule]: path: message".
// Control characters anywhere in it are escaped (Escape), and a message
// longer than 2,000 bytes is cut: it is safe to print to a terminal. The
// related positions are not in it (WriteText prints them below).
func (f Finding) String() string {
	var b strings.Builder
	if f.Pos.IsValid() {
		b.WriteString(f.Pos.String())
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "%s[%s]: ", f.Severity, f.Rule)
	if f.Path != "" {
		b.WriteString(f.Path)
		b.WriteString(": ")
	}
	b.WriteString(clip(f.Message))
	return Escape(b.String())
}

// Compare orders findings by position, then rule, path and message (then
// the rest, related positions last), so that output is the same from run
// to run. It is 0 only for equal findings.
func (f Finding) Compare(g Finding) int {
	return cmp.Or(f.Pos.Compare(g.Pos), cmp.Compare(f.Rule, g.Rule), cmp.Compare(f.Node, g.Node),
		cmp.Compare(f.Path, g.Path), cmp.Compare(f.Message, g.Message), cmp.Compare(g.Severity, f.Severity),
		compareRelated(f, g))
}

// List is a list of findings.
type List []Finding

// Add appends a finding.
func (l *List) Add(f Finding) { *l = append(*l, f) }

// Errorf appends an error finding.
func (l *List) Errorf(rule string, pos Pos, path, format string, args ...any) {
	l.Add(Finding{Rule: rule, Severity: Error, Pos: pos, Path: path, Message: fmt.Sprintf(format, args...)})
}

// Sort sorts l in place (see Finding.Compare) and drops exact duplicates.
func (l *List) Sort() {
	slices.SortFunc(*l, Finding.Compare)
	*l = slices.CompactFunc(*l, func(f, g Finding) bool { return f.Compare(g) == 0 })
}

// Count returns the number of findings of severity s.
func (l List) Count(s Severity) int {
	n := 0
	for _, f := range l {
		if f.Severity == s {
			n++
		}
	}
	return n
}

// HasErrors reports whether any finding is an error.
func (l List) HasErrors() bool { return l.Count(Error) > 0 }

// Summary is "2 errors, 1 warning" (or "no findings").
func (l List) Summary() string {
	var parts []string
	for _, s := range []Severity{Error, Warning, Info} {
		if n := l.Count(s); n > 0 {
			name := s.String()
			if n > 1 {
				name += "s"
			}
			parts = append(parts, fmt.Sprintf("%d %s", n, name))
		}
	}
	if len(parts) == 0 {
		return "no findings"
	}
	return strings.Join(parts, ", ")
}

// WriteText writes one line per finding, and under it the finding's
// related positions, indented (as `cue vet` prints an error's positions):
//
//	a.cue:9:5: error[pool-overlap]: cluster.pools.b.cidr: pool "b" (10.0.0.0/16) overlaps pool "a" (10.0.0.0/8)
//	    a.cue:4:9: pool "a"
//
// With color, severities are coloured with ANSI escapes.
func (l List) WriteText(w io.Writer, color bool) error {
	for _, f := range l {
		line := f.String()
		if color {
			code := map[Severity]string{Error: "31", Warning: "33", Info: "36"}[f.Severity]
			tag := fmt.Sprintf("%s[%s]", f.Severity, f.Rule)
			line = strings.Replace(line, tag, "\x1b[1;"+code+"m"+tag+"\x1b[0m", 1)
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
		for _, r := range f.relatedLines() {
			if _, err := fmt.Fprintln(w, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// FormatVersion is the version of the JSON form of findings: it changes
// when a field changes meaning or goes away, never when one is added.
const FormatVersion = 1

// RuleDoc is what the catalog says of a rule, for machine output.
type RuleDoc struct {
	Summary, Remedy string
	// HelpURI is where the rule is documented.
	HelpURI    string
	References []string
}

// Docs looks a rule up; ok is false for a rule the catalog lacks.
type Docs func(rule string) (doc RuleDoc, ok bool)

// jsonFinding is the wire form of a finding (DESIGN §4.3): pos as
// "file:line:col", and the same apart for tools that want numbers.
type jsonFinding struct {
	Rule     string   `json:"rule"`
	Severity Severity `json:"severity"`
	Message  string   `json:"message"`
	Path     string   `json:"path,omitempty"`
	Pos      string   `json:"pos,omitempty"`
	File     string   `json:"file,omitempty"`
	Line     int      `json:"line,omitempty"`
	Column   int      `json:"column,omitempty"`
	Node     string   `json:"node,omitempty"`
	// Related and RelatedOmitted came after formatVersion 1 was set: they
	// are additions, left out when empty.
	Related        []jsonRelated `json:"related,omitempty"`
	RelatedOmitted int           `json:"relatedOmitted,omitempty"`
	Remedy         string        `json:"remedy,omitempty"`
	HelpURI        string        `json:"helpUri,omitempty"`
}

// jsonRelated is the wire form of a related position: its position as a
// finding's is written, and what is there.
type jsonRelated struct {
	Pos     string `json:"pos"`
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Message string `json:"message,omitempty"`
}

// WriteJSON writes {"formatVersion":1,"findings":[...]} with a trailing
// newline; docs (may be nil) adds each rule's remedy and reference URL. A
// finding with related positions lists them as "related":
// [{"pos","file","line","column","message"}], and "relatedOmitted" counts
// those past MaxRelated.
func (l List) WriteJSON(w io.Writer, docs Docs) error {
	out := struct {
		FormatVersion int           `json:"formatVersion"`
		Findings      []jsonFinding `json:"findings"`
	}{FormatVersion: FormatVersion, Findings: []jsonFinding{}}
	for _, f := range l {
		j := jsonFinding{Rule: f.Rule, Severity: f.Severity, Message: clip(f.Message), Path: f.Path, Pos: f.Pos.String(),
			File: f.Pos.File, Line: f.Pos.Line, Column: f.Pos.Col, Node: f.Node, RelatedOmitted: f.RelatedOmitted}
		for _, r := range f.Related {
			j.Related = append(j.Related, jsonRelated{Pos: r.Pos.String(), File: r.Pos.File, Line: r.Pos.Line, Column: r.Pos.Col, Message: clip(r.Message)})
		}
		if docs != nil {
			if d, ok := docs(f.Rule); ok {
				j.Remedy, j.HelpURI = d.Remedy, d.HelpURI
			}
		}
		out.Findings = append(out.Findings, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}
