// Package changelog reads the project's CHANGELOG.md, strictly, in the form
// of Keep a Changelog 1.1.0 (https://keepachangelog.com/en/1.1.0/):
//
//	# Changelog
//	...
//	## [Unreleased]
//	### Added
//	- ...
//	## [1.2.0] - 2026-11-28
//	### Fixed
//	- ...
//	[unreleased]: https://github.com/o/r/compare/v1.2.0...HEAD
//	[1.2.0]: https://github.com/o/r/releases/tag/v1.2.0
//
// It is what `make release` takes the version and the release notes from,
// and what the tests that keep the examples' versions in step read, so a
// changelog it accepts names one unambiguous newest release. Every error
// names the line: CHANGELOG.md:LINE: what is wrong and what to write.
package changelog

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// MaxSize bounds the file read: a changelog is text a person writes.
const MaxSize = 4 << 20

// Sections are Keep a Changelog's names of changes, in its order.
var Sections = []string{"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}

// Log is a parsed changelog.
type Log struct {
	// Unreleased is the [Unreleased] section (its Line is 0 when the file
	// has none).
	Unreleased Release
	// Releases, newest first (the file's order, which Parse checks).
	Releases []Release
	// Links maps a lower-cased link label to its URL.
	Links map[string]string
}

// Release is one "## [VERSION] - DATE" section.
type Release struct {
	Version Version // zero for Unreleased
	Date    string  // YYYY-MM-DD; empty for Unreleased
	Line    int     // of its heading
	// Body is the section's text after the heading, trailing blank lines
	// cut: its "### Added" etc. subsections and their entries.
	Body string
	// Entries counts its list items ("- " lines).
	Entries int
}

// Version is a semantic version (https://semver.org/ 2.0.0), written
// without the leading v in the changelog.
type Version struct {
	Major, Minor, Patch uint64
	Pre                 []string // dot-separated pre-release identifiers
	Build               string   // build metadata: ignored in ordering
}

var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// ParseVersion parses a semantic version without a leading v.
func ParseVersion(s string) (Version, error) {
	m := semverRE.FindStringSubmatch(s)
	if m == nil {
		return Version{}, fmt.Errorf("%q is not a semantic version (MAJOR.MINOR.PATCH[-PRE][+BUILD], no leading v, no leading zeros)", s)
	}
	var v Version
	var err error
	for i, p := range []*uint64{&v.Major, &v.Minor, &v.Patch} {
		if *p, err = strconv.ParseUint(m[i+1], 10, 64); err != nil {
			return Version{}, fmt.Errorf("%q: %v", s, err)
		}
	}
	if m[4] != "" {
		v.Pre = strings.Split(m[4], ".")
	}
	v.Build = m[5]
	return v, nil
}

// String is the version as the changelog writes it (no v).
func (v Version) String() string {
	s := fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
	if len(v.Pre) > 0 {
		s += "-" + strings.Join(v.Pre, ".")
	}
	if v.Build != "" {
		s += "+" + v.Build
	}
	return s
}

// Tag is the version as a git tag and as the binaries print it: v1.2.3.
func (v Version) Tag() string { return "v" + v.String() }

// Compare orders versions by semver's precedence (rule 11): numbers, then
// a pre-release before its release, identifiers compared one by one,
// numeric below alphanumeric, numbers numerically, a shorter list first
// when all before are equal. Build metadata does not count.
func Compare(a, b Version) int {
	for _, d := range [][2]uint64{{a.Major, b.Major}, {a.Minor, b.Minor}, {a.Patch, b.Patch}} {
		if d[0] != d[1] {
			if d[0] < d[1] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(a.Pre) == 0 && len(b.Pre) == 0:
		return 0
	case len(a.Pre) == 0:
		return 1
	case len(b.Pre) == 0:
		return -1
	}
	for i := 0; i < len(a.Pre) && i < len(b.Pre); i++ {
		if c := compareIdent(a.Pre[i], b.Pre[i]); c != 0 {
			return c
		}
	}
	switch {
	case len(a.Pre) < len(b.Pre):
		return -1
	case len(a.Pre) > len(b.Pre):
		return 1
	}
	return 0
}

func compareIdent(a, b string) int {
	na, errA := strconv.ParseUint(a, 10, 64)
	nb, errB := strconv.ParseUint(b, 10, 64)
	switch {
	case errA == nil && errB == nil:
		switch {
		case na < nb:
			return -1
		case na > nb:
			return 1
		}
		return 0
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// Error is a problem at a line of the changelog.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

var (
	releaseRE = regexp.MustCompile(`^## \[([^\]]*)\](.*)$`)
	dateRE    = regexp.MustCompile(`^ - (\d{4}-\d{2}-\d{2})( \[YANKED\])?$`)
	linkRE    = regexp.MustCompile(`^\[([^\]]+)\]: (\S+)$`)
)

// Parse reads a changelog; file names it in errors. It returns the first
// error found, in line order (the file is short and each error says what
// to write instead).
func Parse(file string, data []byte) (*Log, error) {
	if len(data) > MaxSize {
		return nil, &Error{file, 1, fmt.Sprintf("%d bytes: a changelog of at most %d is read", len(data), MaxSize)}
	}
	errf := func(line int, format string, args ...any) error {
		return &Error{file, line, fmt.Sprintf(format, args...)}
	}
	if i := bytes.IndexByte(data, '\r'); i >= 0 {
		return nil, errf(bytes.Count(data[:i], []byte("\n"))+1, "a carriage return: write the file with LF line endings only")
	}
	log := &Log{Links: map[string]string{}}
	linkLine := map[string]int{}
	var cur *Release // the section being read
	curUnreleased := false
	var body []string // its lines
	var sub string    // the current ### subsection
	seenSub := map[string]bool{}
	inLinks := false
	finish := func() {
		if cur == nil {
			return
		}
		for len(body) > 0 && strings.TrimSpace(body[len(body)-1]) == "" {
			body = body[:len(body)-1]
		}
		for len(body) > 0 && strings.TrimSpace(body[0]) == "" {
			body = body[1:]
		}
		cur.Body = strings.Join(body, "\n")
		if curUnreleased {
			log.Unreleased = *cur
		} else {
			log.Releases = append(log.Releases, *cur)
		}
		cur, body, sub, curUnreleased = nil, nil, "", false
		clear(seenSub)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), MaxSize)
	n := 0
	title := false
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.TrimRight(line, " \t") != line {
			return nil, errf(n, "trailing whitespace")
		}
		switch {
		case !title:
			if line != "# Changelog" {
				return nil, errf(n, "the first line must be \"# Changelog\", not %q", line)
			}
			title = true
			continue
		case inLinks:
			if line == "" {
				continue
			}
			m := linkRE.FindStringSubmatch(line)
			if m == nil {
				return nil, errf(n, "%q after the link references: the links come last, one \"[label]: URL\" a line", line)
			}
			if err := addLink(log, linkLine, m[1], m[2], n, errf); err != nil {
				return nil, err
			}
			continue
		}
		if m := linkRE.FindStringSubmatch(line); m != nil {
			finish()
			inLinks = true
			if err := addLink(log, linkLine, m[1], m[2], n, errf); err != nil {
				return nil, err
			}
			continue
		}
		if strings.HasPrefix(line, "## ") {
			finish()
			m := releaseRE.FindStringSubmatch(line)
			if m == nil {
				return nil, errf(n, "%q: a release heading is \"## [VERSION] - YYYY-MM-DD\" or \"## [Unreleased]\"", line)
			}
			if m[1] == "Unreleased" {
				if m[2] != "" {
					return nil, errf(n, "\"## [Unreleased]\" takes no date")
				}
				if log.Unreleased.Line != 0 {
					return nil, errf(n, "a second [Unreleased] section (the first is at line %d)", log.Unreleased.Line)
				}
				if len(log.Releases) > 0 {
					return nil, errf(n, "[Unreleased] must come before every release (it is above the newest)")
				}
				log.Unreleased.Line = n
				cur, curUnreleased = &Release{Line: n}, true
				continue
			}
			v, err := ParseVersion(m[1])
			if err != nil {
				return nil, errf(n, "%v", err)
			}
			dm := dateRE.FindStringSubmatch(m[2])
			if dm == nil {
				return nil, errf(n, "%q: after the version write \" - YYYY-MM-DD\" (ISO 8601), optionally \" [YANKED]\"", line)
			}
			if _, err := time.Parse(time.DateOnly, dm[1]); err != nil {
				return nil, errf(n, "date %s is not a calendar date (YYYY-MM-DD)", dm[1])
			}
			if len(log.Releases) > 0 {
				prev := log.Releases[len(log.Releases)-1]
				switch c := Compare(v, prev.Version); {
				case c == 0:
					return nil, errf(n, "version %s again (also at line %d)", v, prev.Line)
				case c > 0:
					return nil, errf(n, "version %s is newer than %s above it (line %d): releases go newest first", v, prev.Version, prev.Line)
				}
				if dm[1] > prev.Date {
					return nil, errf(n, "%s is dated %s, after %s's %s above it: releases go newest first", v, dm[1], prev.Version, prev.Date)
				}
			}
			cur = &Release{Version: v, Date: dm[1], Line: n}
			continue
		}
		if cur == nil {
			// The preamble between the title and the first section.
			if strings.HasPrefix(line, "#") {
				return nil, errf(n, "%q before the first release section: only the title is a heading there", line)
			}
			continue
		}
		if strings.HasPrefix(line, "### ") {
			name := strings.TrimPrefix(line, "### ")
			if !isSection(name) {
				return nil, errf(n, "subsection %q: Keep a Changelog's are %s", name, strings.Join(Sections, ", "))
			}
			if seenSub[name] {
				return nil, errf(n, "a second \"### %s\" in this release", name)
			}
			seenSub[name] = true
			sub = name
		} else if strings.HasPrefix(line, "#") {
			return nil, errf(n, "%q: inside a release only \"### Added\" etc. are headings", line)
		} else if strings.HasPrefix(line, "- ") {
			if sub == "" {
				return nil, errf(n, "an entry outside a subsection: put it under one of ### %s", strings.Join(Sections, ", ### "))
			}
			cur.Entries++
		} else if line != "" && sub == "" {
			return nil, errf(n, "text before the first subsection of the release: start with ### %s", strings.Join(Sections, ", ### "))
		}
		body = append(body, line)
	}
	if err := sc.Err(); err != nil {
		return nil, errf(n+1, "%v", err)
	}
	finish()
	if !title {
		return nil, errf(1, "empty: the first line must be \"# Changelog\"")
	}
	if log.Unreleased.Line == 0 {
		return nil, errf(n, "no \"## [Unreleased]\" section: keep one above the releases, empty when nothing is pending")
	}
	if len(log.Releases) == 0 {
		return nil, errf(n, "no release: write \"## [VERSION] - YYYY-MM-DD\" below [Unreleased]")
	}
	if _, ok := log.Links["unreleased"]; !ok {
		return nil, errf(log.Unreleased.Line, "[Unreleased] has no link reference: add \"[unreleased]: <compare URL>...HEAD\" at the end")
	}
	for _, r := range log.Releases {
		if r.Entries == 0 {
			return nil, errf(r.Line, "release %s lists no change: write its entries under ### %s", r.Version, strings.Join(Sections, ", ### "))
		}
		if _, ok := log.Links[strings.ToLower(r.Version.String())]; !ok {
			return nil, errf(r.Line, "release %s has no link reference: add \"[%s]: <URL of its tag or compare view>\" at the end", r.Version, r.Version)
		}
	}
	for label, line := range linkLine {
		if label == "unreleased" {
			continue
		}
		if _, ok := log.find(label); !ok {
			return nil, errf(line, "link reference [%s] names no release of this changelog", label)
		}
	}
	return log, nil
}

func isSection(name string) bool {
	for _, s := range Sections {
		if s == name {
			return true
		}
	}
	return false
}

func addLink(log *Log, lines map[string]int, label, url string, n int, errf func(int, string, ...any) error) error {
	key := strings.ToLower(label)
	if prev, dup := lines[key]; dup {
		return errf(n, "link reference [%s] again (also at line %d)", label, prev)
	}
	if !strings.HasPrefix(url, "https://") {
		return errf(n, "link reference [%s]: %q is not an https URL", label, url)
	}
	lines[key] = n
	log.Links[key] = url
	return nil
}

func (log *Log) find(label string) (Release, bool) {
	for _, r := range log.Releases {
		if strings.ToLower(r.Version.String()) == label {
			return r, true
		}
	}
	return Release{}, false
}

// Newest is the newest release.
func (log *Log) Newest() Release { return log.Releases[0] }

// Find returns the release of version v (with or without its leading v).
func (log *Log) Find(v string) (Release, error) {
	want, err := ParseVersion(strings.TrimPrefix(v, "v"))
	if err != nil {
		return Release{}, err
	}
	for _, r := range log.Releases {
		if r.Version.String() == want.String() {
			return r, nil
		}
	}
	var have []string
	for _, r := range log.Releases {
		have = append(have, r.Version.Tag())
	}
	return Release{}, fmt.Errorf("the changelog has no release %s (it lists %s)", want.Tag(), strings.Join(have, ", "))
}

// Notes is a release's notes: its heading and section, then the link
// reference of its version.
func (log *Log) Notes(r Release) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## [%s] - %s\n\n%s\n", r.Version, r.Date, r.Body)
	if url, ok := log.Links[strings.ToLower(r.Version.String())]; ok {
		fmt.Fprintf(&b, "\n[%s]: %s\n", r.Version, url)
	}
	return b.String()
}

// ForRelease is the release `make release` builds: the one named by want
// (v1.2.3 or 1.2.3), or the newest when want is empty. While [Unreleased]
// lists changes, building the newest release would ship a changelog that
// says more is in it than is, and its notes would leave those changes out,
// so that is refused unless allowUnreleased; an older release named by want
// is refused the same way, since its binaries would be built from a tree
// that holds the unreleased changes too.
func (log *Log) ForRelease(file, want string, allowUnreleased bool) (Release, error) {
	r := log.Newest()
	if want != "" {
		var err error
		if r, err = log.Find(want); err != nil {
			return Release{}, fmt.Errorf("%s: %w", file, err)
		}
	}
	if log.Unreleased.Entries > 0 && !allowUnreleased {
		return Release{}, &Error{file, log.Unreleased.Line, fmt.Sprintf(
			"[Unreleased] lists %d change(s): move them into a release section (## [X.Y.Z] - YYYY-MM-DD, with its link reference) to release them, or build %s without them with ALLOW_UNRELEASED=1",
			log.Unreleased.Entries, r.Version.Tag())}
	}
	return r, nil
}
