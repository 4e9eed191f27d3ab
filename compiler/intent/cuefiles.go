package intent

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/parser"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

// Rule ids of the loader's findings about which .cue files make the intent.
const (
	RuleCUESubdirectory = "cue-subdirectory" // a .cue file below the intent directory that the load leaves out
	RuleNoNodes         = "no-nodes"         // the intent lists no node
)

// cueDirFiles is what the .cue files of the intent directory itself declare.
type cueDirFiles struct {
	all      []string            // absolute names, sorted
	noPkg    []string            // those without a package clause
	packages map[string][]string // package name -> its files
}

// scanCUEFiles reads the package clause of every .cue file directly in abs
// that CUE would read: names starting with '.' or '_' are CUE's own way to
// leave a file out, and stay out. A file whose clause does not parse is in
// neither noPkg nor packages: loading it reports the syntax error.
func scanCUEFiles(abs string) cueDirFiles {
	names, _ := filepath.Glob(filepath.Join(abs, "*.cue"))
	d := cueDirFiles{packages: map[string][]string{}}
	for _, name := range names {
		if base := filepath.Base(name); strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") {
			continue
		}
		d.all = append(d.all, name)
		f, err := parser.ParseFile(name, nil, parser.PackageClauseOnly)
		if err != nil {
			continue
		}
		if pkg := f.PackageName(); pkg == "" {
			d.noPkg = append(d.noPkg, name)
		} else {
			d.packages[pkg] = append(d.packages[pkg], name)
		}
	}
	return d
}

// reportNoPackage adds an error for each file of d without a package
// clause when other files have one: CUE would leave those files out of
// the package without a word, and whatever they set (the nodes, say)
// would silently vanish from the intent. It reports whether it found any.
func (d cueDirFiles) reportNoPackage(rel func(string) string, errs *diag.List) bool {
	if len(d.noPkg) == 0 || len(d.packages) == 0 {
		return false
	}
	pkg := "<name>"
	if len(d.packages) == 1 {
		for p := range d.packages {
			pkg = p
		}
	}
	for _, name := range d.noPkg {
		errs.Errorf(RuleLoad, diag.Pos{File: rel(name), Line: 1, Col: 1}, "",
			"%s has no package clause, so CUE would leave it out of the intent's package (and with it everything it sets); add `package %s` as its first line, as the other .cue files have",
			filepath.Base(name), pkg)
	}
	return true
}

// buildFiles returns the names of every file that inst and the packages
// it imports are built from.
func buildFiles(inst *build.Instance) map[string]bool {
	files := map[string]bool{}
	seen := map[*build.Instance]bool{}
	var walk func(*build.Instance)
	walk = func(i *build.Instance) {
		if seen[i] {
			return
		}
		seen[i] = true
		for _, f := range i.BuildFiles {
			if abs, err := filepath.Abs(f.Filename); err == nil {
				files[abs] = true
			}
		}
		for _, imp := range i.Imports {
			walk(imp)
		}
	}
	walk(inst)
	return files
}

// reportSubdirectories warns about each .cue file below abs, outside abs
// itself, that the build does not include: the load reads the package of
// the directory (and the packages it imports), never its subdirectories,
// so such a file would otherwise be ignored without a word. Hidden
// directories and cue.mod are skipped, as for manifests.
func reportSubdirectories(abs string, included map[string]bool, rel func(string) string, errs *diag.List) {
	var left []string
	_ = filepath.WalkDir(abs, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable subdirectory: loadManifests reports it
		}
		if d.IsDir() {
			if path != abs && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		base := d.Name()
		if filepath.Dir(path) == abs || filepath.Ext(base) != ".cue" || strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") {
			return nil
		}
		if !included[path] {
			left = append(left, path)
		}
		return nil
	})
	slices.Sort(left)
	for _, path := range left {
		errs.Add(diag.Finding{Rule: RuleCUESubdirectory, Severity: diag.Warning, Pos: diag.Pos{File: rel(path)},
			Message: fmt.Sprintf("not part of the intent: hnsplan reads the .cue files of the intent directory %s, not of its subdirectories (unless the intent imports their package); move the file into %s, import its package, or move it out of the intent directory",
				rel(abs), rel(abs))})
	}
}
