package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets testscript run hnsplan in-process, as cmd/cue does.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"hnsplan": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the CLI cases in testdata/script. HNSPLAN_UPDATE=1
// rewrites the goldens (the files that `cmp stdout` compares against)
// inside each archive instead of failing.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "../../testdata/script",
		UpdateScripts:       os.Getenv("HNSPLAN_UPDATE") != "",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("NO_COLOR", "1")
			examples, err := filepath.Abs("../../examples")
			env.Setenv("EXAMPLES", examples) // the bundled examples, read-only
			return err
		},
	})
}
