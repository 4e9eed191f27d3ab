package changelog

import (
	"os"
	"slices"
	"strings"
	"testing"
)

const good = `# Changelog

Notes on the format.

## [Unreleased]

## [1.0.0] - 2026-12-01

### Added

- one

### Fixed

- two

## [1.0.0-rc.2] - 2026-11-30 [YANKED]

### Changed

- three

## [1.0.0-rc.1] - 2026-11-30

### Security

- four

[unreleased]: https://github.com/o/r/compare/v1.0.0...HEAD
[1.0.0]: https://github.com/o/r/compare/v1.0.0-rc.2...v1.0.0
[1.0.0-rc.2]: https://github.com/o/r/compare/v1.0.0-rc.1...v1.0.0-rc.2
[1.0.0-rc.1]: https://github.com/o/r/releases/tag/v1.0.0-rc.1
`

func TestParseGood(t *testing.T) {
	log, err := Parse("CHANGELOG.md", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range log.Releases {
		got = append(got, r.Version.Tag()+" "+r.Date)
	}
	want := []string{"v1.0.0 2026-12-01", "v1.0.0-rc.2 2026-11-30", "v1.0.0-rc.1 2026-11-30"}
	if !slices.Equal(got, want) {
		t.Errorf("releases %q, want %q", got, want)
	}
	if log.Unreleased.Line != 5 || log.Unreleased.Entries != 0 {
		t.Errorf("unreleased %+v", log.Unreleased)
	}
	if r := log.Newest(); r.Line != 7 || r.Entries != 2 || r.Body != "### Added\n\n- one\n\n### Fixed\n\n- two" {
		t.Errorf("newest %+v", r)
	}
	notes := log.Notes(log.Newest())
	wantNotes := "## [1.0.0] - 2026-12-01\n\n### Added\n\n- one\n\n### Fixed\n\n- two\n\n[1.0.0]: https://github.com/o/r/compare/v1.0.0-rc.2...v1.0.0\n"
	if notes != wantNotes {
		t.Errorf("notes:\n%s\nwant:\n%s", notes, wantNotes)
	}
}

// TestParseErrors changes the good changelog one way each and wants the
// line and the message.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"title", "# Changelog\n", "# Changes\n", `CHANGELOG.md:1: the first line must be "# Changelog"`},
		{"order", "## [1.0.0-rc.1] - 2026-11-30", "## [1.0.1] - 2026-11-30", "CHANGELOG.md:23: version 1.0.1 is newer than 1.0.0-rc.2 above it (line 17)"},
		{"pre-release before its release", "## [1.0.0] - 2026-12-01", "## [1.0.0-rc.3] - 2026-12-01", "CHANGELOG.md:7: release 1.0.0-rc.3 has no link reference"},
		{"numeric pre-release ranks below alphanumeric", "## [1.0.0-rc.2] - 2026-11-30 [YANKED]", "## [1.0.0-1] - 2026-11-30", "CHANGELOG.md:23: version 1.0.0-rc.1 is newer than 1.0.0-1 above it (line 17)"},
		{"shorter pre-release ranks first", "## [1.0.0-rc.1] - 2026-11-30", "## [1.0.0-rc.2.1] - 2026-11-30", "CHANGELOG.md:23: version 1.0.0-rc.2.1 is newer than 1.0.0-rc.2 above it"},
		{"numbers compare as numbers", "## [1.0.0-rc.2] - 2026-11-30 [YANKED]", "## [1.0.0-rc.10] - 2026-11-30", "CHANGELOG.md:17: release 1.0.0-rc.10 has no link reference"},
		{"duplicate", "## [1.0.0-rc.1] - 2026-11-30", "## [1.0.0-rc.2] - 2026-11-30", "CHANGELOG.md:23: version 1.0.0-rc.2 again (also at line 17)"},
		{"leading v", "## [1.0.0] - 2026-12-01", "## [v1.0.0] - 2026-12-01", `CHANGELOG.md:7: "v1.0.0" is not a semantic version`},
		{"leading zero", "## [1.0.0] - 2026-12-01", "## [1.00.0] - 2026-12-01", `CHANGELOG.md:7: "1.00.0" is not a semantic version`},
		{"date form", "## [1.0.0] - 2026-12-01", "## [1.0.0] - 1 Dec 2026", `CHANGELOG.md:7: "## [1.0.0] - 1 Dec 2026": after the version write " - YYYY-MM-DD"`},
		{"no date", "## [1.0.0] - 2026-12-01", "## [1.0.0]", `CHANGELOG.md:7: "## [1.0.0]": after the version`},
		{"calendar date", "## [1.0.0] - 2026-12-01", "## [1.0.0] - 2026-02-30", "CHANGELOG.md:7: date 2026-02-30 is not a calendar date"},
		{"dates newest first", "## [1.0.0] - 2026-12-01", "## [1.0.0] - 2026-11-01", "CHANGELOG.md:17: 1.0.0-rc.2 is dated 2026-11-30, after 1.0.0's 2026-11-01 above it"},
		{"subsection name", "### Fixed", "### Bug fixes", `CHANGELOG.md:13: subsection "Bug fixes": Keep a Changelog's are Added, Changed, Deprecated, Removed, Fixed, Security`},
		{"subsection twice", "### Fixed", "### Added", `CHANGELOG.md:13: a second "### Added" in this release`},
		{"entry outside a subsection", "## [1.0.0] - 2026-12-01\n\n### Added\n", "## [1.0.0] - 2026-12-01\n\n", "CHANGELOG.md:10: an entry outside a subsection"},
		{"empty release", "### Security\n\n- four\n", "", "CHANGELOG.md:23: release 1.0.0-rc.1 lists no change"},
		{"missing link", "[1.0.0-rc.1]: https://github.com/o/r/releases/tag/v1.0.0-rc.1\n", "", "CHANGELOG.md:23: release 1.0.0-rc.1 has no link reference"},
		{"missing unreleased link", "[unreleased]: https://github.com/o/r/compare/v1.0.0...HEAD\n", "", "CHANGELOG.md:5: [Unreleased] has no link reference"},
		{"stray link", "[unreleased]:", "[2.0.0]: https://x.example/\n[unreleased]:", "CHANGELOG.md:29: link reference [2.0.0] names no release"},
		{"duplicate link", "[unreleased]:", "[1.0.0]: https://x.example/\n[unreleased]:", "CHANGELOG.md:31: link reference [1.0.0] again (also at line 29)"},
		{"http link", "https://github.com/o/r/releases/tag/v1.0.0-rc.1", "http://github.com/o/r/releases/tag/v1.0.0-rc.1", `CHANGELOG.md:32: link reference [1.0.0-rc.1]: "http://`},
		{"text after links", "releases/tag/v1.0.0-rc.1\n", "releases/tag/v1.0.0-rc.1\n\nmore\n", `CHANGELOG.md:34: "more" after the link references`},
		{"no unreleased", "## [Unreleased]\n\n", "", `no "## [Unreleased]" section`},
		{"unreleased below a release", "## [Unreleased]\n\n## [1.0.0] - 2026-12-01\n\n### Added\n\n- one\n", "## [1.0.0] - 2026-12-01\n\n### Added\n\n- one\n## [Unreleased]\n", "CHANGELOG.md:10: [Unreleased] must come before every release"},
		{"unreleased with a date", "## [Unreleased]", "## [Unreleased] - 2026-12-01", "CHANGELOG.md:5: \"## [Unreleased]\" takes no date"},
		{"bad heading", "## [1.0.0] - 2026-12-01", "## 1.0.0 - 2026-12-01", `CHANGELOG.md:7: "## 1.0.0 - 2026-12-01": a release heading is`},
		{"level-4 heading", "- one\n", "- one\n#### More\n", `CHANGELOG.md:12: "#### More": inside a release only`},
		{"CRLF", "## [1.0.0] - 2026-12-01\n", "## [1.0.0] - 2026-12-01\r\n", "CHANGELOG.md:7: a carriage return"},
		{"trailing space", "- one\n", "- one \n", "CHANGELOG.md:11: trailing whitespace"},
		{"text before a subsection", "## [1.0.0] - 2026-12-01\n\n### Added\n", "## [1.0.0] - 2026-12-01\n\nSome words.\n\n### Added\n", "CHANGELOG.md:9: text before the first subsection"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(good, tc.old) {
				t.Fatalf("the good changelog has no %q", tc.old)
			}
			in := strings.Replace(good, tc.old, tc.new, 1)
			_, err := Parse("CHANGELOG.md", []byte(in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant %q\nin:\n%s", err, tc.want, in)
			}
		})
	}
}

func TestCompare(t *testing.T) {
	// semver.org's example of precedence (rule 11), ascending.
	order := []string{"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
		"1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0", "10.0.0"}
	for i := range order {
		for j := range order {
			a, err := ParseVersion(order[i])
			if err != nil {
				t.Fatal(err)
			}
			b, _ := ParseVersion(order[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := Compare(a, b); got != want {
				t.Errorf("Compare(%s, %s) = %d, want %d", a, b, got, want)
			}
		}
	}
	a, _ := ParseVersion("1.0.0+build.1")
	b, _ := ParseVersion("1.0.0+build.2")
	if Compare(a, b) != 0 || a.String() != "1.0.0+build.1" {
		t.Errorf("build metadata must not order: %v %v", a, b)
	}
	for _, bad := range []string{"1.0", "01.0.0", "1.0.0-", "1.0.0-01", "1.0.0+", "v1.0.0", "1.0.0-a..b"} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q) succeeded", bad)
		}
	}
}

func TestForRelease(t *testing.T) {
	pending := strings.Replace(good, "## [Unreleased]\n", "## [Unreleased]\n\n### Fixed\n\n- pending\n", 1)
	for _, tc := range []struct {
		name, in, want string
		allow          bool
		tag, err       string
	}{
		{name: "newest", in: good, tag: "v1.0.0"},
		{name: "named", in: good, want: "v1.0.0-rc.1", tag: "v1.0.0-rc.1"},
		{name: "named without v", in: good, want: "1.0.0-rc.2", tag: "v1.0.0-rc.2"},
		{name: "not listed", in: good, want: "v2.0.0", err: "CHANGELOG.md: the changelog has no release v2.0.0 (it lists v1.0.0, v1.0.0-rc.2, v1.0.0-rc.1)"},
		{name: "not a version", in: good, want: "latest", err: `"latest" is not a semantic version`},
		{name: "unreleased changes", in: pending, err: "CHANGELOG.md:5: [Unreleased] lists 1 change(s): move them into a release section"},
		{name: "unreleased changes, older release", in: pending, want: "v1.0.0-rc.1", err: "ALLOW_UNRELEASED=1"},
		{name: "unreleased changes allowed", in: pending, allow: true, tag: "v1.0.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, err := Parse("CHANGELOG.md", []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			r, err := log.ForRelease("CHANGELOG.md", tc.want, tc.allow)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || r.Version.Tag() != tc.tag {
				t.Errorf("%v, %v; want %s", r.Version.Tag(), err, tc.tag)
			}
		})
	}
}

// TestRepositoryChangelog: the project's own changelog parses and its
// newest release has notes.
func TestRepositoryChangelog(t *testing.T) {
	data, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	log, err := Parse("CHANGELOG.md", data)
	if err != nil {
		t.Fatal(err)
	}
	if log.Unreleased.Entries != 0 {
		t.Logf("[Unreleased] lists %d changes", log.Unreleased.Entries)
	}
	if !strings.HasPrefix(log.Notes(log.Newest()), "## ["+log.Newest().Version.String()+"] - ") {
		t.Errorf("notes: %s", log.Notes(log.Newest()))
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Fuzz(func(t *testing.T, data []byte) {
		log, err := Parse("CHANGELOG.md", data)
		if err == nil && len(log.Releases) == 0 {
			t.Error("a changelog without releases was accepted")
		}
	})
}
