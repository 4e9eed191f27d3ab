// Package buildinfo names the build of hnsplan's binaries: the version and
// commit `make build` stamps from git, or else what the Go toolchain
// recorded in the binary (`go install ...@v1.2.3`: the module version;
// `go build` in a clone: the VCS revision).
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at link time by `make build`:
//
//	-X github.com/hnsplan/hnsplan/internal/buildinfo.version=$(git describe --tags --always --dirty)
//	-X github.com/hnsplan/hnsplan/internal/buildinfo.commit=$(git rev-parse HEAD)
//
// Empty means not stamped.
var version, commit string

// Info is what a binary knows of its build.
type Info struct {
	Version  string // a tag, git describe's form, the module version, or "(devel)"
	Commit   string // the full revision, or "unknown"
	Modified bool   // built from a work tree with changes (recorded by the toolchain)
}

// Get returns the stamped version and commit, falling back to the build
// information the toolchain embeds (debug.ReadBuildInfo) for what was not
// stamped.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return get(version, commit, bi)
}

func get(version, commit string, bi *debug.BuildInfo) Info {
	i := Info{Version: version, Commit: commit}
	if bi != nil {
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && i.Commit == "":
				i.Commit = s.Value
			case s.Key == "vcs.modified" && commit == "":
				i.Modified = s.Value == "true"
			}
		}
	}
	if i.Version == "" {
		i.Version = "(devel)"
	}
	if i.Commit == "" {
		i.Commit = "unknown"
	}
	return i
}

// Line is the one line `NAME version` and `NAME --version` print:
// "hnsplan v1.2.0-3-g1a2b3c4 (commit 1a2b3c4…, go1.26.1, linux/amd64)".
func (i Info) Line(name string) string {
	c := i.Commit
	if i.Modified {
		c += ", modified"
	}
	return fmt.Sprintf("%s %s (commit %s, %s, %s/%s)", name, i.Version, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
