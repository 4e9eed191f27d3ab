package diag

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// MaxRelated is how many related positions a finding keeps. The rest are
// counted (Finding.RelatedOmitted) and printed as "and N more": a CUE
// error over a value written ten thousand times stays a few lines.
const MaxRelated = 8

// Related is another place that contributes to a finding: the other side
// of a rule that compares two things (the pool an overlapping pool
// overlaps, the first of two objects of one name), or a further position
// CUE gives for an error (each conjunct of a conflict).
type Related struct {
	Pos     Pos    // where; always valid in a finding's Related
	Message string // what is there, lower case; "" when the position says it all (CUE's)
}

// String formats r as "file:line:col: message" (or the position alone).
func (r Related) String() string {
	if r.Message == "" {
		return r.Pos.String()
	}
	return r.Pos.String() + ": " + r.Message
}

// Compare orders related positions by position, then message.
func (r Related) Compare(s Related) int {
	return cmp.Or(r.Pos.Compare(s.Pos), cmp.Compare(r.Message, s.Message))
}

// Relate returns f with the related positions rs added to those it has:
// positions that are invalid or equal to f.Pos are dropped, one entry
// is kept per position (one with a message rather than one without),
// and the entries are sorted by position. Past MaxRelated, the last are
// dropped and counted in RelatedOmitted; those are not seen by a later
// Relate, so a finding's related positions are best given in one call.
func (f Finding) Relate(rs ...Related) Finding {
	all := slices.Clone(f.Related)
	for _, r := range rs {
		if r.Pos.IsValid() && r.Pos != f.Pos {
			all = append(all, r)
		}
	}
	if len(all) == 0 {
		return f
	}
	slices.SortFunc(all, func(a, b Related) int {
		// At one position, an entry with a message first: it is kept.
		return cmp.Or(a.Pos.Compare(b.Pos), cmp.Compare(noMessage(a), noMessage(b)), cmp.Compare(a.Message, b.Message))
	})
	all = slices.CompactFunc(all, func(a, b Related) bool { return a.Pos == b.Pos })
	if n := len(all) - MaxRelated; n > 0 {
		f.RelatedOmitted += n
		all = all[:MaxRelated:MaxRelated]
	}
	f.Related = all
	return f
}

func noMessage(r Related) int {
	if r.Message == "" {
		return 1
	}
	return 0
}

// At is a related position with a message, for the rules: Related{pos,
// fmt.Sprintf(format, args...)}.
func At(pos Pos, format string, args ...any) Related {
	return Related{Pos: pos, Message: fmt.Sprintf(format, args...)}
}

// relatedLines formats f's related positions as text output prints them
// under the finding, as `cue vet` does: indented four spaces, one a line,
// then "and N more"; escaped and clipped like the finding's own line.
func (f Finding) relatedLines() []string {
	var lines []string
	for _, r := range f.Related {
		lines = append(lines, "    "+Escape(clip(r.String())))
	}
	if f.RelatedOmitted > 0 {
		lines = append(lines, fmt.Sprintf("    and %d more", f.RelatedOmitted))
	}
	return lines
}

// compareRelated orders two lists of related positions element by
// element, then by length and the number omitted.
func compareRelated(f, g Finding) int {
	return cmp.Or(slices.CompareFunc(f.Related, g.Related, Related.Compare), cmp.Compare(f.RelatedOmitted, g.RelatedOmitted))
}

// RelativeTo rewrites the absolute file names of the findings and of
// their related positions that lie below dir as paths relative to dir:
// code scanning and workflow annotations name files relative to the
// repository, where CI runs. l itself is not changed; the related
// positions stay sorted.
func (l List) RelativeTo(dir string) List {
	rel := func(p *Pos) {
		if !filepath.IsAbs(p.File) {
			return
		}
		if r, err := filepath.Rel(dir, p.File); err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			p.File = r
		}
	}
	out := slices.Clone(l)
	for i := range out {
		f := &out[i]
		rel(&f.Pos)
		if len(f.Related) > 0 {
			// Sorted again, as Relate keeps them.
			rs := slices.Clone(f.Related)
			for j := range rs {
				rel(&rs[j].Pos)
			}
			f.Related = nil
			*f = f.Relate(rs...)
		}
	}
	return out
}
