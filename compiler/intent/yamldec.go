package intent

import (
	"encoding"
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/hnsplan/hnsplan/compiler/calicoapi"
	"github.com/hnsplan/hnsplan/compiler/diag"
)

// A yamlDecoder decodes a YAML node tree into a Go value by its json tags,
// the way the Kubernetes API server reads a manifest, but keeps going after
// an error and reports each one with the line and column of its node. With
// strict set, a field the Go type does not have is an error (kubectl's
// default field validation); without it, the field is ignored, which is what
// live state from a newer API server needs.
// yamlNode is a YAML node tree with positions.
type yamlNode = yaml.Node

type yamlDecoder struct {
	file   string
	strict bool
	rule   string
	what   string // suffix of every message: " (document 2)"
	errs   *diag.List
	// rejected is set when the object is of a kind the caller does not take.
	rejected bool
	// unknownOK leaves fields the Go type does not have to another judge
	// (Calico's API, for the Calico kinds) even when strict.
	unknownOK bool
	// catalog, if set, is the Calico kind whose API an unknown field is
	// looked up in, for a hint (policies: Enterprise-only fields).
	catalog string
}

func (d *yamlDecoder) errorf(n *yaml.Node, path, format string, args ...any) {
	d.relatedf(n, nil, path, format, args...)
}

// relatedf is errorf for a finding with related positions.
func (d *yamlDecoder) relatedf(n *yaml.Node, related []diag.Related, path, format string, args ...any) {
	d.errs.Add(diag.Finding{Rule: d.rule, Severity: diag.Error, Pos: nodePos(d.file, n), Path: path,
		Message: fmt.Sprintf(format+"%s", append(args, d.what)...)}.Relate(related...))
}

func nodePos(file string, n *yaml.Node) diag.Pos {
	if n == nil {
		return diag.Pos{File: file}
	}
	return diag.Pos{File: file, Line: n.Line, Col: n.Column}
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	prefixType          = reflect.TypeFor[netip.Prefix]()
	addrType            = reflect.TypeFor[netip.Addr]()
)

func joinPath(path string, key any) string {
	switch k := key.(type) {
	case int:
		return fmt.Sprintf("%s[%d]", path, k)
	case string:
		if path == "" {
			return k
		}
		return path + "." + k
	}
	panic("bad path element")
}

// decode decodes n into v (which must be settable) at the data path path.
func (d *yamlDecoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		v.Set(reflect.Zero(v.Type()))
		return
	}
	t := v.Type()
	switch {
	case t == prefixType:
		d.decodePrefix(n, v, path)
		return
	case t == addrType:
		if n.Kind != yaml.ScalarNode {
			d.errorf(n, path, "expected an IP address, found %s", describe(n))
			return
		}
		a, err := netip.ParseAddr(n.Value)
		if err != nil {
			d.errorf(n, path, "%s is not an IP address", diag.Excerpt(n.Value))
			return
		}
		v.Set(reflect.ValueOf(a))
		return
	case t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(jsonUnmarshalerType):
		var x any
		if err := n.Decode(&x); err != nil {
			d.errorf(n, path, "%v", err)
			return
		}
		b, err := json.Marshal(x)
		if err == nil {
			err = v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(b)
		}
		if err != nil {
			d.errorf(n, path, "%s", strings.TrimPrefix(err.Error(), "json: "))
		}
		return
	case t.Kind() != reflect.Pointer && t.Kind() != reflect.String && reflect.PointerTo(t).Implements(textUnmarshalerType):
		if n.Kind != yaml.ScalarNode {
			d.errorf(n, path, "expected a string, found %s", describe(n))
			return
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.Value)); err != nil {
			d.errorf(n, path, "%v", err)
		}
		return
	}

	switch t.Kind() {
	case reflect.Pointer:
		// A value that does not decode leaves the pointer nil: "not
		// given", not a zero that later checks would take for a value.
		before := len(*d.errs)
		p := reflect.New(t.Elem())
		d.decode(n, p.Elem(), path)
		if len(*d.errs) == before {
			v.Set(p)
		}
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.errorf(n, path, "expected an object, found %s", describe(n))
			return
		}
		fields := structFields(t)
		seen := map[string]*yaml.Node{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			kpath := joinPath(path, k.Value)
			if first := seen[k.Value]; first != nil {
				d.relatedf(k, []diag.Related{diag.At(nodePos(d.file, first), "the first %q", k.Value)}, kpath, "field %q is given twice", k.Value)
				continue
			}
			seen[k.Value] = k
			idx, ok := fields[k.Value]
			if !ok {
				if d.strict && !d.unknownOK {
					d.errorf(k, kpath, "unknown field %s%s", diag.Excerpt(k.Value), calicoHint(d.catalog, path, k.Value))
				}
				continue
			}
			d.decode(val, fieldByIndex(v, idx), kpath)
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 { // []byte: base64, as in JSON
			var s string
			if n.Kind != yaml.ScalarNode || n.Decode(&s) != nil {
				d.errorf(n, path, "expected a base64 string, found %s", describe(n))
				return
			}
			b, _ := json.Marshal(s)
			if err := json.Unmarshal(b, v.Addr().Interface()); err != nil {
				d.errorf(n, path, "%v", err)
			}
			return
		}
		if n.Kind != yaml.SequenceNode {
			d.errorf(n, path, "expected a list, found %s", describe(n))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.decode(c, s.Index(i), joinPath(path, i))
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.errorf(n, path, "expected an object, found %s", describe(n))
			return
		}
		if t.Key().Kind() != reflect.String {
			panic("intent: map key of kind " + t.Key().Kind().String())
		}
		m := reflect.MakeMapWithSize(t, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			kpath := joinPath(path, k.Value)
			if k.Kind != yaml.ScalarNode {
				d.errorf(k, path, "expected a string key, found %s", describe(k))
				continue
			}
			ev := reflect.New(t.Elem()).Elem()
			d.decode(val, ev, kpath)
			m.SetMapIndex(reflect.ValueOf(k.Value).Convert(t.Key()), ev)
		}
		v.Set(m)
	case reflect.Interface:
		var x any
		if err := n.Decode(&x); err != nil {
			d.errorf(n, path, "%v", err)
			return
		}
		if x != nil {
			v.Set(reflect.ValueOf(x))
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			hint := ""
			if n.Kind == yaml.ScalarNode {
				hint = fmt.Sprintf(" (quote it: %s)", diag.Excerpt(n.Value))
			}
			d.errorf(n, path, "expected a string, found %s%s", describe(n), hint)
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
			d.errorf(n, path, "expected true or false, found %s", describe(n))
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var i int64
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&i) != nil {
			d.errorf(n, path, "expected an integer, found %s", describe(n))
			return
		}
		if v.OverflowInt(i) {
			d.errorf(n, path, "%d is out of range for this field", i)
			return
		}
		v.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		var i uint64
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&i) != nil {
			d.errorf(n, path, "expected a non-negative integer, found %s", describe(n))
			return
		}
		if v.OverflowUint(i) {
			d.errorf(n, path, "%d is out of range for this field", i)
			return
		}
		v.SetUint(i)
	case reflect.Float32, reflect.Float64:
		var f float64
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") || n.Decode(&f) != nil {
			d.errorf(n, path, "expected a number, found %s", describe(n))
			return
		}
		v.SetFloat(f)
	default:
		panic("intent: cannot decode into " + t.String())
	}
}

// decodePrefix reads a CIDR. A bare address is its host prefix (/32, /128),
// as Calico accepts in nets; host bits are reported, and the prefix masked.
func (d *yamlDecoder) decodePrefix(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, path, "expected a CIDR, found %s", describe(n))
		return
	}
	p, err := parseCIDR(n.Value, true)
	if err != nil {
		d.errorf(n, path, "%v", err)
		return
	}
	if p != p.Masked() {
		d.errs.Errorf("cidr-host-bits", nodePos(d.file, n), path, "%s has host bits set; write %s%s", p, p.Masked(), d.what)
	}
	v.Set(reflect.ValueOf(p.Masked()))
}

// parseCIDR parses a CIDR; with bareAddr, an address alone is its host prefix.
func parseCIDR(s string, bareAddr bool) (netip.Prefix, error) {
	if bareAddr && !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%s is not a CIDR or an IP address", diag.Excerpt(s))
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%s is not a CIDR (want e.g. \"10.244.0.0/16\")", diag.Excerpt(s))
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("%q is an IPv4-mapped IPv6 CIDR; write it as IPv4", s)
	}
	return p, nil
}

// describe names what a YAML value is, for messages (bounded).
func describe(n *yaml.Node) string { return calicoapi.Describe(n) }

var fieldCache sync.Map // reflect.Type -> map[string][]int

// structFields maps the JSON names of t's fields, inline embedded structs
// included, to their field index paths.
func structFields(t reflect.Type) map[string][]int {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string][]int)
	}
	m := map[string][]int{}
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" && opts == "" || !f.IsExported() && !f.Anonymous {
				continue
			}
			idx := append(append([]int(nil), index...), i)
			ft := f.Type
			if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
				walk(ft, idx)
				continue
			}
			if name == "" {
				name = f.Name
			}
			m[name] = idx
		}
	}
	walk(t, nil)
	fieldCache.Store(t, m)
	return m
}

func fieldByIndex(v reflect.Value, index []int) reflect.Value {
	for _, i := range index {
		v = v.Field(i)
	}
	return v
}

// lookupNode finds the node at path (field names and list indexes) below n,
// returning the deepest node it reached.
func lookupNode(n *yaml.Node, path []any) *yaml.Node {
	for _, p := range path {
		if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
			n = n.Content[0]
		}
		var next *yaml.Node
		switch k := p.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == k {
						next = n.Content[i+1]
						break
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && k >= 0 && k < len(n.Content) {
				next = n.Content[k]
			}
		}
		if next == nil {
			return n
		}
		n = next
	}
	return n
}
