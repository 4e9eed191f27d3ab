package diag

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRelate(t *testing.T) {
	primary := Pos{File: "a.cue", Line: 5, Col: 3}
	p := func(file string, line, col int) Pos { return Pos{File: file, Line: line, Col: col} }
	many := func(n int) []Related {
		var rs []Related
		for i := n; i > 0; i-- { // given in reverse: kept in order
			rs = append(rs, Related{Pos: p("b.cue", i, 1)})
		}
		return rs
	}
	sorted := func(rs []Related) []Related {
		out := slices.Clone(rs)
		slices.SortFunc(out, Related.Compare)
		return out
	}
	for _, tc := range []struct {
		name    string
		have    []Related // already on the finding
		add     []Related
		want    []Related
		omitted int
	}{
		{name: "none", add: nil, want: nil},
		{name: "one", add: []Related{{p("b.cue", 2, 1), "pool \"a\""}}, want: []Related{{p("b.cue", 2, 1), "pool \"a\""}}},
		{name: "invalid and primary dropped",
			add:  []Related{{Pos{}, "nowhere"}, {primary, ""}, {primary, "the same place"}, {Pos{Line: 3}, "no file"}},
			want: nil},
		{name: "sorted by file, line, column",
			add:  []Related{{p("b.cue", 1, 1), ""}, {p("a.cue", 9, 1), ""}, {p("a.cue", 5, 1), ""}, {p("a.cue", 5, 2), ""}},
			want: []Related{{p("a.cue", 5, 1), ""}, {p("a.cue", 5, 2), ""}, {p("a.cue", 9, 1), ""}, {p("b.cue", 1, 1), ""}}},
		{name: "one entry a position, the one with a message",
			add:  []Related{{p("b.cue", 2, 1), ""}, {p("b.cue", 2, 1), "pool \"a\""}, {p("b.cue", 2, 1), ""}},
			want: []Related{{p("b.cue", 2, 1), "pool \"a\""}}},
		{name: "two messages at a position: the first in order",
			add:  []Related{{p("b.cue", 2, 1), "z"}, {p("b.cue", 2, 1), "m"}},
			want: []Related{{p("b.cue", 2, 1), "m"}}},
		{name: "merged with those it has",
			have: []Related{{p("c.cue", 1, 1), "later"}},
			add:  []Related{{p("b.cue", 1, 1), "earlier"}, {p("c.cue", 1, 1), "later"}},
			want: []Related{{p("b.cue", 1, 1), "earlier"}, {p("c.cue", 1, 1), "later"}}},
		{name: "capped, the first kept", add: many(MaxRelated + 3), want: sorted(many(MaxRelated)), omitted: 3},
		{name: "at the cap", add: many(MaxRelated), want: sorted(many(MaxRelated))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Finding{Rule: "r", Severity: Error, Pos: primary, Message: "m", Related: tc.have}
			before := fmt.Sprint(tc.have)
			g := f.Relate(tc.add...)
			if diff := cmp.Diff(tc.want, g.Related); diff != "" {
				t.Errorf("Related (-want +got):\n%s", diff)
			}
			if g.RelatedOmitted != tc.omitted {
				t.Errorf("RelatedOmitted = %d, want %d", g.RelatedOmitted, tc.omitted)
			}
			if fmt.Sprint(f.Related) != before {
				t.Errorf("Relate changed the finding it was called on: %v", f.Related)
			}
		})
	}
}

// TestRelatedOutput shows a two-sided finding and a CUE error with more
// positions than MaxRelated in every output form.
func TestRelatedOutput(t *testing.T) {
	overlap := Finding{Rule: "pool-overlap", Severity: Error, Path: "cluster.pools.b.cidr", Pos: Pos{"a.cue", 9, 5},
		Message: `pool "b" (10.0.0.0/16) overlaps pool "a" (10.0.0.0/8)`}.Relate(At(Pos{"a.cue", 4, 9}, "pool %q (%s)", "a", "10.0.0.0/8"))
	cue := Finding{Rule: "schema", Severity: Error, Path: "cluster.vxlan.vni", Pos: Pos{"b.cue", 1, 1}, Message: "conflicting values 1 and 2"}
	var rs []Related
	for i := 2; i <= MaxRelated+3; i++ {
		rs = append(rs, Related{Pos: Pos{"b.cue", i, 1}})
	}
	cue = cue.Relate(rs...)
	// A message quoting hostile input is escaped on its own line too.
	hostile := Finding{Rule: "r", Severity: Warning, Pos: Pos{"c.cue", 1, 1}, Message: "m"}.Relate(At(Pos{"c.cue", 2, 1}, "name \x1b[2J"))
	l := List{cue, hostile, overlap}
	l.Sort()

	var text bytes.Buffer
	if err := l.WriteText(&text, false); err != nil {
		t.Fatal(err)
	}
	want := `a.cue:9:5: error[pool-overlap]: cluster.pools.b.cidr: pool "b" (10.0.0.0/16) overlaps pool "a" (10.0.0.0/8)
    a.cue:4:9: pool "a" (10.0.0.0/8)
b.cue:1:1: error[schema]: cluster.vxlan.vni: conflicting values 1 and 2
    b.cue:2:1
    b.cue:3:1
    b.cue:4:1
    b.cue:5:1
    b.cue:6:1
    b.cue:7:1
    b.cue:8:1
    b.cue:9:1
    and 2 more
c.cue:1:1: warning[r]: m
    c.cue:2:1: name \x1b[2J
`
	if diff := cmp.Diff(want, text.String()); diff != "" {
		t.Errorf("text (-want +got):\n%s", diff)
	}

	var js bytes.Buffer
	if err := l[:2].WriteJSON(&js, nil); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Findings []struct {
			Pos     string
			Related []struct {
				Pos, File, Message string
				Line, Column       int
			}
			RelatedOmitted int
		}
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if r := got.Findings[0].Related; len(r) != 1 || r[0].Pos != "a.cue:4:9" || r[0].File != "a.cue" || r[0].Line != 4 || r[0].Column != 9 || r[0].Message != `pool "a" (10.0.0.0/8)` {
		t.Errorf("JSON related of pool-overlap = %+v", r)
	}
	if f := got.Findings[1]; len(f.Related) != MaxRelated || f.RelatedOmitted != 2 || f.Related[0].Message != "" {
		t.Errorf("JSON related of the CUE error = %+v", f)
	}
	if !strings.Contains(js.String(), `"related": [`) || strings.Count(js.String(), `"message"`) != 3 {
		t.Errorf("JSON:\n%s", js.String())
	}

	var sarif bytes.Buffer
	if err := l[:2].WriteSARIF(&sarif, Tool{Name: "t"}, nil); err != nil {
		t.Fatal(err)
	}
	var log struct {
		Runs []struct {
			Results []struct {
				RelatedLocations []struct {
					ID               *int
					PhysicalLocation struct {
						ArtifactLocation struct{ URI string }
						Region           struct{ StartLine, StartColumn int }
					}
					Message *struct{ Text string }
				}
				Properties map[string]int
			}
		}
	}
	if err := json.Unmarshal(sarif.Bytes(), &log); err != nil {
		t.Fatal(err)
	}
	res := log.Runs[0].Results
	if r := res[0].RelatedLocations; len(r) != 1 || *r[0].ID != 0 || r[0].PhysicalLocation.ArtifactLocation.URI != "a.cue" ||
		r[0].PhysicalLocation.Region.StartLine != 4 || r[0].PhysicalLocation.Region.StartColumn != 9 || r[0].Message.Text != `pool "a" (10.0.0.0/8)` {
		t.Errorf("SARIF relatedLocations = %+v", r)
	}
	if r := res[1].RelatedLocations; len(r) != MaxRelated || *r[MaxRelated-1].ID != MaxRelated-1 || r[0].Message != nil || res[1].Properties["relatedOmitted"] != 2 {
		t.Errorf("SARIF relatedLocations of the CUE error = %+v, properties %v", r, res[1].Properties)
	}
	if res[0].Properties != nil {
		t.Errorf("SARIF properties without omitted positions: %v", res[0].Properties)
	}

	var gh bytes.Buffer
	if err := l.WriteGitHub(&gh); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(gh.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("-o github wrote %d lines, want one a finding:\n%s", len(lines), gh.String())
	}
	if want := `::error file=a.cue,line=9,col=5,title=hnsplan pool-overlap::cluster.pools.b.cidr: pool "b" (10.0.0.0/16) overlaps pool "a" (10.0.0.0/8)%0A    a.cue:4:9: pool "a" (10.0.0.0/8)`; lines[0] != want {
		t.Errorf("-o github:\n got %s\nwant %s", lines[0], want)
	}
	if !strings.HasSuffix(lines[1], "%0A    b.cue:9:1%0A    and 2 more") {
		t.Errorf("-o github of the CUE error: %s", lines[1])
	}
}

// TestRelatedSort: findings equal but for their related positions stay
// apart and in one order; equal ones are merged.
func TestRelatedSort(t *testing.T) {
	base := Finding{Rule: "r", Severity: Error, Pos: Pos{"a.cue", 1, 1}, Message: "m"}
	x := base.Relate(Related{Pos: Pos{"a.cue", 3, 1}})
	y := base.Relate(Related{Pos: Pos{"a.cue", 2, 1}})
	for _, l := range []List{{x, y, base, x}, {base, x, y, y}} {
		l.Sort()
		if diff := cmp.Diff(List{base, y, x}, l); diff != "" {
			t.Errorf("sorted (-want +got):\n%s", diff)
		}
	}
}

func TestRelativeTo(t *testing.T) {
	dir := filepath.FromSlash("/repo")
	abs := func(s string) string { return filepath.Join(dir, filepath.FromSlash(s)) }
	if !filepath.IsAbs(dir) {
		t.Skip("/repo is not an absolute path here")
	}
	l := List{Finding{Rule: "r", Severity: Error, Pos: Pos{abs("intent/a.cue"), 1, 1}, Message: "m"}.Relate(
		Related{Pos: Pos{abs("intent/b.cue"), 2, 1}}, Related{Pos: Pos{filepath.FromSlash("/elsewhere/c.cue"), 3, 1}}, Related{Pos: Pos{"d.cue", 4, 1}})}
	got := l.RelativeTo(dir)
	want := []string{filepath.FromSlash("intent/a.cue"), filepath.FromSlash("/elsewhere/c.cue"), "d.cue", filepath.FromSlash("intent/b.cue")}
	files := []string{got[0].Pos.File}
	for _, r := range got[0].Related {
		files = append(files, r.Pos.File)
	}
	if diff := cmp.Diff(want, files); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if l[0].Pos.File != abs("intent/a.cue") || l[0].Related[1].Pos.File != abs("intent/b.cue") {
		t.Errorf("RelativeTo changed its receiver: %+v", l[0])
	}
}
