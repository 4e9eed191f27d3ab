package intent

import (
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

// nameRules are the API server's rules for the names of the inventory's
// kinds (what `kubectl create` would refuse): the name, and the namespace
// of namespaced kinds.
var nameRules = map[string]func(string) []string{
	"Pod":           validation.IsDNS1123Subdomain,
	"Namespace":     validation.IsDNS1123Label,
	"Service":       validation.IsDNS1035Label,
	"Node":          validation.IsDNS1123Subdomain,
	"EndpointSlice": validation.IsDNS1123Subdomain,
	"BlockAffinity": validation.IsDNS1123Subdomain,
	// Calico configuration (the CRD's IPAMConfig is IPAMConfiguration in v3).
	"IPPool":             validation.IsDNS1123Subdomain,
	"IPAMConfig":         validation.IsDNS1123Subdomain,
	"IPAMConfiguration":  validation.IsDNS1123Subdomain,
	"FelixConfiguration": validation.IsDNS1123Subdomain,
	"BGPConfiguration":   validation.IsDNS1123Subdomain,
}

var namespaced = map[string]bool{"Pod": true, "Service": true, "EndpointSlice": true}

// checkMeta validates the metadata of an inventory object as the API
// server would: its name (and namespace), and its labels' keys and values.
// A live cluster never holds an object that fails, so one that does is
// made up or mangled, and is dropped: its name would otherwise reach
// plans, file names and terminals. It reports whether obj passed.
func checkMeta(obj *yaml.Node, kind string, d *yamlDecoder) bool {
	ok := true
	fail := func(n *yaml.Node, path, what, value string, msgs []string) {
		d.errorf(n, path, "%s %s is invalid: %s", what, diag.Excerpt(value), strings.Join(msgs, "; "))
		ok = false
	}
	// child is metadata.<name>, or nil: lookupNode returns the nearest
	// enclosing node of a missing one.
	meta := child(obj, "metadata")
	scalar := func(name string) (*yaml.Node, string, bool) {
		n := child(meta, name)
		if n == nil || n.Kind != yaml.ScalarNode {
			return cmpOr(n, cmpOr(meta, obj)), "", false
		}
		if n.Tag != "!!str" && n.Tag != "!!null" {
			// name: 00 is a number: the decoder would leave the name empty.
			d.errorf(n, "metadata."+name, "expected a string, found %s (quote it: %s)", describe(n), diag.Excerpt(n.Value))
			ok = false
			return n, "", false
		}
		return n, n.Value, true
	}
	if rule := nameRules[kind]; rule != nil {
		n, v, present := scalar("name")
		switch {
		case !ok: // a name that is not a string: scalar said so
		case !present || v == "":
			d.errorf(n, "metadata.name", "%s has no metadata.name", kind)
			ok = false
		default:
			if msgs := rule(v); len(msgs) > 0 {
				fail(n, "metadata.name", kind+" name", v, msgs)
			}
		}
	}
	if namespaced[kind] {
		if n, v, present := scalar("namespace"); present && v != "" {
			if msgs := validation.IsDNS1123Label(v); len(msgs) > 0 {
				fail(n, "metadata.namespace", "namespace", v, msgs)
			}
		}
	}
	if labels := child(meta, "labels"); labels != nil && labels.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(labels.Content); i += 2 {
			k, v := labels.Content[i], labels.Content[i+1]
			path := "metadata.labels." + k.Value
			if msgs := validation.IsQualifiedName(k.Value); len(msgs) > 0 {
				fail(k, path, "label key", k.Value, msgs)
			} else if msgs := validation.IsValidLabelValue(v.Value); v.Kind == yaml.ScalarNode && len(msgs) > 0 {
				fail(v, path, "label value", v.Value, msgs)
			}
		}
	}
	return ok
}

// child is the value of key in the mapping n, or nil.
func child(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func cmpOr(a, b *yaml.Node) *yaml.Node {
	if a != nil {
		return a
	}
	return b
}
