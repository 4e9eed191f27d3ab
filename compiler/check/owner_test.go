package check_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestNetworkOwner: who may own the Windows network, by networking,
// platform and windows.networkOwner (unset: the default), and which rule
// each combination fires; a policy-only cluster needs no strictAffinity
// and no pools.
func TestNetworkOwner(t *testing.T) {
	for _, tc := range []struct {
		networking, platform, owner, match string
		want                               []string // rule ids of the owner family
	}{
		{"cloud-provider", "aks", "", "", nil},
		{"cloud-provider", "eks", "", "", nil},
		{"cloud-provider", "aks", `"hnsplan"`, "", []string{"network-owner"}},
		{"cloud-provider", "eks", `"hnsplan"`, "", []string{"network-owner"}},
		{"cloud-provider", "azure", `"cni"`, "", nil}, // Azure CNI's default
		{"cloud-provider", "gcp", `"cni"`, "", []string{"network-match-missing"}},
		{"cloud-provider", "gcp", `"cni"`, `["l2bridge"]`, nil},
		{"flannel-vxlan", "", "", "", nil},
		{"flannel-vxlan", "", `"hnsplan"`, "", []string{"network-owner"}},
		{"flannel-host-gw", "", `"cni"`, "", nil},
		{"flannel-host-gw", "", "", `["cbr0"]`, []string{"network-match-ignored"}},
		{"calico-vxlan", "", `"cni"`, "", []string{"network-owner"}},
		{"calico-bgp", "", `"cni"`, "", []string{"network-owner"}},
		{"static-routes", "", `"cni"`, "", []string{"network-owner"}},
	} {
		name := fmt.Sprintf("%s/%s/%s/%s", tc.networking, tc.platform, tc.owner, tc.match)
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			windows := ""
			if tc.owner != "" {
				windows += "\tnetworkOwner: " + tc.owner + "\n"
			}
			if tc.match != "" {
				windows += "\tnetworkMatch: " + tc.match + "\n"
			}
			platform := ""
			if tc.platform != "" {
				platform = fmt.Sprintf("\tplatform: %q\n", tc.platform)
			}
			src := fmt.Sprintf(`package intent

cluster: {
	name: "demo"
	datastore: "kubernetes"
	networking: %q
%s	serviceCIDRs: ["10.0.0.0/16"]
	windows: {
%s	}
	nodes: {
		"linux-1": {os: "linux", address: "10.240.0.4/16", podCIDR: "10.244.0.0/24"}
		"win-1": {os: "windows", address: "10.240.0.5/16", podCIDR: "10.244.1.0/24", windows: build: "10.0.20348.2582"}
	}
}
`, tc.networking, platform, windows)
			if err := os.WriteFile(filepath.Join(dir, "cluster.cue"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			all := vet(t, dir, dir)
			cat := catalog(t)
			var got []string
			for _, f := range all {
				switch f.Rule {
				case "network-owner", "network-match-missing", "network-match-ignored":
					got = append(got, f.Rule)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("owner rules %v, want %v; all findings:\n%s", got, tc.want, text(all))
			}
			policyOnly := tc.want == nil && (tc.owner == `"cni"` || tc.owner == "" && (tc.networking == "flannel-vxlan" || tc.platform == "aks" || tc.platform == "eks"))
			for _, f := range all {
				if fam := cat[f.Rule].Family; policyOnly && (f.Rule == "schema" || fam == "ipam" || fam == "encapsulation" || fam == "nat") {
					t.Errorf("policy-only cluster: %s", f)
				}
			}
		})
	}
}
