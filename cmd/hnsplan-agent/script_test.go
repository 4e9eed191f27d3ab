package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets testscript run hnsplan-agent in-process.
func TestMain(m *testing.M) {
	testscript.Main(removeHnsplan{m}, map[string]func(){
		"hnsplan-agent": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the agent's CLI cases in testdata/script, end to end:
// hnsplan (built once, from this module) compiles an intent, and the agent
// applies the plan to the in-memory HNS. HNSPLAN_UPDATE=1 rewrites the
// goldens inside each archive instead of failing.
func TestScripts(t *testing.T) {
	bin := filepath.Dir(hnsplanBinary(t))
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		UpdateScripts:       os.Getenv("HNSPLAN_UPDATE") != "",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("NO_COLOR", "1")
			env.Setenv("PATH", bin+string(os.PathListSeparator)+env.Getenv("PATH"))
			examples, err := filepath.Abs("../../examples")
			env.Setenv("EXAMPLES", examples) // the bundled examples, read-only
			return err
		},
	})
}
