// Command calicoschema writes compiler/calicoapi/schema.json, the field
// catalog of the Calico resources hnsplan reads, from the CustomResource
// Definitions in Calico's own module: their OpenAPI schemas are generated
// from the projectcalico.org/v3 Go types (and, for the Installation, the
// tigera-operator's operator.tigera.io/v1 types), which cannot themselves
// be imported (the module proxy does not serve github.com/projectcalico/api
// or github.com/tigera/operator).
//
// Usage (maintainers, with network access to the module proxy):
//
//	go run ./hack/calicoschema -version v1.11.0-cni-plugin.0.20250813170300-a0db560f0520 -o compiler/calicoapi/schema.json
//
// It downloads github.com/projectcalico/calico at that version with
// `go mod download`, converts each CRD's openAPIV3Schema to the catalog's
// compact form (types, enums, patterns, bounds, required fields; no
// descriptions) and records the module version and checksum. Fields of
// newer Calico releases than the module's are kept by hand in
// compiler/calicoapi/newer.json.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"go.yaml.in/yaml/v3"
)

// kinds are the CRDs read: file below the module, and the kind and
// apiVersion the catalog files them under (the v3 API's, not the CRD's
// storage group).
var kinds = []struct{ file, apiVersion, kind string }{
	{"libcalico-go/config/crd/crd.projectcalico.org_ippools.yaml", "projectcalico.org/v3", "IPPool"},
	{"libcalico-go/config/crd/crd.projectcalico.org_ipamconfigs.yaml", "projectcalico.org/v3", "IPAMConfiguration"},
	{"libcalico-go/config/crd/crd.projectcalico.org_felixconfigurations.yaml", "projectcalico.org/v3", "FelixConfiguration"},
	{"libcalico-go/config/crd/crd.projectcalico.org_bgpconfigurations.yaml", "projectcalico.org/v3", "BGPConfiguration"},
	{"libcalico-go/config/crd/crd.projectcalico.org_networkpolicies.yaml", "projectcalico.org/v3", "NetworkPolicy"},
	{"libcalico-go/config/crd/crd.projectcalico.org_globalnetworkpolicies.yaml", "projectcalico.org/v3", "GlobalNetworkPolicy"},
	{"libcalico-go/config/crd/crd.projectcalico.org_hostendpoints.yaml", "projectcalico.org/v3", "HostEndpoint"},
	{"charts/tigera-operator/crds/operator.tigera.io_installations_crd.yaml", "operator.tigera.io/v1", "Installation"},
}

func main() {
	version := flag.String("version", "", "version of github.com/projectcalico/calico to read")
	out := flag.String("o", "compiler/calicoapi/schema.json", "output file")
	flag.Parse()
	if *version == "" {
		fmt.Fprintln(os.Stderr, "calicoschema: give -version (see the command's doc comment)")
		os.Exit(3)
	}
	mod, err := download("github.com/projectcalico/calico", *version)
	if err != nil {
		fmt.Fprintln(os.Stderr, "calicoschema:", err)
		os.Exit(1)
	}
	cat := map[string]any{
		"source": map[string]string{"module": mod.Path, "version": mod.Version, "sum": mod.Sum},
	}
	ks := map[string]any{}
	for _, k := range kinds {
		spec, err := readCRD(filepath.Join(mod.Dir, k.file))
		if err != nil {
			fmt.Fprintf(os.Stderr, "calicoschema: %s: %v\n", k.file, err)
			os.Exit(1)
		}
		ks[k.kind] = map[string]any{"apiVersion": k.apiVersion, "crd": k.file, "spec": spec}
	}
	cat["kinds"] = ks
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(cat); err != nil {
		fmt.Fprintln(os.Stderr, "calicoschema:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "calicoschema:", err)
		os.Exit(1)
	}
}

type module struct{ Path, Version, Sum, Dir string }

func download(path, version string) (module, error) {
	cmd := exec.Command("go", "mod", "download", "-json", path+"@"+version)
	cmd.Stderr = os.Stderr
	data, err := cmd.Output()
	if err != nil {
		return module{}, fmt.Errorf("go mod download %s@%s: %v", path, version, err)
	}
	var m module
	return m, json.Unmarshal(data, &m)
}

// readCRD returns the catalog node of the spec of the CRD's served
// version.
func readCRD(file string) (any, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `yaml:"name"`
				Served bool   `yaml:"served"`
				Schema struct {
					OpenAPIV3Schema map[string]any `yaml:"openAPIV3Schema"`
				} `yaml:"schema"`
			} `yaml:"versions"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return nil, err
	}
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		props, _ := v.Schema.OpenAPIV3Schema["properties"].(map[string]any)
		spec, ok := props["spec"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("version %s has no spec schema", v.Name)
		}
		return convert(spec), nil
	}
	return nil, fmt.Errorf("no served version")
}

// convert turns an OpenAPI v3 schema into the catalog's node: type
// ("object", "array", "string", "integer", "number", "boolean",
// "int-or-string", or "any" for an opaque value), props, items, map (the
// value schema of a map), enum, pattern, min, max, minLen, maxLen,
// format, minItems, maxItems, open (unknown fields kept). Required
// fields are left out: the CRDs' are the storage form's (IPAMConfig
// requires what the v3 API defaults), and hnsplan checks the ones it
// needs itself.
func convert(s map[string]any) map[string]any {
	n := map[string]any{}
	t, _ := s["type"].(string)
	if s["x-kubernetes-int-or-string"] == true {
		t = "int-or-string"
	}
	if t == "" {
		t = "any"
	}
	n["type"] = t
	if p, ok := s["properties"].(map[string]any); ok {
		props := map[string]any{}
		for k, v := range p {
			if vm, ok := v.(map[string]any); ok {
				props[k] = convert(vm)
			}
		}
		n["props"] = props
	}
	if s["x-kubernetes-preserve-unknown-fields"] == true {
		n["open"] = true
	}
	if i, ok := s["items"].(map[string]any); ok {
		n["items"] = convert(i)
	}
	if a, ok := s["additionalProperties"].(map[string]any); ok {
		n["map"] = convert(a)
	}
	for from, to := range map[string]string{"enum": "enum", "pattern": "pattern", "minimum": "min", "maximum": "max",
		"minLength": "minLen", "maxLength": "maxLen", "format": "format", "minItems": "minItems", "maxItems": "maxItems"} {
		if v, ok := s[from]; ok {
			n[to] = v
		}
	}
	return n
}
