package diag

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestListSortTextJSON(t *testing.T) {
	l := List{
		{Rule: "b", Severity: Warning, Pos: Pos{File: "b.cue", Line: 1, Col: 1}, Message: "second file"},
		{Rule: "load", Severity: Error, Message: "no position"},
		{Rule: "a", Severity: Error, Path: "cluster.x", Pos: Pos{File: "a.cue", Line: 10, Col: 2}, Message: "later line"},
		{Rule: "a", Severity: Error, Path: "cluster.x", Pos: Pos{File: "a.cue", Line: 9, Col: 5}, Message: "earlier line"},
		{Rule: "a", Severity: Error, Path: "cluster.x", Pos: Pos{File: "a.cue", Line: 9, Col: 5}, Message: "earlier line"},
		{Rule: "i", Severity: Info, Node: "win-1", Pos: Pos{File: "a.cue", Line: 9}, Message: "no column"},
	}
	l.Sort()
	var text bytes.Buffer
	if err := l.WriteText(&text, false); err != nil {
		t.Fatal(err)
	}
	want := `a.cue:9: info[i]: no column
a.cue:9:5: error[a]: cluster.x: earlier line
a.cue:10:2: error[a]: cluster.x: later line
b.cue:1:1: warning[b]: second file
error[load]: no position
`
	if diff := cmp.Diff(want, text.String()); diff != "" {
		t.Errorf("text (-want +got):\n%s", diff)
	}
	if got := l.Summary(); got != "3 errors, 1 warning, 1 info" {
		t.Errorf("Summary = %q", got)
	}
	if !l.HasErrors() || (List{l[0]}).HasErrors() {
		t.Errorf("HasErrors wrong")
	}
	var js bytes.Buffer
	if err := (List{l[0]}).WriteJSON(&js, nil); err != nil {
		t.Fatal(err)
	}
	wantJSON := `{
  "formatVersion": 1,
  "findings": [
    {
      "rule": "i",
      "severity": "info",
      "message": "no column",
      "pos": "a.cue:9",
      "file": "a.cue",
      "line": 9,
      "node": "win-1"
    }
  ]
}
`
	if diff := cmp.Diff(wantJSON, js.String()); diff != "" {
		t.Errorf("json (-want +got):\n%s", diff)
	}
	var color bytes.Buffer
	_ = (List{l[1]}).WriteText(&color, true)
	if !bytes.Contains(color.Bytes(), []byte("\x1b[1;31merror[a]\x1b[0m")) {
		t.Errorf("coloured text = %q", color.String())
	}
}

func TestParseSeverity(t *testing.T) {
	for _, s := range []Severity{Info, Warning, Error} {
		got, err := ParseSeverity(s.String())
		if err != nil || got != s {
			t.Errorf("ParseSeverity(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseSeverity("fatal"); err == nil {
		t.Error("ParseSeverity(fatal) succeeded")
	}
}
