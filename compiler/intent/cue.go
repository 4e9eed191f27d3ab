package intent

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/load"
	"cuelang.org/go/cue/token"

	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/schema"
)

// Rule ids of the findings the loader reports itself.
const (
	RuleLoad      = "load"      // the directory cannot be read as one CUE package
	RuleSyntax    = "syntax"    // a CUE file does not parse
	RuleSchema    = "schema"    // the intent does not fit #Intent
	RuleManifest  = "manifest"  // a Kubernetes manifest is malformed or of an unknown kind
	RuleInventory = "inventory" // an inventory file is malformed
	RuleHostBits  = "cidr-host-bits"
)

// source keeps the user's own CUE value (before the schema is applied) to
// answer where a field was written.
type source struct {
	user cue.Value
	rel  func(string) string

	mu    sync.Mutex
	cache map[string]diag.Pos // by fmt.Sprint(path): rules ask for a node's position more than once
}

func (s *source) pos(path []any) diag.Pos {
	key := fmt.Sprint(path...)
	s.mu.Lock()
	p, ok := s.cache[key]
	s.mu.Unlock()
	if ok {
		return p
	}
	p = s.posOf(selectors(path))
	s.mu.Lock()
	if s.cache == nil {
		s.cache = map[string]diag.Pos{}
	}
	s.cache[key] = p
	s.mu.Unlock()
	return p
}

func selectors(path []any) []cue.Selector {
	sels := make([]cue.Selector, 0, len(path))
	for _, p := range path {
		switch k := p.(type) {
		case string:
			sels = append(sels, cue.Str(k))
		case int:
			sels = append(sels, cue.Index(k))
		default:
			panic(fmt.Sprintf("intent: bad path element %v", p))
		}
	}
	return sels
}

// posOf walks up from sels until it finds a value the user wrote: CUE
// leaves positions off missing fields and defaults.
func (s *source) posOf(sels []cue.Selector) diag.Pos {
	for i := len(sels); i >= 0; i-- {
		v := s.user.LookupPath(cue.MakePath(sels[:i]...))
		if !v.Exists() {
			continue
		}
		// A struct written in several files has no single position: go on
		// up to one that has.
		if p := v.Pos(); p.IsValid() {
			return s.tokenPos(p)
		}
	}
	return diag.Pos{}
}

func (s *source) tokenPos(p token.Pos) diag.Pos {
	return diag.Pos{File: s.rel(p.Filename()), Line: p.Line(), Col: p.Column()}
}

// cueResult is what loading the CUE package gives.
type cueResult struct {
	user    cue.Value // the package as the user wrote it
	checked cue.Value // user ⊓ #Intent, validated
	ok      bool      // checked is valid and concrete
}

// loadCUE loads the one CUE package of dir and validates it against
// #Intent, adding a finding for every error.
func loadCUE(ctx *cue.Context, dir string, inputs *inputFiles, errs *diag.List) cueResult {
	rel := inputs.rel
	schemaV := ctx.CompileBytes(schema.Source, cue.Filename(schema.Filename))
	if err := schemaV.Err(); err != nil {
		panic("intent: embedded schema does not compile: " + err.Error())
	}
	intentDef := schemaV.LookupPath(cue.ParsePath("#Intent"))

	abs, err := filepath.Abs(dir)
	if err != nil {
		errs.Errorf(RuleLoad, diag.Pos{File: dir}, "", "%v", err)
		return cueResult{}
	}
	// Before anything reads a .cue file (scanCUEFiles parses each
	// one's package clause): a FIFO would hang it, /dev/zero fill memory.
	if !inputs.checkCUEFiles(errs) {
		return cueResult{}
	}
	files := scanCUEFiles(abs)
	if len(files.all) == 0 {
		errs.Errorf(RuleLoad, diag.Pos{File: rel(abs)}, "", "no CUE files: an intent directory holds one CUE package that sets `cluster` (see `hnsplan schema`)")
		return cueResult{}
	}
	if files.reportNoPackage(rel, errs) {
		return cueResult{}
	}
	// A directory of package-less files is one anonymous package, as
	// `cue vet *.cue` reads it; CUE's loader refuses it when asked for ".".
	args := []string{"."}
	if len(files.noPkg) == len(files.all) {
		args = files.noPkg
	}
	insts := load.Instances(args, &load.Config{Dir: abs})
	inst := insts[0]
	if inst.Err != nil {
		addCUEErrors(inst.Err, RuleLoad, rel, &source{rel: rel}, errs, abs)
		return cueResult{}
	}
	reportSubdirectories(abs, buildFiles(inst), rel, errs)
	user := ctx.BuildInstance(inst)
	src := &source{user: user, rel: rel}
	if err := user.Err(); err != nil {
		addCUEErrors(err, RuleSchema, rel, src, errs, abs)
		return cueResult{user: user}
	}
	checked := intentDef.Unify(user)
	err = checked.Validate(cue.Concrete(true))
	if err == nil {
		return cueResult{user: user, checked: checked, ok: true}
	}
	// Validate stops inside a struct at its first error. Check each value
	// the user wrote against its own part of the schema, so that one run
	// reports every error.
	var more diag.List
	validateDeep(intentDef, user, nil, src, &more)
	addCUEErrors(err, RuleSchema, rel, src, errs, abs)
	*errs = append(*errs, more...)
	dropRedundant(errs)
	// The checks in Go (host bits, names) need no defaults: run them on
	// what the user wrote, so they are reported in this run too.
	if data, err := user.MarshalJSON(); err == nil {
		decodeCluster(data, src, errs, true)
	}
	return cueResult{user: user, checked: checked}
}

var (
	packagesRE = regexp.MustCompile(`^found packages (.*) in "(.*)"$`)
	// statRE is cue/load's error for a file of the directory it cannot
	// stat: it lists YAML files too (a broken symlink named x.yaml).
	statRE = regexp.MustCompile(`^stat (.*): `)
)

// manifestExt says whether name is a file loadManifests reads.
func manifestExt(name string) bool {
	ext := filepath.Ext(name)
	return ext == ".yaml" || ext == ".yml"
}

// addCUEErrors turns a CUE error into findings, each placed at the user's
// file rather than the schema's.
func addCUEErrors(err error, rule string, rel func(string) string, src *source, errs *diag.List, dir string) {
	for _, e := range cueerrors.Errors(err) {
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		if strings.TrimSpace(msg) == "" {
			// cue/load gives some errors (a file it cannot read) no
			// message of their own; the files are checked first
			// (checkCUEFiles), so this is a last resort.
			msg = strings.TrimSpace(e.Error())
			if msg == "" {
				msg = "CUE could not load the package and gave no reason; check that every .cue file here is a readable regular file"
			}
		}
		if strings.HasSuffix(msg, "errors in empty disjunction:") {
			continue // the disjuncts' own errors follow
		}
		path := formatPath(e.Path())
		f := diag.Finding{Rule: rule, Severity: diag.Error, Path: path, Message: msg}
		if ps := userPositions(e, rel); len(ps) > 0 {
			f.Pos = ps[0]
			f = f.Relate(related(ps[1:])...)
		} else if src.user.Exists() && len(e.Path()) > 0 {
			f.Pos = src.posOf(pathSelectors(e.Path()))
		}
		if rule == RuleLoad {
			if m := statRE.FindStringSubmatch(msg); m != nil && manifestExt(m[1]) {
				continue // loadManifests reports the manifest, with what to do
			}
			switch m := packagesRE.FindStringSubmatch(msg); {
			case m != nil:
				f.Message = fmt.Sprintf("found CUE packages %s: an intent directory holds exactly one package", m[1])
				f.Pos = diag.Pos{File: rel(dir)}
			case f.Pos.IsValid():
				// Loading fails inside a file only when the file does not parse.
				f.Rule = RuleSyntax
			default:
				f.Pos = diag.Pos{File: rel(dir)}
			}
		}
		errs.Add(f)
	}
}

// dropRedundant removes CUE's terse errors where a clearer one says the
// same for the same path: "conflicting values <default> and x" beside the
// bound that failed (with `*4096 | int & <=max`), and "field not allowed" or
// "field is required but not present" beside validateDeep's, which name
// the field and suggest the spelling.
func dropRedundant(errs *diag.List) {
	terse := func(f diag.Finding) bool {
		return f.Rule == RuleSchema && (strings.HasPrefix(f.Message, "conflicting values") ||
			f.Message == "field not allowed" || f.Message == "field is required but not present")
	}
	specific := map[string]bool{}
	for _, f := range *errs {
		if f.Rule == RuleSchema && !terse(f) {
			specific[f.Path] = true
		}
	}
	*errs = slices.DeleteFunc(*errs, func(f diag.Finding) bool { return terse(f) && specific[f.Path] })
}

// userPositions returns the positions of e in user files, first to last
// (the finding goes at the first, the others are related to it): CUE
// gives one for each value that takes part in an error, a conflict
// between two files has one in each. Positions in the embedded schema
// are left out: no file of the user's holds them (`hnsplan schema`
// prints the schema).
func userPositions(e cueerrors.Error, rel func(string) string) []diag.Pos {
	var out []diag.Pos
	for _, p := range cueerrors.Positions(e) {
		if !p.IsValid() || p.Filename() == schema.Filename || p.Filename() == "" {
			continue
		}
		out = append(out, diag.Pos{File: rel(p.Filename()), Line: p.Line(), Col: p.Column()})
	}
	slices.SortFunc(out, diag.Pos.Compare)
	return slices.Compact(out)
}

// related makes positions related ones, without a message: CUE's
// positions say where, the finding's message says what.
func related(ps []diag.Pos) []diag.Related {
	rs := make([]diag.Related, len(ps))
	for i, p := range ps {
		rs[i] = diag.Related{Pos: p}
	}
	return rs
}

// formatPath writes a CUE error path the way findings spell paths:
// cluster.pools.default.cidr, cluster.serviceCIDRs[0], without the
// #Intent prefix of the schema.
func formatPath(path []string) string {
	var b strings.Builder
	for i, p := range path {
		if i == 0 && strings.HasPrefix(p, "#") {
			continue
		}
		if _, err := strconv.Atoi(p); err == nil {
			fmt.Fprintf(&b, "[%s]", p)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

func pathSelectors(path []string) []cue.Selector {
	sels := make([]cue.Selector, 0, len(path))
	for i, p := range path {
		if i == 0 && strings.HasPrefix(p, "#") {
			continue
		}
		sels = append(sels, cue.ParsePath(p).Selectors()...)
	}
	return sels
}

// validateDeep checks the user's value u against the schema s one field
// at a time: an unknown field, a missing required field, or a leaf that
// does not unify with its schema each add a finding. Unlike Validate, it
// does not stop at a struct's first error.
func validateDeep(s, u cue.Value, path []cue.Selector, src *source, errs *diag.List) {
	switch u.IncompleteKind() {
	case cue.StructKind:
		if s.IncompleteKind()&cue.StructKind == 0 {
			break // a type error: the leaf check below reports it
		}
		schemaFields := map[string]cue.Value{}
		var required []string
		it, _ := s.Fields(cue.Optional(true))
		for it.Next() {
			name := it.Selector().Unquoted()
			schemaFields[name] = it.Value()
			if it.Selector().ConstraintType() == cue.RequiredConstraint {
				required = append(required, name)
			}
		}
		pattern := s.LookupPath(cue.MakePath(cue.AnyString))
		present := map[string]bool{}
		uit, _ := u.Fields()
		for uit.Next() {
			sel := uit.Selector()
			name := sel.Unquoted()
			present[name] = true
			sub := append(slices.Clone(path), sel)
			fs, ok := schemaFields[name]
			if !ok && pattern.Exists() {
				fs, ok = pattern, true
			}
			if !ok {
				errs.Add(diag.Finding{Rule: RuleSchema, Severity: diag.Error, Path: selPath(sub),
					Pos: src.posOf(sub), Message: fmt.Sprintf("field %q is not allowed here%s", name, suggest(name, schemaFields))})
				continue
			}
			validateDeep(fs, uit.Value(), sub, src, errs)
		}
		for _, name := range required {
			if !present[name] {
				errs.Add(diag.Finding{Rule: RuleSchema, Severity: diag.Error, Path: selPath(append(slices.Clone(path), cue.Str(name))),
					Pos: src.posOf(path), Message: fmt.Sprintf("field %q is required but not present", name)})
			}
		}
		return
	case cue.ListKind:
		if s.IncompleteKind()&cue.ListKind == 0 {
			break
		}
		lit, _ := u.List()
		for i := 0; lit.Next(); i++ {
			elem := s.LookupPath(cue.MakePath(cue.Index(i)))
			if !elem.Exists() {
				elem = s.LookupPath(cue.MakePath(cue.AnyIndex))
			}
			if !elem.Exists() {
				break // longer than the schema allows: the leaf check reports it
			}
			validateDeep(elem, lit.Value(), append(slices.Clone(path), cue.Index(i)), src, errs)
		}
	}
	err := s.Unify(u).Validate(cue.Concrete(true))
	for _, e := range cueerrors.Errors(err) {
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		if strings.TrimSpace(msg) == "" {
			// cue/load gives some errors (a file it cannot read) no
			// message of their own; the files are checked first
			// (checkCUEFiles), so this is a last resort.
			msg = strings.TrimSpace(e.Error())
			if msg == "" {
				msg = "CUE could not load the package and gave no reason; check that every .cue file here is a readable regular file"
			}
		}
		if strings.HasSuffix(msg, "errors in empty disjunction:") {
			continue
		}
		f := diag.Finding{Rule: RuleSchema, Severity: diag.Error, Path: selPath(path), Message: msg}
		if ps := userPositions(e, src.rel); len(ps) > 0 {
			f.Pos = ps[0]
			f = f.Relate(related(ps[1:])...)
		} else {
			f.Pos = src.posOf(path)
		}
		errs.Add(f)
	}
}

func selPath(sels []cue.Selector) string {
	parts := make([]string, len(sels))
	for i, s := range sels {
		parts[i] = s.String()
	}
	return formatPath(parts)
}

// suggest names a known field close to name ("did you mean"), or lists
// the known fields.
func suggest(name string, fields map[string]cue.Value) string {
	known := slices.Sorted(maps.Keys(fields))
	if best := diag.Closest(strings.ToLower(name), known, 2); best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	if len(known) == 0 {
		return ""
	}
	return "; known fields: " + strings.Join(known, ", ")
}

// newContext returns a fresh CUE context: contexts only grow, so each load
// gets its own.
func newContext() *cue.Context { return cuecontext.New() }

// exportJSON is CUE's own export of a validated value. It calls
// MarshalJSON itself: json.Marshal would copy CUE's output again to
// compact and HTML-escape it, for a decoder that reads it either way.
func exportJSON(v cue.Value) ([]byte, error) {
	return v.MarshalJSON()
}

// relativeTo returns a function that makes absolute file names relative to
// the working directory, where they are inside it.
func relativeTo() func(string) string {
	wd, err := os.Getwd()
	return func(name string) string {
		if err != nil || !filepath.IsAbs(name) {
			return name
		}
		if r, err := filepath.Rel(wd, name); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
		return name
	}
}

// ExportCUE is CUE alone on the intent in dir: load the package, unify it
// with #Intent, validate, export JSON — what `cue export` with the schema
// does. It is the baseline the benchmarks hold Load and compile against.
func ExportCUE(dir string) ([]byte, error) {
	ctx := newContext()
	def := ctx.CompileBytes(schema.Source, cue.Filename(schema.Filename)).LookupPath(cue.ParsePath("#Intent"))
	inst := load.Instances([]string{"."}, &load.Config{Dir: dir})[0]
	if inst.Err != nil {
		return nil, inst.Err
	}
	v := def.Unify(ctx.BuildInstance(inst))
	if err := v.Validate(cue.Concrete(true)); err != nil {
		return nil, err
	}
	return v.MarshalJSON()
}
