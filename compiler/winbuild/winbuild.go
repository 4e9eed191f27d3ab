// Package winbuild is the catalog of Windows builds with known
// container-networking regressions: each entry names the builds it
// affects, the public reports of it, and the update that fixes it. The
// compiler's vet rule windows-build-regression and the agent (its
// /status, its metric, the rollout hold) read the same catalog.
//
// It links only the standard library (cmd/deps_test.go), so that the
// agent and the plan-side code can use it without the compiler.
//
// An entry needs two public sources: a report of the regression that
// names the build, and Microsoft's notice of the update that fixes it (or
// a maintainer's quote of it). Builds are compared within one Windows
// build number (20348 is Windows Server 2022): a revision (UBR) from From
// up to, not including, Fixed is affected.
package winbuild

import (
	"fmt"
	"strconv"
	"strings"
)

// Build is a Windows OS build: its number (CurrentBuild, 20348) and its
// update build revision (UBR, 2582). Windows reports it as
// 10.0.<Number>.<Revision> (a Node's status.nodeInfo.kernelVersion).
type Build struct {
	Number, Revision int
}

// String is the form Windows reports: 10.0.20348.2582.
func (b Build) String() string { return fmt.Sprintf("10.0.%d.%d", b.Number, b.Revision) }

// Short is <Number>.<Revision>, the form Microsoft's update notes use
// ("OS Build 20348.2582").
func (b Build) Short() string { return fmt.Sprintf("%d.%d", b.Number, b.Revision) }

// maxPart bounds each number: a build or revision past it is no
// Windows build (and no input can overflow a comparison).
const maxPart = 1 << 24

// Parse reads a build as Windows and Kubernetes write it:
// "10.0.20348.2582" (kernelVersion, `cmd /c ver`), or "20348.2582". A
// kernelVersion with a suffix ("10.0.20348.2582 (WinBuild...)") is read
// up to its first space.
func Parse(s string) (Build, error) {
	t, _, _ := strings.Cut(strings.TrimSpace(s), " ")
	parts := strings.Split(t, ".")
	switch {
	case len(parts) == 4 && parts[0] == "10" && parts[1] == "0":
		parts = parts[2:]
	case len(parts) == 2:
	default:
		return Build{}, fmt.Errorf("windows build %q: want 10.0.<build>.<revision> (e.g. 10.0.20348.2582)", bounded(s))
	}
	var n [2]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || v > maxPart || p == "" || p[0] == '+' {
			return Build{}, fmt.Errorf("windows build %q: want 10.0.<build>.<revision> (e.g. 10.0.20348.2582)", bounded(s))
		}
		n[i] = v
	}
	return Build{Number: n[0], Revision: n[1]}, nil
}

// bounded is s cut to 64 bytes for an error message.
func bounded(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Update is a Windows update: its KB number, the build it brings and
// its release date (YYYY-MM-DD).
type Update struct {
	KB    string
	Build Build
	Date  string
}

func (u Update) String() string {
	return fmt.Sprintf("%s (%s, %s)", u.KB, u.Build.Short(), u.Date)
}

// Regression is one entry of the catalog.
type Regression struct {
	// ID names the entry (in findings, /status and the metric's label).
	ID string
	// Introduced is the update that brought the regression: builds of
	// its number from its revision on are affected...
	Introduced Update
	// ...up to Fixed's revision, which is not.
	Fixed Update
	// Summary says what breaks, in one line.
	Summary string
	// Sources are the public reports and notices, each "URL (what it
	// says)".
	Sources []string
}

// Affects reports whether b is one of the builds r breaks.
func (r Regression) Affects(b Build) bool {
	return b.Number == r.Introduced.Build.Number && b.Revision >= r.Introduced.Build.Revision && b.Revision < r.Fixed.Build.Revision
}

// Catalog is every known regression, oldest first. Entries are added only
// with their sources (see the package comment).
var Catalog = []Regression{
	{
		ID:         "ws2022-2024-07-container-networking",
		Introduced: Update{KB: "KB5040437", Build: Build{20348, 2582}, Date: "2024-07-09"},
		Fixed:      Update{KB: "KB5044281", Build: Build{20348, 2762}, Date: "2024-10-08"},
		Summary:    "container networking on Kubernetes breaks (Calico VXLAN and others): pods cannot reach other pods, Services or external networks",
		Sources: []string{
			"https://github.com/microsoft/Windows-Containers/issues/516 (broken after KB5040437, OS build 20348.2582; uninstalling it fixes it)",
			"https://github.com/projectcalico/calico/issues/8529 (broken on 20348.2582; resolved by KB5044281, whose notes are quoted there)",
			"https://github.com/projectcalico/calico/issues/9019 (the same report against Calico 3.28)",
			"https://support.microsoft.com/en-us/topic/october-8-2024-kb5044281-os-build-20348-2762-e063059c-9122-4324-86e8-4f6f3383a20a (Fixed: container networking on Kubernetes might not work as you expect)",
		},
	},
}

// Lookup returns the regression of the catalog that affects b, if any.
func Lookup(b Build) (Regression, bool) {
	for _, r := range Catalog {
		if r.Affects(b) {
			return r, true
		}
	}
	return Regression{}, false
}

// Check parses s and looks it up: the build, the regression that affects
// it (ok), or an error for a build it cannot read.
func Check(s string) (b Build, r Regression, ok bool, err error) {
	if b, err = Parse(s); err != nil {
		return b, r, false, err
	}
	r, ok = Lookup(b)
	return b, r, ok, nil
}
