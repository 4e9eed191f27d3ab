// Package cmd_test guards the dependency rules of DESIGN §3, as tailscale's
// deps_test.go does: the plan contract and the policy logic stay free of
// CUE, client-go and hcsshim, only one package imports each of CUE and
// hcsshim, and neither binary links what belongs to the other.
// go-containerregistry builds the container images (make images): a build
// tool's dependency, imported by internal/imagebuild and hack/images only,
// and linked into neither shipped binary on any GOOS.
package cmd_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/hnsplan/hnsplan"

const (
	cuePkg     = "cuelang.org/go"
	clientGo   = "k8s.io/client-go"
	hcsshimPkg = "github.com/Microsoft/hcsshim"
	ggcrPkg    = "github.com/google/go-containerregistry"
	helmPkg    = "helm.sh/helm"
)

// listedPkg is the part of `go list -json` the rules read.
type listedPkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// A depRule forbids packages (by import-path prefix) to some of the module's
// packages.
type depRule struct {
	why     string
	applies func(pkg string) bool // which of our packages the rule binds
	direct  bool                  // check Imports, not Deps
	forbid  []string
	stdlib  bool // forbid every package outside the standard library
}

// standard says whether an import path is the standard library's: its
// first element has no dot (golang.org/x/..., k8s.io/..., and this module
// all have one).
func standard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func ours(rel ...string) func(string) bool {
	return func(p string) bool {
		return slices.ContainsFunc(rel, func(r string) bool { return p == module+"/"+r })
	}
}

func oursExcept(rel ...string) func(string) bool {
	return func(p string) bool {
		return strings.HasPrefix(p, module) && !slices.ContainsFunc(rel, func(r string) bool { return p == module+"/"+r })
	}
}

var depRules = []depRule{
	{why: "only compiler/intent imports CUE", applies: oursExcept("compiler/intent"), direct: true, forbid: []string{cuePkg}},
	{why: "only applier/hns/hnswin imports hcsshim", applies: oursExcept("applier/hns/hnswin"), direct: true, forbid: []string{hcsshimPkg}},
	{why: "the plan contract and the policy logic import no CUE, client-go or hcsshim",
		applies: ours("compiler/plan", "compiler/selector", "compiler/acl", "compiler/sim", "compiler/reach"),
		forbid:  []string{cuePkg, clientGo, hcsshimPkg}},
	{why: "the plan contract links only the standard library", applies: ours("compiler/plan"), stdlib: true},
	{why: "the Windows build catalog links only the standard library (the agent reads it)", applies: ours("compiler/winbuild"), stdlib: true},
	{why: "the agent does not link CUE", applies: ours("cmd/hnsplan-agent"), forbid: []string{cuePkg}},
	{why: "internal/cli, which both binaries link, links only cobra and compiler/diag (for Closest) besides the standard library",
		applies: ours("internal/cli"), direct: true, forbid: []string{cuePkg, clientGo, hcsshimPkg, module + "/compiler/intent", module + "/compiler/check"}},
	{why: "compiler/diag links only the standard library: the agent links it through internal/cli", applies: ours("compiler/diag"), stdlib: true},
	{why: "the compiler CLI does not link hcsshim", applies: ours("cmd/hnsplan"), forbid: []string{hcsshimPkg}},
	{why: "only the image build tool (internal/imagebuild, hack/images) imports go-containerregistry",
		applies: oursExcept("internal/imagebuild", "hack/images"), direct: true, forbid: []string{ggcrPkg}},
	{why: "go-containerregistry is a build tool's: the shipped binaries do not link it",
		applies: ours("cmd/hnsplan", "cmd/hnsplan-agent"), forbid: []string{ggcrPkg}},
	{why: "no package links Helm's library (the chart tests' alone)",
		applies: func(p string) bool { return strings.HasPrefix(p, module) }, forbid: []string{helmPkg}},
}

// violations returns one line per broken rule.
func violations(pkgs []listedPkg) []string {
	var out []string
	for _, p := range pkgs {
		for _, r := range depRules {
			if !r.applies(p.ImportPath) {
				continue
			}
			deps := p.Deps
			if r.direct {
				deps = p.Imports
			}
			for _, d := range deps {
				if r.stdlib && !standard(d) {
					out = append(out, fmt.Sprintf("%s imports %s: %s", p.ImportPath, d, r.why))
					continue
				}
				for _, f := range r.forbid {
					if d == f || strings.HasPrefix(d, f+"/") {
						out = append(out, fmt.Sprintf("%s imports %s: %s", p.ImportPath, d, r.why))
					}
				}
			}
		}
	}
	return out
}

func goList(t *testing.T, goos string) []listedPkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps=false", "-json=ImportPath,Imports,Deps", "./...")
	cmd.Dir = ".."
	cmd.Env = append(cmd.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list (GOOS=%s): %v\n%s", goos, err, stderr.String())
	}
	var pkgs []listedPkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list (GOOS=%s) listed no packages", goos)
	}
	return pkgs
}

func TestDependencyRules(t *testing.T) {
	for _, goos := range []string{"linux", "windows"} {
		t.Run(goos, func(t *testing.T) {
			pkgs := goList(t, goos)
			if !slices.ContainsFunc(pkgs, func(p listedPkg) bool { return p.ImportPath == module+"/compiler/intent" }) {
				t.Fatalf("go list did not list compiler/intent: the test is not looking at this module")
			}
			for _, v := range violations(pkgs) {
				t.Error(v)
			}
		})
	}
}

// TestDependencyRulesFire checks that each rule can fail.
func TestDependencyRulesFire(t *testing.T) {
	bad := []listedPkg{
		{ImportPath: module + "/compiler/check", Imports: []string{cuePkg + "/cue"}},
		{ImportPath: module + "/applier", Imports: []string{hcsshimPkg + "/hcn"}},
		{ImportPath: module + "/compiler/acl", Deps: []string{clientGo + "/kubernetes"}},
		{ImportPath: module + "/compiler/plan", Deps: []string{"crypto/ed25519", "golang.org/x/crypto/ssh"}},
		{ImportPath: module + "/cmd/hnsplan-agent", Deps: []string{cuePkg + "/cue/load"}},
		{ImportPath: module + "/cmd/hnsplan", Deps: []string{hcsshimPkg}},
		{ImportPath: module + "/internal/cli", Imports: []string{module + "/compiler/intent"}},
		{ImportPath: module + "/compiler/diag", Deps: []string{"github.com/spf13/cobra"}},
		{ImportPath: module + "/fleet", Imports: []string{ggcrPkg + "/pkg/v1/layout"}},
		{ImportPath: module + "/cmd/hnsplan", Deps: []string{ggcrPkg + "/pkg/v1"}},
		{ImportPath: module + "/cmd/hnsplan-agent", Deps: []string{ggcrPkg + "/pkg/v1/mutate"}},
		{ImportPath: module + "/cmd/hnsplan-agent", Deps: []string{helmPkg + "/v3/pkg/engine"}},
	}
	good := []listedPkg{
		{ImportPath: module + "/compiler/intent", Imports: []string{cuePkg + "/cue"}},
		{ImportPath: module + "/applier/hns/hnswin", Imports: []string{hcsshimPkg + "/hcn"}},
		{ImportPath: module + "/compiler/acl", Deps: []string{"net/netip", "k8s.io/client-gofake"}},
		{ImportPath: module + "/compiler/plan", Deps: []string{"net/netip", "crypto/ed25519", "internal/byteorder"}},
		{ImportPath: module + "/internal/imagebuild", Imports: []string{ggcrPkg + "/pkg/v1/layout"}},
		{ImportPath: module + "/hack/images", Imports: []string{ggcrPkg + "/pkg/v1"}, Deps: []string{ggcrPkg + "/pkg/v1/mutate"}},
	}
	if v := violations(good); len(v) != 0 {
		t.Errorf("allowed imports reported: %q", v)
	}
	if v := violations(bad); len(v) != len(bad) {
		t.Errorf("got %d violations, want %d:\n%s", len(v), len(bad), strings.Join(v, "\n"))
	}
}
