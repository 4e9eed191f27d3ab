// Package selector parses and evaluates Calico label selectors, such as
//
//	app == "web" && tier in {"api", "db"} && !has(quarantine)
//
// It follows the grammar, evaluation rules and canonical form of Calico's
// libcalico-go/lib/selector/parser, checked against the vectors extracted from
// its tests (testvectors/calico/selector.jsonl):
//
//	selector   = [ or ]                       // empty means all()
//	or         = and { "||" and }
//	and        = operation { "&&" operation }
//	operation  = { "!" } ( "(" or ")" | "all()" | "global()" | "has(" key ")" |
//	             key ( "==" | "!=" | "contains" | "starts with" | "ends with" ) string |
//	             key ( "in" | "not in" ) "{" [ string { "," string } [ "," ] ] "}" )
//	key        = 1*( letter | digit | "_" | "." | "/" | "-" )
//	string     = '"' { any byte but '"' } '"' | "'" { any byte but "'" } "'"
//
// Only spaces and tabs separate tokens, as in Calico. Strings have no escapes.
// Label keys are not checked against the stricter Kubernetes key syntax.
package selector

import (
	"crypto/sha256"
	"encoding/base64"
	"slices"
	"strings"
)

// Labels is a set of labels that a Selector can be evaluated against.
type Labels interface {
	// Get returns the value of the label key and whether it is present.
	Get(key string) (value string, ok bool)
}

// Map is a plain label map used as Labels.
type Map map[string]string

// Get returns m[key] and whether key is in m.
func (m Map) Get(key string) (string, bool) {
	v, ok := m[key]
	return v, ok
}

var _ Labels = Map(nil)

// Selector is a parsed label selector. It is immutable and safe for
// concurrent use.
//
// The zero Selector is all(), the selector that matches everything, like the
// empty string. Two Selectors are equivalent when their String forms are
// equal; use Equal rather than ==, which compares parse trees by identity.
type Selector struct {
	root *node  // nil means all()
	str  string // canonical form; "" only in the zero Selector
}

// Parse parses s as a Calico selector. The empty (or blank) selector is all().
// A syntax error is returned as a *SyntaxError.
func Parse(s string) (Selector, error) {
	p := parser{src: s}
	root, err := p.parse()
	if err != nil {
		return Selector{}, err
	}
	var b strings.Builder
	root.format(&b)
	return Selector{root: root, str: b.String()}, nil
}

// MustParse is like Parse but panics on error. It is intended for use in
// tests with hard-coded selectors.
func MustParse(s string) Selector {
	sel, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return sel
}

// Evaluate reports whether the selector matches labels. A nil map has no
// labels.
func (s Selector) Evaluate(labels map[string]string) bool {
	if s.root == nil {
		return true
	}
	return s.root.eval(Map(labels))
}

// EvaluateLabels is Evaluate for labels that are not a plain map.
func (s Selector) EvaluateLabels(labels Labels) bool {
	if s.root == nil {
		return true
	}
	return s.root.eval(labels)
}

// String returns the canonical form of s, byte for byte the one Calico
// prints: single spaces around binary operators, every && and || group in
// parentheses, no parentheses around a single operation, set literals sorted
// and without duplicates, each string in double quotes unless it contains a
// double quote, "starts with"/"ends with" spelled with a space, and an
// empty selector printed as "all()". Parsing String gives back the same
// String.
//
// There is one deliberate difference from Calico: a negated parenthesised
// negation, !(!x), is printed as x. Calico prints "!!x", which its own parser
// reads back as x, so its form is not stable under reparsing.
func (s Selector) String() string {
	if s.str == "" {
		return "all()"
	}
	return s.str
}

// UniqueID returns Calico's identifier for s: "s:" followed by the unpadded
// URL-safe base64 encoding of the SHA-224 digest of "s:" + s.String().
// Selectors with the same canonical form have the same UniqueID.
func (s Selector) UniqueID() string {
	const prefix = "s:"
	sum := sha256.Sum224([]byte(prefix + s.String()))
	return prefix + base64.RawURLEncoding.EncodeToString(sum[:])
}

// Equal reports whether s and t have the same canonical form.
func (s Selector) Equal(t Selector) bool {
	return s.String() == t.String()
}

// IsAll reports whether s is all() itself: the empty selector, "all()", or
// either wrapped in parentheses or an even number of "!". It does not try to
// prove that a more complex selector matches everything.
func (s Selector) IsAll() bool {
	return s.root == nil || s.root.op == opAll
}

// LabelKeys returns the label keys that s mentions, sorted and without
// duplicates. It returns nil for a selector that mentions none, such as
// all() or global(). The caller owns the returned slice.
func (s Selector) LabelKeys() []string {
	var keys []string
	s.root.walk(func(n *node) {
		if n.key != "" {
			keys = append(keys, n.key)
		}
	})
	slices.Sort(keys)
	return slices.Compact(keys)
}

// MarshalText returns the canonical form of s.
func (s Selector) MarshalText() ([]byte, error) {
	return []byte(s.String()), nil
}

// UnmarshalText parses text with Parse and stores the result in s.
func (s *Selector) UnmarshalText(text []byte) error {
	sel, err := Parse(string(text))
	if err != nil {
		return err
	}
	*s = sel
	return nil
}

// op is the kind of a node.
type op uint8

const (
	opAll        op = iota + 1 // all()
	opGlobal                   // global()
	opHas                      // has(key)
	opEq                       // key == value
	opNe                       // key != value
	opContains                 // key contains value
	opStartsWith               // key starts with value
	opEndsWith                 // key ends with value
	opIn                       // key in set
	opNotIn                    // key not in set
	opNot                      // !kids[0]
	opAnd                      // kids[0] && kids[1] && ...
	opOr                       // kids[0] || kids[1] || ...
)

// node is one node of a parsed selector.
type node struct {
	op    op
	key   string   // label key, for opHas through opNotIn
	value string   // for opEq through opEndsWith
	set   []string // for opIn and opNotIn: sorted, no duplicates
	kids  []*node  // for opNot (one), opAnd and opOr (two or more)
}

// eval reports whether n matches labels. Following Calico, != and not in
// match when the label is absent; every other label test needs the label.
func (n *node) eval(labels Labels) bool {
	switch n.op {
	case opAll, opGlobal:
		return true
	case opHas:
		_, ok := labels.Get(n.key)
		return ok
	case opNot:
		return !n.kids[0].eval(labels)
	case opAnd:
		for _, k := range n.kids {
			if !k.eval(labels) {
				return false
			}
		}
		return true
	case opOr:
		for _, k := range n.kids {
			if k.eval(labels) {
				return true
			}
		}
		return false
	}
	v, ok := labels.Get(n.key)
	switch n.op {
	case opEq:
		return ok && v == n.value
	case opNe:
		return !ok || v != n.value
	case opContains:
		return ok && strings.Contains(v, n.value)
	case opStartsWith:
		return ok && strings.HasPrefix(v, n.value)
	case opEndsWith:
		return ok && strings.HasSuffix(v, n.value)
	case opIn:
		return ok && inSet(n.set, v)
	case opNotIn:
		return !ok || !inSet(n.set, v)
	}
	panic("selector: invalid node op")
}

func inSet(set []string, v string) bool {
	_, found := slices.BinarySearch(set, v)
	return found
}

// walk calls f for n and every node below it. n may be nil.
func (n *node) walk(f func(*node)) {
	if n == nil {
		return
	}
	f(n)
	for _, k := range n.kids {
		k.walk(f)
	}
}

var binaryOps = [...]string{
	opEq:         " == ",
	opNe:         " != ",
	opContains:   " contains ",
	opStartsWith: " starts with ",
	opEndsWith:   " ends with ",
	opIn:         " in {",
	opNotIn:      " not in {",
	opAnd:        " && ",
	opOr:         " || ",
}

// format writes the canonical form of n to b.
func (n *node) format(b *strings.Builder) {
	switch n.op {
	case opAll:
		b.WriteString("all()")
	case opGlobal:
		b.WriteString("global()")
	case opHas:
		b.WriteString("has(")
		b.WriteString(n.key)
		b.WriteByte(')')
	case opEq, opNe, opContains, opStartsWith, opEndsWith:
		b.WriteString(n.key)
		b.WriteString(binaryOps[n.op])
		quote(b, n.value)
	case opIn, opNotIn:
		b.WriteString(n.key)
		b.WriteString(binaryOps[n.op])
		for i, v := range n.set {
			if i > 0 {
				b.WriteString(", ")
			}
			quote(b, v)
		}
		b.WriteByte('}')
	case opNot:
		b.WriteByte('!')
		n.kids[0].format(b)
	case opAnd, opOr:
		b.WriteByte('(')
		for i, k := range n.kids {
			if i > 0 {
				b.WriteString(binaryOps[n.op])
			}
			k.format(b)
		}
		b.WriteByte(')')
	default:
		panic("selector: invalid node op")
	}
}

// quote writes v in double quotes, or in single quotes if it contains a
// double quote. A parsed value never holds both kinds of quote.
func quote(b *strings.Builder, v string) {
	q := byte('"')
	if strings.IndexByte(v, '"') >= 0 {
		q = '\''
	}
	b.WriteByte(q)
	b.WriteString(v)
	b.WriteByte(q)
}

// RequiredEquals returns label key=value pairs that every label set the
// selector matches has: the `==` terms (and one-value `in` terms) of its
// top-level conjunction. It is a necessary condition only — a renderer
// uses it to look candidates up in an index, then evaluates the selector.
func (s Selector) RequiredEquals() map[string]string {
	out := map[string]string{}
	var walk func(n *node)
	walk = func(n *node) {
		switch {
		case n == nil:
		case n.op == opEq:
			out[n.key] = n.value
		case n.op == opIn && len(n.set) == 1:
			out[n.key] = n.set[0]
		case n.op == opAnd:
			for _, k := range n.kids {
				walk(k)
			}
		}
	}
	walk(s.root)
	return out
}

// ForRuleNamespaces returns s as Calico reads it in a policy rule's
// namespaceSelector, where global() stands for the non-namespaced
// resources only (host endpoints, global network sets) and so selects no
// pod: every global() becomes !all(), false for every namespace. changed
// reports whether s had a global(). Calico does the same by rewriting
// global() to !has(projectcalico.org/namespace) (projectcalico/calico,
// libcalico-go/lib/backend/syncersv1/updateprocessors/rules.go,
// getEndpointSelector). A policy's own selector and a
// GlobalNetworkPolicy's spec.namespaceSelector are not rewritten there:
// global() in them stays true, as Evaluate has it.
func (s Selector) ForRuleNamespaces() (out Selector, changed bool) {
	var rewrite func(n *node) *node
	rewrite = func(n *node) *node {
		if n == nil {
			return nil
		}
		if n.op == opGlobal {
			changed = true
			return &node{op: opNot, kids: []*node{{op: opAll}}}
		}
		c := *n
		c.kids = make([]*node, len(n.kids))
		for i, k := range n.kids {
			c.kids[i] = rewrite(k)
		}
		return &c
	}
	root := rewrite(s.root)
	if !changed {
		return s, false
	}
	var b strings.Builder
	root.format(&b)
	// Reparsed, so that the result is in the canonical form Parse gives
	// (a double negation collapses).
	out, err := Parse(b.String())
	if err != nil {
		panic("selector: a rewritten selector does not parse: " + err.Error())
	}
	return out, true
}
