package intent

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/build"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/parser"

	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/schema"
)

// planSchema is the plan schema (cluster.cue and plan.cue, one package),
// compiled once per process. CUE values and contexts are safe for
// concurrent use (cue v0.17: CompileBytes and Unify on a shared context),
// and a context only grows by the labels it sees, which in plan files are
// the schema's own field names: one context serves every call.
var planSchema = sync.OnceValue(func() *compiledPlanSchema {
	ctx := newContext()
	inst := build.NewContext().NewInstance("", nil)
	for _, src := range []struct {
		name string
		text []byte
	}{{schema.Filename, schema.Source}, {schema.PlanFilename, schema.PlanSource}} {
		f, err := parser.ParseFile(src.name, src.text, parser.ParseComments)
		if err != nil {
			panic("intent: embedded schema does not parse: " + err.Error())
		}
		if err := inst.AddSyntax(f); err != nil {
			panic("intent: embedded schema: " + err.Error())
		}
	}
	v := ctx.BuildInstance(inst)
	if err := v.Err(); err != nil {
		panic("intent: embedded plan schema does not compile: " + cueerrors.Details(err, nil))
	}
	s := &compiledPlanSchema{ctx: ctx,
		nodePlan: v.LookupPath(cue.ParsePath("#NodePlan")),
		index:    v.LookupPath(cue.ParsePath("#PlanIndex")),
		parts:    map[string]cue.Value{},
	}
	if !s.nodePlan.Exists() || !s.index.Exists() {
		panic("intent: embedded plan schema lacks #NodePlan or #PlanIndex")
	}
	for _, kind := range partKinds {
		d := v.LookupPath(cue.ParsePath("#" + kind))
		if !d.Exists() {
			panic("intent: embedded plan schema lacks #" + kind)
		}
		s.parts[kind] = d
	}
	return s
})

// partKinds are the kinds of the shared parts plans name; each has the
// schema definition of its name.
var partKinds = []string{plan.KindRouteTable, plan.KindRouteShard, plan.KindProgramChunk}

type compiledPlanSchema struct {
	ctx             *cue.Context
	nodePlan, index cue.Value
	parts           map[string]cue.Value // by kind
}

// ValidatePlan checks a plan file (a NodePlan) against schema #NodePlan.
// The error, if any, lists every violation found, one per line, each
// with the path of the field ("network.Ipams[0].Subnets[0].IpAddressPrefix:
// ...").
func ValidatePlan(data []byte) error {
	s := planSchema()
	return validateJSON(s.ctx, s.nodePlan, "plan", data)
}

// ValidatePlanIndex checks a plan index (_index.json) against #PlanIndex, like
// ValidatePlan.
func ValidatePlanIndex(data []byte) error {
	s := planSchema()
	return validateJSON(s.ctx, s.index, "plan index", data)
}

// ValidatePart checks a shared part's file (a route table's head or shard,
// a program chunk) against the schema definition of its kind (#RouteTable,
// #RouteShard, #ProgramChunk), like ValidatePlan. A file of another kind
// is an error that says which kinds are parts.
func ValidatePart(data []byte) error {
	s := planSchema()
	var head struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return fmt.Errorf("part is not valid JSON: %w", err)
	}
	def, ok := s.parts[head.Kind]
	if !ok {
		return fmt.Errorf("part of kind %q: a part is a %s", head.Kind, strings.Join(partKinds, ", "))
	}
	return validateJSON(s.ctx, def, "part", data)
}

// A PlanSchemaError lists the violations of a plan or index file.
type PlanSchemaError struct {
	What       string          // "plan", "part" or "plan index"
	Violations []PlanViolation // sorted by path
}

// A PlanViolation is one field that does not fit the schema.
type PlanViolation struct {
	Path    string // network.Ipams[0].Subnets[0].IpAddressPrefix; "" for the whole file
	Message string
}

func (v PlanViolation) String() string {
	if v.Path == "" {
		return v.Message
	}
	return v.Path + ": " + v.Message
}

func (e *PlanSchemaError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s does not fit the schema", e.What)
	if len(e.Violations) == 1 {
		return b.String() + ": " + e.Violations[0].String()
	}
	for _, v := range e.Violations {
		b.WriteString("\n  ")
		b.WriteString(v.String())
	}
	return b.String()
}

func validateJSON(ctx *cue.Context, def cue.Value, what string, data []byte) error {
	// CUE would read more than JSON (comments, unquoted labels): a plan
	// file must be JSON.
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return fmt.Errorf("%s is not valid JSON: %w", what, err)
	}
	v := ctx.CompileBytes(data, cue.Filename(what+".json"))
	if err := v.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	err := def.Unify(v).Validate(cue.Concrete(true))
	if err == nil {
		return nil
	}
	return &PlanSchemaError{What: what, Violations: violations(err, v)}
}

// violations turns a CUE error into one line per path and message: the
// headers of failed disjunctions go (their disjuncts' errors follow), and
// so do duplicates and the mismatches of the other policy types when a
// policy's own settings fail (see policyTypeNoise). A scalar's line shows
// the value found.
func violations(err error, data cue.Value) []PlanViolation {
	var out []PlanViolation
	seen := map[PlanViolation]bool{}
	for _, e := range cueerrors.Errors(err) {
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		if strings.HasSuffix(msg, "errors in empty disjunction:") {
			continue
		}
		// Error() adds the causes Msg() leaves out ("error in call to
		// net.ParseCIDR: netip.ParsePrefix(...): prefix length out of
		// range"), after the CUE path.
		if full, ok := strings.CutPrefix(e.Error(), strings.Join(e.Path(), ".")+": "); ok && len(full) > len(msg) {
			msg = full
		}
		got := scalarJSON(data, e.Path())
		if hint := hostBits(msg, got); hint != "" {
			msg = hint
		} else if got != "" && !strings.Contains(msg, got) {
			msg += " (found " + got + ")"
		}
		pv := PlanViolation{Path: formatPath(e.Path()), Message: msg}
		if !seen[pv] {
			seen[pv] = true
			out = append(out, pv)
		}
	}
	out = slices.DeleteFunc(out, func(v PlanViolation) bool { return policyTypeNoise(v, out) })
	if len(out) == 0 {
		out = append(out, PlanViolation{Message: err.Error()})
	}
	slices.SortStableFunc(out, func(a, b PlanViolation) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// policyTypeNoise reports whether v is the Type mismatch of a disjunct
// of #Policy other than the one the policy's Type selects: a policy
// "network.Policies[0]" of Type "VSID" whose settings fail also fails
// every other disjunct at its Type ("conflicting values "VxlanPort" and
// "VSID"", and the fallback's "out of bound !~..."). Those lines are
// dropped when the policy has another violation, under its Settings.
func policyTypeNoise(v PlanViolation, all []PlanViolation) bool {
	policy, ok := strings.CutSuffix(v.Path, ".Type")
	if !ok || !strings.HasSuffix(policy, "]") || !strings.Contains(policy, "Policies[") {
		return false
	}
	if !strings.HasPrefix(v.Message, "conflicting values ") && !strings.Contains(v.Message, "out of bound !~") {
		return false
	}
	for _, o := range all {
		if strings.HasPrefix(o.Path, policy+".") && o.Path != v.Path {
			return true
		}
	}
	return false
}

// scalarJSON returns the JSON of the scalar at an error's path in data,
// or "" if there is none there.
func scalarJSON(data cue.Value, path []string) string {
	if len(path) == 0 {
		return ""
	}
	v := data.LookupPath(cue.MakePath(pathSelectors(path)...))
	if !v.Exists() {
		return ""
	}
	switch v.Kind() {
	case cue.StringKind, cue.IntKind, cue.FloatKind, cue.NumberKind, cue.BoolKind, cue.NullKind:
		b, err := v.MarshalJSON()
		if err != nil {
			return ""
		}
		return string(b)
	}
	return ""
}

// hostBits explains the failure msg of #Prefix's host-bit check
// (strings.HasPrefix of the masked address) on the value got, in JSON.
func hostBits(msg, got string) string {
	var s string
	if !strings.Contains(msg, "strings.HasPrefix(") || json.Unmarshal([]byte(got), &s) != nil {
		return ""
	}
	p, err := netip.ParsePrefix(s)
	if err != nil || p.Masked() == p {
		return ""
	}
	return fmt.Sprintf("%s has host bits set: the network prefix is %q", got, p.Masked())
}
