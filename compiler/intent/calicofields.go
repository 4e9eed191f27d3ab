package intent

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hnsplan/hnsplan/compiler/calicoapi"
	"github.com/hnsplan/hnsplan/compiler/diag"
)

// RuleCalicoFieldUnused is the info for a field of a Calico resource (or
// of the operator's Installation) in the intent that Calico's API has and
// hnsplan does not read.
const RuleCalicoFieldUnused = "calico-field-unused"

// checkCalicoFields holds obj, a Calico configuration object of the
// intent, to Calico's own API (package calicoapi): a field the API does
// not have is an error (unknownSev for the Installation, whose catalog
// can lag the operator), a value the API would refuse is an error at the
// value, and a valid field that model — the Go type hnsplan decodes the
// spec into — does not have is an info that says hnsplan does not use it.
// The fields model has are left to the decoder and hnsplan's own checks.
func checkCalicoFields(kind string, obj *yaml.Node, model reflect.Type, unknownSev diag.Severity, d *yamlDecoder) {
	k, ok := calicoapi.Lookup(kind)
	if !ok || obj.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(obj.Content); i += 2 {
		key, val := obj.Content[i], obj.Content[i+1]
		switch key.Value {
		case "apiVersion", "kind", "metadata":
		case "status":
			// Written by the cluster (kubectl get -o yaml); not intent.
		case "spec":
			w := fieldWalker{kind: kind, d: d, unknownSev: unknownSev, used: usedFields(model)}
			w.walk(k.Spec, val, "spec", model)
		default:
			d.errs.Add(diag.Finding{Rule: d.rule, Severity: diag.Error, Pos: nodePos(d.file, key), Path: key.Value,
				Message: fmt.Sprintf("unknown field %s: %s has apiVersion, kind, metadata and spec%s", diag.Excerpt(key.Value), aKind(kind), d.what)})
		}
	}
}

type fieldWalker struct {
	kind       string
	d          *yamlDecoder
	unknownSev diag.Severity
	used       string // the spec fields hnsplan reads, for the info
}

func (w *fieldWalker) walk(n *calicoapi.Node, v *yaml.Node, path string, t reflect.Type) {
	for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice) {
		t = t.Elem()
	}
	if v.Kind == yaml.AliasNode {
		v = v.Alias
	}
	if v.Kind == yaml.SequenceNode && n.Type == "array" && n.Items != nil {
		for i, item := range v.Content {
			w.walk(n.Items, item, fmt.Sprintf("%s[%d]", path, i), t)
		}
		return
	}
	if v.Kind != yaml.MappingNode || n.Type != "object" || t == nil || t.Kind() != reflect.Struct {
		return // a modelled value: the decoder checks it
	}
	fields := structFields(t)
	for i := 0; i+1 < len(v.Content); i += 2 {
		key, val := v.Content[i], v.Content[i+1]
		kp := joinPath(path, key.Value)
		c := n.Props[key.Value]
		if idx, modelled := fields[key.Value]; modelled {
			ft := t.FieldByIndex(idx).Type
			switch {
			case c == nil:
			case isStruct(ft):
				w.walk(c, val, kp, ft)
			default:
				w.problems(c.Check(val, kp))
			}
			continue
		}
		if c == nil {
			if n.Open || n.Map != nil {
				continue
			}
			msg := fmt.Sprintf("unknown field %s: %s has no such field in Calico's API (%s)", diag.Excerpt(key.Value), w.where(path), calicoapi.Versions)
			if near := n.Nearest(key.Value); near != "" {
				msg += fmt.Sprintf("; did you mean %q?", near)
			}
			if w.unknownSev != diag.Error {
				msg += "; hnsplan ignores it"
			}
			w.d.errs.Add(diag.Finding{Rule: w.d.rule, Severity: w.unknownSev, Pos: nodePos(w.d.file, key), Path: kp, Message: msg + w.d.what})
			continue
		}
		if problems := c.Check(val, kp); len(problems) > 0 {
			w.problems(problems)
		} else {
			w.d.errs.Add(diag.Finding{Rule: RuleCalicoFieldUnused, Severity: diag.Info, Pos: nodePos(w.d.file, key), Path: kp,
				Message: fmt.Sprintf("a valid %s field that hnsplan does not use (it reads %s); the cluster applies it as written%s", w.kind, w.used, w.d.what)})
		}
	}
}

// problems reports what Calico's API refuses, each at its value.
func (w *fieldWalker) problems(l []calicoapi.Problem) {
	for _, p := range l {
		w.d.errs.Add(diag.Finding{Rule: w.d.rule, Severity: diag.Error, Pos: nodePos(w.d.file, p.Node), Path: p.Path,
			Message: fmt.Sprintf("%s (Calico's API server refuses it)%s", p.Msg, w.d.what)})
	}
}

// isStruct says whether t is a struct, or a pointer to or list of them.
func isStruct(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct
}

// where names the object at path, for the unknown-field message.
func (w *fieldWalker) where(path string) string {
	if path == "spec" {
		return aKind(w.kind) + "'s spec"
	}
	return fmt.Sprintf("%s of %s", path, aKind(w.kind))
}

// aKind is kind with its indefinite article: "an IPPool".
func aKind(kind string) string {
	if strings.ContainsRune("AEIOU", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}

// usedFields lists the spec fields model reads: "spec.vxlanVNI,
// spec.vxlanPort and 3 more".
func usedFields(model reflect.Type) string {
	for model.Kind() == reflect.Pointer {
		model = model.Elem()
	}
	var names []string
	for name := range structFields(model) {
		names = append(names, "spec."+name)
	}
	slices.Sort(names)
	switch {
	case len(names) == 0:
		return "none of its fields"
	case len(names) == 1:
		return names[0]
	case len(names) <= 6:
		return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
	}
	return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
}

// calicoHint says, for a field hnsplan's Go type for a Calico kind does not
// have, whether Calico's API has it: the nearest field if the name is a
// slip, or that Calico Open Source does not have it (a Calico Enterprise
// field, most often). path is the data path of the object holding it.
func calicoHint(kind, path, field string) string {
	if kind == "" {
		return ""
	}
	k, ok := calicoapi.Lookup(kind)
	if !ok {
		return ""
	}
	n := k.Spec
	rest, ok := strings.CutPrefix(path, "spec")
	if !ok {
		return ""
	}
	for _, part := range strings.FieldsFunc(rest, func(r rune) bool { return r == '.' }) {
		name, _, _ := strings.Cut(part, "[")
		c := n.Props[name]
		if c == nil {
			return ""
		}
		for c.Type == "array" && c.Items != nil {
			c = c.Items
		}
		n = c
	}
	if n.Props[field] != nil {
		return fmt.Sprintf(": Calico's API has it, but hnsplan cannot compile it; remove it, or keep the %s off the Windows nodes", kind)
	}
	msg := fmt.Sprintf(": not a field of Calico Open Source's API (%s) here", calicoapi.Versions)
	if near := n.Nearest(field); near != "" {
		return msg + fmt.Sprintf("; did you mean %q?", near)
	}
	return msg + ": misplaced, or a Calico Enterprise field, which hnsplan does not enforce"
}
