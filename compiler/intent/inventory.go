package intent

import (
	"fmt"
	"reflect"

	"go.yaml.in/yaml/v3"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

// LoadInventory reads live-state files: what `kubectl get pods,namespaces,
// services,nodes,endpointslices -A -o yaml` (or -o json) prints, plus
// Calico BlockAffinities and configuration (IPPools, IPAMConfigs,
// FelixConfigurations, BGPConfigurations, in their crd.projectcalico.org/v1
// or projectcalico.org/v3 form). Fields this version of hnsplan does not know are
// ignored, since a newer API server adds them; other kinds are ignored with
// a warning. A file that cannot be read is returned as an error.
//
// Each file is read only if it is a regular file (a symlink to one is
// fine: the user named it) of at most DefaultMaxFileSize bytes.
func LoadInventory(files []string, errs *diag.List) (Inventory, error) {
	return loadInventory(files, DefaultMaxFileSize, errs)
}

func loadInventory(files []string, max int64, errs *diag.List) (Inventory, error) {
	var inv Inventory
	rel := relativeTo()
	for _, name := range files {
		data, err := readCapped(name, max)
		if err != nil {
			return inv, fmt.Errorf("inventory: %w", err)
		}
		file := rel(name)
		inv.Files = append(inv.Files, file)
		// Live state of a large cluster is large (--max-file-size says
		// how large), but kubectl writes an indicator every 8 or 9
		// bytes: a file far denser than that is refused before the
		// parser's tree (~270 bytes a value) multiplies it.
		{
			limit := maxInt(int(max/4), MaxFileIndicators)
			if _, line := indicators(data, limit); line > 0 {
				errs.Errorf(RuleInventory, diag.Pos{File: file, Line: line}, "", "the file holds more than %s YAML values by line %d, one every 4 bytes: far denser than what kubectl get writes; not read: write it with kubectl get -o yaml (or -o json)", diag.Thousands(limit), line)
				continue
			}
		}
		if inv.readList(file, data, errs) {
			continue
		}
		forEachObject(file, data, RuleInventory, errs, func(obj *yaml.Node, src Source, apiVersion, kind string) {
			inv.add(obj, src, apiVersion, kind, errs)
		})
	}
	return inv, nil
}

// readList reads data into inv an item at a time, when it is one v1 List
// it can read so — JSON, or YAML as kubectl writes it — and reports
// whether it did; otherwise data is for forEachObject, which parses each
// document whole. Live state is large and usually one List: parsed whole,
// its tree (~270 bytes a value) is what a compile's memory peaks with.
// The objects, findings and positions are forEachObject's either way.
func (inv *Inventory) readList(file string, data []byte, errs *diag.List) bool {
	if _, _, _, bad := badChar(data); bad {
		return false // forEachObject says where
	}
	add := func(obj *yaml.Node, src Source, apiVersion, kind string) { inv.add(obj, src, apiVersion, kind, errs) }
	saved, n := *inv, len(*errs)
	if items, ok := jsonListItems(data); ok {
		if forEachJSONItem(file, data, items, RuleInventory, errs, add) {
			return true
		}
	} else if items, rest, ok := yamlListItems(data); ok && yamlListRest(rest) {
		if forEachYAMLItem(file, data, items, RuleInventory, errs, add) {
			return true
		}
	} else {
		return false
	}
	// An item that does not parse alone: undo what the others gave
	// (appends only), and let the whole document say what it is.
	*inv, *errs = saved, (*errs)[:n]
	return false
}

func (inv *Inventory) add(obj *yaml.Node, src Source, apiVersion, kind string, errs *diag.List) {
	d := &yamlDecoder{file: src.File, rule: RuleInventory, what: src.where(), errs: errs}
	if nameRules[kind] != nil && !checkMeta(obj, kind, d) {
		return
	}
	if v3kind, _, ok := calicoKind(apiVersion, kind); ok {
		// A handful of objects: they keep their node, so that drift
		// findings can say where each live value is written.
		inv.Calico.addCalico(obj, src, v3kind, d)
		return
	}
	src.node = nil // positions only: see Inventory
	into := func(v any) { d.decode(obj, reflect.ValueOf(v).Elem(), "") }
	switch apiVersion + " " + kind {
	case "v1 Pod":
		var p Pod
		into(&p)
		p.Source = src
		inv.Pods = append(inv.Pods, p)
	case "v1 Namespace":
		var ns Namespace
		into(&ns.Namespace)
		ns.Source = src
		inv.Namespaces = append(inv.Namespaces, ns)
	case "v1 Service":
		var s Service
		into(&s.Service)
		s.Source = src
		inv.Services = append(inv.Services, s)
	case "v1 Node":
		var n KubeNode
		into(&n.Node)
		n.Source = src
		inv.Nodes = append(inv.Nodes, n)
	case "discovery.k8s.io/v1 EndpointSlice":
		var e EndpointSlice
		into(&e.EndpointSlice)
		e.Source = src
		inv.EndpointSlices = append(inv.EndpointSlices, e)
	case "crd.projectcalico.org/v1 BlockAffinity", "projectcalico.org/v3 BlockAffinity":
		var w struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				State string `json:"state"`
				Node  string `json:"node"`
				CIDR  string `json:"cidr"`
				// The CRD stores "true"/"false" as a string; v3 as a bool.
				Deleted any `json:"deleted"`
			} `json:"spec"`
		}
		into(&w)
		ba := BlockAffinity{Name: w.Metadata.Name, Node: w.Spec.Node, State: w.Spec.State, Source: src,
			Deleted: w.Spec.Deleted == true || w.Spec.Deleted == "true"}
		p, err := parseCIDR(w.Spec.CIDR, false)
		if err != nil {
			d.errorf(lookupNode(obj, []any{"spec", "cidr"}), "spec.cidr", "%v", err)
			return
		}
		ba.CIDR = p.Masked()
		inv.BlockAffinities = append(inv.BlockAffinities, ba)
	default:
		errs.Add(diag.Finding{Rule: RuleInventory, Severity: diag.Warning, Pos: src.Pos,
			Message: fmt.Sprintf("kind %s %s is ignored; the inventory reads Pods, Namespaces, Services, Nodes, EndpointSlices, Calico BlockAffinities, IPPools, IPAMConfigs, FelixConfigurations and BGPConfigurations, and the operator's Installation%s", apiVersion, kind, src.where())})
	}
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}
