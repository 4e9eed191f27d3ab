package intent

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

// TestRelatedPositions: findings about two places carry the second as a
// related position: CUE's further positions (a conflict between two
// files), the first of two YAML keys or Calico objects of one name, the
// CUE value a Calico resource contradicts.
func TestRelatedPositions(t *testing.T) {
	ippool := func(name, cidr string) string {
		return "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata:\n  name: " + name + "\nspec:\n  cidr: " + cidr + "\n"
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		rule  string
		want  string // the finding and its related positions, as text output prints them
	}{
		{"CUE conflict across files", map[string]string{"c.cue": minimal,
			"d.cue": "package c\n\ncluster: vxlan: vni: 5000\n", "e.cue": "package c\ncluster: vxlan: vni: 6000\n"},
			RuleSchema, `d.cue:3:22: error[schema]: cluster.vxlan.vni: conflicting values 6000 and 5000
    e.cue:2:22
`},
		{"YAML key given twice", map[string]string{"c.cue": minimal,
			"p.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n  name: b\n"},
			RuleManifest, `p.yaml:5:3: error[manifest]: metadata.name: field "name" is given twice (document 1)
    p.yaml:4:3: the first "name"
`},
		{"Calico object given twice", map[string]string{"c.cue": minimal,
			"pools.yaml": ippool("extra", "10.1.0.0/16") + "---\n" + ippool("extra", "10.2.0.0/16")},
			RuleCalicoConflict, `pools.yaml:8:1: error[calico-config-conflict]: metadata.name: IPPool "extra" is given twice: first at pools.yaml:1:1; keep one
    pools.yaml:1:1: the first IPPool "extra"
`},
		{"Calico resource against the CUE", map[string]string{"c.cue": minimal,
			"pools.yaml": ippool("default", "10.9.0.0/16")},
			RuleCalicoConflict, `pools.yaml:6:9: error[calico-config-conflict]: spec.cidr: IPPool "default" sets cidr 10.9.0.0/16, but cluster.pools.default.cidr is 192.168.0.0/16 at c.cue:10:18: give the setting one source (remove it from one of them, or make the two equal)
    c.cue:10:18: cluster.pools.default.cidr is 192.168.0.0/16
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeDir(t, tc.files)
			_, findings, err := Load(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got diag.List
			for _, f := range findings.RelativeTo(dir) {
				if f.Rule == tc.rule {
					f.Message = strings.ReplaceAll(f.Message, dir+string(filepath.Separator), "")
					got = append(got, f)
				}
			}
			if diff := cmp.Diff(tc.want, listString(got)); diff != "" {
				t.Errorf("findings of %s (-want +got):\n%s\nall findings:\n%s", tc.rule, diff, listString(findings))
			}
		})
	}
}
