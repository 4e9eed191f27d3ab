// Package docs_test keeps the documents in docs/ true to the code: every
// name an operator or a contributor looks up (a metric, an annotation, an
// Event reason, a state, a flag, a package, a dependency rule, a plan
// field) is read from the Go source or the Go types here, and must appear
// in the document that describes it. A new metric without documentation,
// or a renamed package, fails these tests. (docs/rules.md is generated and
// checked by TestRulesDoc in cmd/hnsplan.)
package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/applier/replace"
	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// root is the repository root, seen from this package's directory.
const root = ".."

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// goFile is one parsed non-test Go file of the module.
type goFile struct {
	rel string // slash path from the repository root
	f   *ast.File
}

// sourceFiles parses the module's non-test Go files under dir (relative
// to the root; "" for all), skipping testdata and hidden directories.
func sourceFiles(t *testing.T, dir string) []goFile {
	t.Helper()
	var out []goFile
	fset := token.NewFileSet()
	start := filepath.Join(root, filepath.FromSlash(dir))
	err := filepath.WalkDir(start, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != start && (name == "testdata" || strings.HasPrefix(name, ".") || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		out = append(out, goFile{rel: filepath.ToSlash(rel), f: f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no Go files under %s: the test is not looking at this module", start)
	}
	return out
}

// stringLit returns the value of a string literal expression.
func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// stringConsts returns the string constants declared in files, by name.
func stringConsts(files []goFile) map[string]string {
	out := map[string]string{}
	for _, gf := range files {
		for _, decl := range gf.f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						if s, ok := stringLit(vs.Values[i]); ok {
							out[name.Name] = s
						}
					}
				}
			}
		}
	}
	return out
}

// mustMention fails for each name that doc does not hold as `name`.
func mustMention(t *testing.T, docName, doc, what string, names []string) {
	t.Helper()
	slices.Sort(names)
	names = slices.Compact(names)
	for _, n := range names {
		if !strings.Contains(doc, "`"+n+"`") {
			t.Errorf("%s does not name %s `%s`: document it", docName, what, n)
		}
	}
}

// TestOperationsMetrics: every metric the module defines (the Name of a
// prometheus.*Opts literal) is in operations.md.
func TestOperationsMetrics(t *testing.T) {
	var names []string
	for _, gf := range sourceFiles(t, "") {
		ast.Inspect(gf.f, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			sel, ok := cl.Type.(*ast.SelectorExpr)
			if !ok || !strings.HasSuffix(sel.Sel.Name, "Opts") {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "prometheus" {
				return true
			}
			found := false
			for _, el := range cl.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, _ := kv.Key.(*ast.Ident)
				switch {
				case key == nil:
				case key.Name == "Namespace" || key.Name == "Subsystem":
					t.Errorf("%s: prometheus.%s sets %s: teach this test to compose the full name", gf.rel, sel.Sel.Name, key.Name)
				case key.Name == "Name":
					s, ok := stringLit(kv.Value)
					if !ok {
						t.Errorf("%s: prometheus.%s has a Name that is not a string literal: this test cannot read it", gf.rel, sel.Sel.Name)
					}
					names, found = append(names, s), true
				}
			}
			if !found {
				t.Errorf("%s: prometheus.%s without a Name", gf.rel, sel.Sel.Name)
			}
			return true
		})
	}
	if !slices.Contains(names, "hnsplan_hns_ops_total") {
		t.Fatalf("found metrics %q, not hnsplan_hns_ops_total: the scan is broken", names)
	}
	mustMention(t, "operations.md", readDoc(t, "operations.md"), "metric", names)
}

// annotationKey is a complete hnsplan.io/ key (not the bare prefix).
var annotationKey = regexp.MustCompile(`^hnsplan\.io/[a-z0-9][-a-z0-9.]*$`)

// TestOperationsAnnotations: every hnsplan.io/ key in the module's code,
// and every Annotation* constant of applier/kube (the Calico tunnel
// annotations the agent writes too), is in operations.md.
func TestOperationsAnnotations(t *testing.T) {
	var keys []string
	for _, gf := range sourceFiles(t, "") {
		ast.Inspect(gf.f, func(n ast.Node) bool {
			if s, ok := stringLit(asExpr(n)); ok && annotationKey.MatchString(s) {
				keys = append(keys, s)
			}
			return true
		})
	}
	for name, v := range stringConsts(sourceFiles(t, "applier/kube")) {
		if strings.HasPrefix(name, "Annotation") {
			keys = append(keys, v)
		}
	}
	for _, want := range []string{"hnsplan.io/state", "projectcalico.org/VXLANTunnelMACAddr"} {
		if !slices.Contains(keys, want) {
			t.Fatalf("found keys %q, not %s: the scan is broken", keys, want)
		}
	}
	mustMention(t, "operations.md", readDoc(t, "operations.md"), "annotation", keys)
}

func asExpr(n ast.Node) ast.Expr {
	e, _ := n.(ast.Expr)
	return e
}

// TestOperationsEvents: every Event reason the module records is in
// operations.md. A reason is the argument before the message of a call to
// a method Event (type, reason, message), or (object, type, reason,
// message), given as a literal or a constant; a wrapper's parameter is
// not a reason.
func TestOperationsEvents(t *testing.T) {
	files := sourceFiles(t, "")
	consts := stringConsts(files)
	var reasons []string
	for _, gf := range files {
		ast.Inspect(gf.f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Event" && sel.Sel.Name != "Eventf") {
				return true
			}
			var arg ast.Expr
			switch {
			case sel.Sel.Name == "Event" && len(call.Args) == 3:
				arg = call.Args[1]
			case sel.Sel.Name == "Event" && len(call.Args) == 4, sel.Sel.Name == "Eventf" && len(call.Args) >= 3:
				arg = call.Args[2]
			default:
				return true
			}
			if s, ok := stringLit(arg); ok {
				reasons = append(reasons, s)
			} else if id, ok := arg.(*ast.Ident); ok && consts[id.Name] != "" {
				reasons = append(reasons, consts[id.Name])
			} else if sx, ok := arg.(*ast.SelectorExpr); ok && consts[sx.Sel.Name] != "" {
				reasons = append(reasons, consts[sx.Sel.Name])
			}
			return true
		})
	}
	for _, want := range []string{"PlanRejected", "NetworkReplace"} {
		if !slices.Contains(reasons, want) {
			t.Fatalf("found reasons %q, not %s: the scan is broken", reasons, want)
		}
	}
	mustMention(t, "operations.md", readDoc(t, "operations.md"), "Event reason", reasons)
}

// TestOperationsStatesAndSteps: every state the agent reports and every
// step of a replace is in operations.md.
func TestOperationsStatesAndSteps(t *testing.T) {
	var names []string
	for _, dir := range []string{"applier", "applier/kube", "applier/replace"} {
		for name, v := range stringConsts(sourceFiles(t, dir)) {
			if strings.HasPrefix(name, "State") {
				names = append(names, v)
			}
		}
	}
	if !slices.Contains(names, "replace-pending") {
		t.Fatalf("found states %q, not replace-pending: the scan is broken", names)
	}
	doc := readDoc(t, "operations.md")
	mustMention(t, "operations.md", doc, "state", names)
	var steps []string
	for _, s := range replace.Steps {
		steps = append(steps, string(s))
	}
	mustMention(t, "operations.md", doc, "replace step", steps)
	mustMention(t, "operations.md", doc, "file", []string{"replace-journal.json", "replace-confirm", "echo.json"})
}

// TestOperationsFlagsAndEndpoints: every flag of hnsplan-agent and every
// HTTP path it serves (applier.Agent's handler) is in operations.md.
func TestOperationsFlagsAndEndpoints(t *testing.T) {
	var flags, paths []string
	for _, gf := range slices.Concat(sourceFiles(t, "cmd/hnsplan-agent"), sourceFiles(t, "applier")) {
		ast.Inspect(gf.f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch name := sel.Sel.Name; {
			case strings.HasSuffix(name, "Var") || strings.HasSuffix(name, "VarP"):
				if len(call.Args) >= 2 {
					if s, ok := stringLit(call.Args[1]); ok {
						flags = append(flags, "--"+s)
					}
				}
			case name == "HandleFunc" || name == "Handle":
				if len(call.Args) >= 1 {
					if s, ok := stringLit(call.Args[0]); ok {
						paths = append(paths, s)
					}
				}
			}
			return true
		})
	}
	if !slices.Contains(flags, "--drain-timeout") || !slices.Contains(paths, "/readyz") {
		t.Fatalf("found flags %q and paths %q: the scan is broken", flags, paths)
	}
	doc := readDoc(t, "operations.md")
	slices.Sort(flags)
	for _, f := range slices.Compact(flags) {
		if !strings.Contains(doc, f) {
			t.Errorf("operations.md does not name the flag %s: document it", f)
		}
	}
	mustMention(t, "operations.md", doc, "HTTP path", paths)
}

// TestArchitecturePackages: every package directory of the module is in
// architecture.md.
func TestArchitecturePackages(t *testing.T) {
	dirs := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (n == "testdata" || strings.HasPrefix(n, ".") || n == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			if rel != "." {
				dirs[filepath.ToSlash(rel)] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !dirs["compiler/plan"] || !dirs["applier/hns/hnswin"] {
		t.Fatalf("found packages %v: the walk is broken", dirs)
	}
	var names []string
	for d := range dirs {
		names = append(names, d)
	}
	mustMention(t, "architecture.md", readDoc(t, "architecture.md"), "package", names)
}

// TestArchitectureDependencyRules: every rule of cmd/deps_test.go is in
// architecture.md, word for word.
func TestArchitectureDependencyRules(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(root, "cmd", "deps_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	whys := regexp.MustCompile(`why:\s*"([^"]+)"`).FindAllStringSubmatch(string(src), -1)
	if len(whys) < 5 {
		t.Fatalf("found %d rules in cmd/deps_test.go: the scan is broken", len(whys))
	}
	doc := readDoc(t, "architecture.md")
	for _, m := range whys {
		if !strings.Contains(doc, "| "+m[1]+" |") {
			t.Errorf("architecture.md does not state the dependency rule %q in its table", m[1])
		}
	}
}

// TestArchitectureCommands: every subcommand of both CLIs is in
// architecture.md, as `hnsplan NAME` or `hnsplan-agent NAME`; a nested
// one after its parent's name (`hnsplan export calico`).
func TestArchitectureCommands(t *testing.T) {
	doc := readDoc(t, "architecture.md")
	for _, bin := range []string{"hnsplan", "hnsplan-agent"} {
		var cmds []string
		for _, gf := range sourceFiles(t, "cmd/"+bin) {
			ast.Inspect(gf.f, func(n ast.Node) bool {
				cl, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				if sel, ok := cl.Type.(*ast.SelectorExpr); !ok || sel.Sel.Name != "Command" {
					return true
				}
				for _, el := range cl.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						if key, _ := kv.Key.(*ast.Ident); key != nil && key.Name == "Use" {
							if s, ok := stringLit(kv.Value); ok {
								if name, _, _ := strings.Cut(s, " "); name != bin {
									cmds = append(cmds, name)
								}
							}
						}
					}
				}
				return true
			})
		}
		if !slices.Contains(cmds, "version") {
			t.Fatalf("found %s commands %q: the scan is broken", bin, cmds)
		}
		for _, c := range cmds {
			named := regexp.MustCompile("`" + regexp.QuoteMeta(bin) + "( [a-z][a-z-]*)* " + regexp.QuoteMeta(c) + `\b`)
			if !named.MatchString(doc) {
				t.Errorf("architecture.md does not describe `%s %s`", bin, c)
			}
		}
	}
}

// TestPlanFormatFields: every JSON field of the plan, part and index types
// and every HNS policy type is in plan-format.md.
func TestPlanFormatFields(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var fields []string
	var walk func(reflect.Type)
	walk = func(rt reflect.Type) {
		for rt.Kind() == reflect.Pointer || rt.Kind() == reflect.Slice {
			rt = rt.Elem()
		}
		if rt.Kind() != reflect.Struct || rt.PkgPath() != reflect.TypeFor[plan.NodePlan]().PkgPath() || seen[rt] {
			return
		}
		if rt == reflect.TypeFor[plan.IndexEntry]() {
			return // written as its node's name (IndexEntry.MarshalJSON)
		}
		seen[rt] = true
		for i := range rt.NumField() {
			f := rt.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			fields = append(fields, name)
			walk(f.Type)
		}
	}
	for _, v := range []any{plan.NodePlan{}, plan.RouteTable{}, plan.RouteShard{}, plan.ProgramChunk{}, plan.Index{}, plan.VSID{}, plan.VxlanPort{}, plan.NetAdapterName{},
		plan.ProviderAddress{}, plan.OutBoundNAT{}, plan.SDNRoute{}, plan.RemoteSubnetRouteSetting{}, plan.ACL{}} {
		walk(reflect.TypeOf(v))
	}
	if !slices.Contains(fields, "DistributedRouterMacAddress") || !slices.Contains(fields, "namedPorts") {
		t.Fatalf("found fields %q: the walk is broken", fields)
	}
	doc := readDoc(t, "plan-format.md")
	mustMention(t, "plan-format.md", doc, "field", fields)
	var types []string
	for name, v := range stringConsts(sourceFiles(t, "compiler/plan")) {
		if strings.HasPrefix(name, "Type") {
			types = append(types, v)
		}
	}
	if !slices.Contains(types, "RemoteSubnetRoute") {
		t.Fatalf("found policy types %q: the scan is broken", types)
	}
	mustMention(t, "plan-format.md", doc, "policy type", types)
	mustMention(t, "plan-format.md", doc, "value", []string{strconv.Quote(plan.FormatVersion), strconv.Quote(plan.Kind), strconv.Quote(plan.IndexKind), plan.IndexFile,
		strconv.Quote(plan.KindRouteTable), strconv.Quote(plan.KindRouteShard), strconv.Quote(plan.KindProgramChunk),
		strconv.Quote(plan.RoutesRemoteSubnet), strconv.Quote(plan.RoutesHost)})
}

// TestPlanFormatExample: the examples in plan-format.md are what compiling
// the bundled examples gives today: the policy-only plan of akswin000000
// (examples/aks-azure-cni) whole, and each part between two "…" lines of
// the excerpt of win-1's (examples/calico-vxlan), in order.
func TestPlanFormatExample(t *testing.T) {
	doc := readDoc(t, "plan-format.md")
	const open = "```json\n"
	blocks := map[string]string{} // by node
	for rest := doc; ; {
		i := strings.Index(rest, open+"{\n  \"formatVersion\"")
		if i < 0 {
			break
		}
		block, after, ok := strings.Cut(rest[i+len(open):], "\n```")
		if !ok {
			t.Fatal("plan-format.md: an example's json block does not end")
		}
		_, node, _ := strings.Cut(block, "\"node\": \"")
		node, _, _ = strings.Cut(node, "\"")
		blocks[node] = block
		rest = after
	}
	if aks, ok := blocks["akswin000000"]; !ok {
		t.Error("plan-format.md has no example of a policy-only plan (akswin000000)")
	} else {
		res, findings, err := compiler.Build(filepath.Join(root, "examples", "aks-azure-cni"), compiler.Options{})
		if err != nil || findings.HasErrors() {
			t.Fatalf("examples/aks-azure-cni: %v %s", err, findings.Summary())
		}
		files, err := compiler.EncodePlans(res.Plans)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(files, func(f compiler.File) bool { return f.Node == "akswin000000" })
		if i < 0 || strings.TrimSpace(string(files[i].Data)) != aks {
			t.Errorf("the policy-only example in plan-format.md is not a fresh compile of examples/aks-azure-cni (akswin000000.json): update it from go run ./cmd/hnsplan compile examples/aks-azure-cni -o /tmp/x")
		}
	}
	block, ok := blocks["win-1"]
	if !ok {
		t.Fatal("plan-format.md has no example plan of win-1 (a json block starting with formatVersion)")
	}
	res, findings, err := compiler.Build(filepath.Join(root, "examples", "calico-vxlan"), compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if findings.HasErrors() || !res.Compiled() {
		t.Fatalf("examples/calico-vxlan does not vet: %s", findings.Summary())
	}
	files, err := compiler.EncodePlans(res.Plans)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(files, func(f compiler.File) bool { return f.Node == "win-1" })
	if i < 0 {
		t.Fatal("examples/calico-vxlan has no plan for win-1")
	}
	data := string(files[i].Data)
	segments := strings.Split(block, "\n  …\n")
	if len(segments) < 2 {
		t.Fatalf("the example has %d parts; it is an excerpt, with … lines", len(segments))
	}
	at := 0
	for n, seg := range segments {
		j := strings.Index(data[at:], seg)
		if j < 0 {
			t.Errorf("part %d of the example in plan-format.md is not in a fresh compile of examples/calico-vxlan (win-1.json) after the previous part; first line that differs: %q. Update the example from go run ./cmd/hnsplan compile examples/calico-vxlan -o /tmp/x",
				n+1, firstMissing(data[at:], seg))
			return
		}
		at += j + len(seg)
	}
}

// firstMissing returns the first line of seg that does not follow the
// lines before it in data.
func firstMissing(data, seg string) string {
	at := 0
	for _, line := range strings.Split(seg, "\n") {
		j := strings.Index(data[at:], line+"\n")
		if j < 0 {
			return line
		}
		at += j + len(line) + 1
	}
	return "(none: the lines appear, but not together)"
}
