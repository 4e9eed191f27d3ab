// Package calicoapi is the field catalog of the Calico resources hnsplan
// reads: every field of the spec of projectcalico.org/v3 IPPool,
// IPAMConfiguration, FelixConfiguration, BGPConfiguration, NetworkPolicy,
// GlobalNetworkPolicy, Tier and HostEndpoint, and of the tigera-operator's
// operator.tigera.io/v1 Installation, with the types, enums, patterns and
// bounds Calico's API server enforces.
//
// Calico's Go API types (github.com/projectcalico/api) and the operator's
// (github.com/tigera/operator/api) cannot be imported: the module proxy
// does not serve them. The catalog is therefore generated from the
// CustomResourceDefinitions in github.com/projectcalico/calico, whose
// schemas controller-gen writes from those very types (schema.json, by
// hack/calicoschema; its "source" names the module version and checksum),
// and completed by hand with the fields later Calico releases added
// (newer.json). A Node checks a YAML value as the API server's schema
// validation would, and says where it fails.
package calicoapi

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

//go:embed schema.json
var schemaJSON []byte

//go:embed newer.json
var newerJSON []byte

// A Node is the schema of one value.
type Node struct {
	// Type is object, array, string, integer, number, boolean,
	// int-or-string, or any.
	Type     string           `json:"type"`
	Props    map[string]*Node `json:"props,omitempty"`
	Items    *Node            `json:"items,omitempty"`
	Map      *Node            `json:"map,omitempty"`  // the values of a map
	Open     bool             `json:"open,omitempty"` // unknown fields are kept
	Enum     []any            `json:"enum,omitempty"`
	Pattern  string           `json:"pattern,omitempty"`
	Min      *float64         `json:"min,omitempty"`
	Max      *float64         `json:"max,omitempty"`
	MinLen   *int             `json:"minLen,omitempty"`
	MaxLen   *int             `json:"maxLen,omitempty"`
	MinItems *int             `json:"minItems,omitempty"`
	MaxItems *int             `json:"maxItems,omitempty"`
	Format   string           `json:"format,omitempty"`
	// Newer is set on the fields newer.json adds: a release later than
	// the module's.
	Newer bool `json:"-"`

	re *regexp.Regexp
}

// Kind is the catalog of one resource kind.
type Kind struct {
	APIVersion string `json:"apiVersion"`
	Spec       *Node  `json:"spec"`
}

// Source says what the catalog was made from.
type Source struct {
	Module  string `json:"module"`
	Version string `json:"version"`
	Sum     string `json:"sum"`
}

var catalog = sync.OnceValues(func() (map[string]*Kind, Source) {
	var base struct {
		Source Source           `json:"source"`
		Kinds  map[string]*Kind `json:"kinds"`
	}
	var newer struct {
		Kinds map[string]map[string]*Node `json:"kinds"`
	}
	if err := json.Unmarshal(schemaJSON, &base); err != nil {
		panic("calicoapi: schema.json: " + err.Error())
	}
	if err := json.Unmarshal(newerJSON, &newer); err != nil {
		panic("calicoapi: newer.json: " + err.Error())
	}
	for kind, fields := range newer.Kinds {
		k := base.Kinds[kind]
		if k == nil {
			k = &Kind{APIVersion: "projectcalico.org/v3", Spec: &Node{Type: "object"}}
			base.Kinds[kind] = k
		}
		if k.Spec.Props == nil {
			k.Spec.Props = map[string]*Node{}
		}
		for path, n := range fields {
			n.Newer = k.Spec.Props[path] == nil
			k.Spec.Props[path] = n
		}
	}
	for _, k := range base.Kinds {
		k.Spec.compile()
	}
	return base.Kinds, base.Source
})

// compile compiles the patterns below n. Calico's patterns are RE2 (Go's
// regexp); one that does not compile is a catalog bug.
func (n *Node) compile() {
	if n == nil {
		return
	}
	if n.Pattern != "" {
		n.re = regexp.MustCompile(n.Pattern)
	}
	for _, c := range n.Props {
		c.compile()
	}
	n.Items.compile()
	n.Map.compile()
}

// Lookup returns the catalog of kind (v3 kind names; "Installation" for
// the operator's).
func Lookup(kind string) (*Kind, bool) {
	kinds, _ := catalog()
	k, ok := kinds[kind]
	return k, ok
}

// Kinds lists the kinds of the catalog, sorted.
func Kinds() []string {
	kinds, _ := catalog()
	return slices.Sorted(maps.Keys(kinds))
}

// Origin says what the catalog was made from, for messages and docs.
func Origin() Source {
	_, src := catalog()
	return src
}

// Versions names the API versions the catalog covers, for messages.
const Versions = "Calico v3.28 to v3.32"

// Problem is one way a value does not fit its schema.
type Problem struct {
	Node *yaml.Node // where: the value, or the key of an unknown field
	Path string     // data path, e.g. spec.bpfLogFilters.all
	Msg  string
}

// Check checks v, at path, against n, and returns each problem: a value of
// the wrong type, outside an enum, a pattern or a bound, and a field the
// schema does not have.
func (n *Node) Check(v *yaml.Node, path string) []Problem {
	var out []Problem
	n.check(v, path, &out)
	return out
}

func (n *Node) check(v *yaml.Node, path string, out *[]Problem) {
	if v.Kind == yaml.AliasNode {
		v = v.Alias
	}
	bad := func(format string, args ...any) {
		*out = append(*out, Problem{v, path, fmt.Sprintf(format, args...)})
	}
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return // null is "not set"
	}
	switch n.Type {
	case "any":
		return
	case "object":
		if v.Kind != yaml.MappingNode {
			bad("expected an object, found %s", Describe(v))
			return
		}
		for i := 0; i+1 < len(v.Content); i += 2 {
			k, val := v.Content[i], v.Content[i+1]
			kp := join(path, k.Value)
			switch c := n.Props[k.Value]; {
			case c != nil:
				c.check(val, kp, out)
			case n.Map != nil:
				n.Map.check(val, kp, out)
			case !n.Open && n.Props != nil:
				*out = append(*out, Problem{k, kp, n.unknown(k.Value)})
			}
		}
		return
	case "array":
		if v.Kind != yaml.SequenceNode {
			bad("expected a list, found %s", Describe(v))
			return
		}
		if n.MinItems != nil && len(v.Content) < *n.MinItems {
			bad("needs at least %d items, has %d", *n.MinItems, len(v.Content))
		}
		if n.MaxItems != nil && len(v.Content) > *n.MaxItems {
			bad("takes at most %d items, has %d", *n.MaxItems, len(v.Content))
		}
		if n.Items != nil {
			for i, c := range v.Content {
				n.Items.check(c, fmt.Sprintf("%s[%d]", path, i), out)
			}
		}
		return
	}
	if v.Kind != yaml.ScalarNode {
		bad("expected %s, found %s", article(n.Type), Describe(v))
		return
	}
	switch n.Type {
	case "string":
		if v.Tag != "!!str" {
			bad("expected a string, found %s (quote it)", Describe(v))
			return
		}
	case "boolean":
		if v.Tag != "!!bool" {
			bad("expected true or false, found %s", Describe(v))
			return
		}
	case "integer":
		if v.Tag != "!!int" {
			bad("expected an integer, found %s", Describe(v))
			return
		}
	case "number":
		if v.Tag != "!!int" && v.Tag != "!!float" {
			bad("expected a number, found %s", Describe(v))
			return
		}
	case "int-or-string":
		if v.Tag != "!!int" && v.Tag != "!!str" {
			bad("expected an integer or a string, found %s", Describe(v))
			return
		}
	}
	if len(n.Enum) > 0 && !slices.ContainsFunc(n.Enum, func(e any) bool { return fmt.Sprint(e) == v.Value }) {
		var opts []string
		for _, e := range n.Enum {
			opts = append(opts, fmt.Sprint(e))
		}
		bad("must be one of %s, not %s", strings.Join(opts, ", "), diag.Excerpt(v.Value))
		return
	}
	if n.re != nil && v.Tag == "!!str" && !n.re.MatchString(v.Value) {
		bad("%s does not match Calico's pattern %s", diag.Excerpt(v.Value), n.Pattern)
	}
	if v.Tag == "!!int" || v.Tag == "!!float" {
		f, err := strconv.ParseFloat(strings.ReplaceAll(v.Value, "_", ""), 64)
		if err != nil {
			if i, err2 := strconv.ParseInt(v.Value, 0, 64); err2 == nil {
				f, err = float64(i), nil
			}
		}
		switch {
		case err != nil:
			bad("%s is not a number", Describe(v))
		case n.Min != nil && f < *n.Min:
			bad("%s is below the minimum %s", Describe(v), num(*n.Min))
		case n.Max != nil && f > *n.Max:
			bad("%s is above the maximum %s", Describe(v), num(*n.Max))
		case n.Format == "int32" && (f < math.MinInt32 || f > math.MaxInt32):
			bad("%s is not a 32-bit integer", Describe(v))
		}
	}
	if v.Tag == "!!str" {
		if l := len([]rune(v.Value)); n.MaxLen != nil && l > *n.MaxLen {
			bad("is %d characters long; at most %d", l, *n.MaxLen)
		} else if n.MinLen != nil && l < *n.MinLen {
			bad("is %d characters long; at least %d", l, *n.MinLen)
		}
	}
}

// unknown says that name is not a field of n, with the nearest field's
// name when the two differ by a slip of the keyboard.
func (n *Node) unknown(name string) string {
	msg := fmt.Sprintf("unknown field %s: not a field of Calico's API (%s)", diag.Excerpt(name), Versions)
	if near := n.Nearest(name); near != "" {
		msg += fmt.Sprintf("; did you mean %q?", near)
	}
	return msg
}

// Nearest returns the field of n nearest to name (case-insensitively, at
// most two edits apart), or "".
func (n *Node) Nearest(name string) string {
	byLower := map[string]string{}
	for f := range n.Props {
		byLower[strings.ToLower(f)] = f
	}
	return byLower[diag.Closest(strings.ToLower(name), slices.Sorted(maps.Keys(byLower)), 2)]
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func article(t string) string {
	switch t {
	case "integer":
		return "an integer"
	case "int-or-string":
		return "an integer or a string"
	case "boolean":
		return "true or false"
	}
	return "a " + t
}

// Describe names what a YAML value is, for messages: "an object", "a
// list", a string quoted, a number or bool as written; bounded
// (diag.Excerpt), since the value is the user's.
func Describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "an object"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			return diag.Excerpt(n.Value)
		case "!!null":
			return "null"
		}
		if len(n.Value) <= diag.MaxExcerpt {
			return n.Value // a number or a bool, as written
		}
		return diag.Excerpt(n.Value)
	}
	return "a YAML " + diag.Excerpt(n.Tag)
}
