// Command changelog reads CHANGELOG.md for the Makefile (internal/changelog
// does the reading):
//
//	go run ./hack/changelog [-f CHANGELOG.md] check
//	go run ./hack/changelog [-f CHANGELOG.md] [-allow-unreleased] version [vX.Y.Z]
//	go run ./hack/changelog [-f CHANGELOG.md] notes vX.Y.Z
//
// check parses the file and prints the newest release's tag; version prints
// the tag `make release` builds (the newest release, or the one named,
// which must be listed) and refuses while [Unreleased] lists changes unless
// -allow-unreleased; notes prints that release's section, the release notes.
// Errors go to standard error as CHANGELOG.md:LINE: ..., with exit 1; a
// usage error exits 2.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/hnsplan/hnsplan/internal/changelog"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("changelog", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("f", "CHANGELOG.md", "the changelog to read")
	allow := fs.Bool("allow-unreleased", false, "version: build a release while [Unreleased] lists changes")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: changelog [-f FILE] [-allow-unreleased] check | version [vX.Y.Z] | notes vX.Y.Z")
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	f, err := os.Open(*file)
	if err != nil {
		return fail(err)
	}
	data, err := io.ReadAll(io.LimitReader(f, changelog.MaxSize+1))
	f.Close()
	if err != nil {
		return fail(err)
	}
	log, err := changelog.Parse(*file, data)
	if err != nil {
		return fail(err)
	}
	switch {
	case rest[0] == "check" && len(rest) == 1:
		fmt.Fprintln(stdout, log.Newest().Version.Tag())
	case rest[0] == "version" && len(rest) <= 2:
		want := ""
		if len(rest) == 2 {
			want = rest[1]
		}
		r, err := log.ForRelease(*file, want, *allow)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, r.Version.Tag())
	case rest[0] == "notes" && len(rest) == 2:
		r, err := log.Find(rest[1])
		if err != nil {
			return fail(fmt.Errorf("%s: %w", *file, err))
		}
		fmt.Fprint(stdout, log.Notes(r))
	default:
		fs.Usage()
		return 2
	}
	return 0
}
