package cmd_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the most lines a function in cmd/ may have. cmd/ only
// wires flags, output and exit codes; a longer function is behaviour that
// belongs in a package (fleet, applier, compiler), or wiring to split.
const maxFuncLines = 80

// TestFunctionLength fails on any function of cmd/ (both binaries, every
// GOOS: files are parsed, not built, so build constraints do not hide
// any) over maxFuncLines lines, from its func keyword to its closing
// brace. Tests are not wiring and are left out.
func TestFunctionLength(t *testing.T) {
	fset := token.NewFileSet()
	var files []*ast.File
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("found %d Go files under cmd/: the walk is broken", len(files))
	}
	for _, long := range longFuncs(fset, files, maxFuncLines) {
		t.Errorf("%s: split it, or move its behaviour into a package (cmd/ only wires)", long)
	}
}

// TestFunctionLengthCanFail: a function one line over the limit is
// reported, with its file, line, name and length; one at the limit, and
// a literal inside a function already counted, are not.
func TestFunctionLengthCanFail(t *testing.T) {
	body := func(name string, lines int) string {
		return "func " + name + "() {\n" + strings.Repeat("\t_ = 0\n", lines-2) + "}\n"
	}
	src := "package p\n\n" + body("atLimit", maxFuncLines) + body("over", maxFuncLines+1) +
		"var lit = func() {\n" + strings.Repeat("\t_ = 0\n", maxFuncLines) + "}\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := longFuncs(fset, []*ast.File{f}, maxFuncLines)
	want := []string{
		fmt.Sprintf("p.go:%d: func over has %d lines, more than %d", maxFuncLines+3, maxFuncLines+1, maxFuncLines),
		fmt.Sprintf("p.go:%d: func literal has %d lines, more than %d", 2*maxFuncLines+4, maxFuncLines+2, maxFuncLines),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// longFuncs lists the functions of files over max lines: declared
// functions and methods, and function literals outside them.
func longFuncs(fset *token.FileSet, files []*ast.File, max int) []string {
	var out []string
	check := func(name string, n ast.Node) {
		start, end := fset.Position(n.Pos()), fset.Position(n.End())
		if lines := end.Line - start.Line + 1; lines > max {
			out = append(out, fmt.Sprintf("%s:%d: func %s has %d lines, more than %d", start.Filename, start.Line, name, lines, max))
		}
	}
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				check(fd.Name.Name, fd)
				continue
			}
			ast.Inspect(d, func(n ast.Node) bool {
				if fl, ok := n.(*ast.FuncLit); ok {
					check("literal", fl)
					return false
				}
				return true
			})
		}
	}
	return out
}
