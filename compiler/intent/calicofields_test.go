package intent_test

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/hnsplan/hnsplan/compiler/calicoapi"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
)

// sampleStrings are tried in order for a string field with a pattern:
// the first that matches is its value.
var sampleStrings = []string{"90s", "Auto", "Accept", "Info", "Disabled", "Drop", "Off", "Tunnel", "CalicoIPAM", "insert",
	"a=true", "100Mi", "64512:100", "0A-0B", "10/second", "x"}

// sample returns a valid value for n, as YAML.
func sample(t *testing.T, n *calicoapi.Node, path string) any {
	t.Helper()
	if len(n.Enum) > 0 {
		return n.Enum[0]
	}
	switch n.Type {
	case "object":
		m := map[string]any{}
		for k, c := range n.Props {
			m[k] = sample(t, c, path+"."+k)
		}
		if n.Map != nil {
			m["key"] = sample(t, n.Map, path+".key")
		}
		return m
	case "array":
		if n.Items == nil {
			return []any{}
		}
		return []any{sample(t, n.Items, path+"[0]")}
	case "boolean":
		return true
	case "integer", "number":
		v := 1.0
		if n.Min != nil && *n.Min > v {
			v = *n.Min
		}
		if n.Max != nil && *n.Max < v {
			v = *n.Max
		}
		return int64(v)
	case "int-or-string":
		return 1
	case "string":
		if n.Pattern == "" {
			return "x"
		}
		re := regexp.MustCompile(n.Pattern)
		for _, s := range sampleStrings {
			if re.MatchString(s) {
				return s
			}
		}
		t.Fatalf("%s: no sample string matches %s; add one to sampleStrings", path, n.Pattern)
	}
	return map[string]any{}
}

// TestEveryCalicoFieldLoads writes, for each Calico configuration kind, an
// object that sets every field of the current API (the catalog) to a
// valid value, hnsplan's own fields to a sound cluster's, and checks that
// it loads with infos only: one calico-field-unused info per field hnsplan
// does not read, none for those it does.
func TestEveryCalicoFieldLoads(t *testing.T) {
	modelled := map[string]map[string]any{
		"IPPool":             {"cidr": "192.168.0.0/16", "blockSize": 26, "vxlanMode": "Always", "ipipMode": "Never", "natOutgoing": true, "disabled": false, "disableBGPExport": false, "nodeSelector": "all()", "allowedUses": []string{"Workload", "Tunnel"}, "assignmentMode": "Automatic"},
		"IPAMConfiguration":  {"strictAffinity": true, "maxBlocksPerHost": 0, "autoAllocateBlocks": true},
		"FelixConfiguration": {"vxlanEnabled": true, "vxlanVNI": 4096, "vxlanPort": 4789, "vxlanMTU": 1410, "ipipEnabled": false},
		"BGPConfiguration":   {"nodeToNodeMeshEnabled": true, "asNumber": 64512, "serviceClusterIPs": []any{map[string]any{"cidr": "10.96.0.0/12"}}, "serviceExternalIPs": []any{}, "serviceLoadBalancerIPs": []any{}, "listenPort": 179, "logSeverityScreen": "Info"},
	}
	for kind, own := range modelled {
		t.Run(kind, func(t *testing.T) {
			k, _ := calicoapi.Lookup(kind)
			spec := map[string]any{}
			var unused []string
			for name, n := range k.Spec.Props {
				if v, ok := own[name]; ok {
					spec[name] = v
					continue
				}
				spec[name] = sample(t, n, "spec."+name)
				unused = append(unused, "spec."+name)
			}
			for name := range own {
				if k.Spec.Props[name] == nil {
					t.Errorf("hnsplan reads %s.spec.%s, which Calico's API does not have", kind, name)
				}
			}
			obj := map[string]any{"apiVersion": "projectcalico.org/v3", "kind": kind, "metadata": map[string]any{"name": "default"}, "spec": spec}
			data, err := yaml.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			var errs diag.List
			m := intent.ReadManifests("full.yaml", data, &errs)
			var infos []string
			for _, f := range errs {
				if f.Severity != diag.Info || f.Rule != intent.RuleCalicoFieldUnused {
					t.Errorf("%s", f)
					continue
				}
				infos = append(infos, f.Path)
			}
			slices.Sort(infos)
			slices.Sort(unused)
			if !slices.Equal(infos, unused) {
				t.Errorf("infos for %v, want one for each field hnsplan does not read: %v", infos, unused)
			}
			if m.Calico.Len() != 1 {
				t.Errorf("%d Calico objects decoded, want 1", m.Calico.Len())
			}
			if kind == "FelixConfiguration" && len(unused) < 175 {
				t.Errorf("%d fields unused: the full FelixConfiguration should have every one of the API's", len(unused))
			}
		})
	}
}

// TestCalicoFieldErrors: what Calico's API refuses is an error at the
// value (or, for an unknown field, at its key), whatever hnsplan reads.
func TestCalicoFieldErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"kind: FelixConfiguration\nmetadata: {name: default}\nspec:\n  bpfEnabled: maybe\n",
			`full.yaml:5:15: error[manifest]: spec.bpfEnabled: expected true or false, found "maybe" (Calico's API server refuses it) (document 1)`},
		{"kind: FelixConfiguration\nmetadata: {name: default}\nspec:\n  vxlanVni: 4097\n",
			`full.yaml:5:3: error[manifest]: spec.vxlanVni: unknown field "vxlanVni": a FelixConfiguration's spec has no such field in Calico's API (Calico v3.28 to v3.32); did you mean "vxlanVNI"? (document 1)`},
		{"kind: FelixConfiguration\nmetadata: {name: default}\nspec:\n  vxlanVNI: many\n",
			`full.yaml:5:13: error[manifest]: spec.vxlanVNI: expected an integer, found "many" (document 1)`},
		{"kind: IPPool\nmetadata: {name: p}\nspec:\n  cidr: 10.0.0.0/16\n  natOutgoing: true\n  allowedUses: [Everything]\n",
			`full.yaml:7:17: error[manifest]: spec.allowedUses[0]: must be one of Workload, Tunnel, LoadBalancer, not "Everything" (Calico's API server refuses it) (document 1)`},
		{"kind: BGPConfiguration\nmetadata: {name: default}\nspec:\n  bindMode: Anywhere\n",
			`full.yaml:5:13: error[manifest]: spec.bindMode: must be one of None, NodeIP, not "Anywhere" (Calico's API server refuses it) (document 1)`},
		{"kind: GlobalNetworkPolicy\nmetadata: {name: p}\nspec:\n  ingress:\n  - action: Allow\n    source: {selectr: app == 'x'}\n",
			`full.yaml:7:14: error[manifest]: spec.ingress[0].source.selectr: unknown field "selectr": not a field of Calico Open Source's API (Calico v3.28 to v3.32) here; did you mean "selector"? (document 1)`},
		{"kind: GlobalNetworkPolicy\nmetadata: {name: p}\nspec:\n  egress:\n  - action: Allow\n    destination: {domains: [example.com]}\n",
			`full.yaml:7:19: error[manifest]: spec.egress[0].destination.domains: unknown field "domains": not a field of Calico Open Source's API (Calico v3.28 to v3.32) here: misplaced, or a Calico Enterprise field, which hnsplan does not enforce (document 1)`},
		{"kind: IPAMConfiguration\nmetadata: {name: default}\nstatus: {}\nspecs: {}\n",
			`full.yaml:5:1: error[manifest]: specs: unknown field "specs": an IPAMConfiguration has apiVersion, kind, metadata and spec (document 1)`},
	} {
		var errs diag.List
		intent.ReadManifests("full.yaml", []byte("apiVersion: projectcalico.org/v3\n"+tc.doc), &errs)
		var got []string
		for _, f := range errs {
			if f.Severity == diag.Error {
				got = append(got, strings.TrimSpace(f.String()))
			}
		}
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%q:\n got %q\nwant %q", tc.doc, got, tc.want)
		}
	}
	_ = fmt.Sprint
	_ = maps.Keys[map[string]int]
}
