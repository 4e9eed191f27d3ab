package check_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// probe is one cluster the version rules are run on: the Windows node's
// build and the cluster's versions.
type probe struct {
	build, kubernetes, calico, platform string
	operator                            bool
}

// fires vets the probe and returns the rule ids of its findings.
func (p probe) fires(t *testing.T) map[string]bool {
	t.Helper()
	dir := t.TempDir()
	opt := ""
	if p.kubernetes != "" {
		opt += fmt.Sprintf("\tkubernetesVersion: %q\n", p.kubernetes)
	}
	if p.calico != "" {
		opt += fmt.Sprintf("\tcalicoVersion: %q\n", p.calico)
	}
	if p.platform != "" {
		opt += fmt.Sprintf("\tplatform: %q\n", p.platform)
	}
	if p.operator {
		opt += "\toperatorManaged: true\n"
	}
	cue := fmt.Sprintf(`package intent

cluster: {
	name: "probe"
	datastore: "kubernetes"
	networking: "calico-vxlan"
	serviceCIDRs: ["10.96.0.0/12"]
	ipam: strictAffinity: true
	pools: default: cidr: "192.168.0.0/16"
%s	nodes: {
		"linux-1": {os: "linux", address: "10.240.0.10/24"}
		"win-1": {os: "windows", address: "10.240.0.21/24", windows: build: %q}
	}
}
`, opt, p.build)
	// A policy that selects its sources by label (svc-snat-source-selector)
	// and a ClientIP Service with a backend on the Windows node
	// (session-affinity-build).
	manifests := `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-frontend, namespace: default}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress:
  - from:
    - podSelector: {matchLabels: {app: frontend}}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  sessionAffinity: ClientIP
  ports: [{port: 80}]
`
	inventory := `apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: default, labels: {app: web}}
spec:
  nodeName: win-1
  nodeSelector: {kubernetes.io/os: windows}
  containers: [{name: web, image: iis}]
status: {podIP: 192.168.1.5}
`
	for name, data := range map[string]string{"cluster.cue": cue, "manifests.yaml": manifests} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(dir+".inventory.yaml", []byte(inventory), 0o644); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range vet(t, dir, dir) {
		got[f.Rule] = true
	}
	return got
}

// TestPlatformTextsMatchBehaviour ties the catalog texts of the rules that
// judge Windows builds and versions to what the rules do: every build or
// version at which a rule's verdict changes is named in its summary and
// remedy, and windows-build-untested names exactly the Windows Server lines
// it accepts. A rule whose code moves on while its text stays behind (the
// summary that went on naming 20H2 after the rule started warning on it)
// fails here.
func TestPlatformTextsMatchBehaviour(t *testing.T) {
	cat := catalog(t)
	texts := func(id string) string { return cat[id].Summary + "\n" + cat[id].Remedy }
	base := probe{build: "10.0.20348.2582", kubernetes: "1.30", calico: "3.30"}

	// Builds: every line hnsplan knows of, and each side of every
	// revision boundary.
	builds := []string{
		"10.0.14393.0", "10.0.17134.0", "10.0.17763.1", "10.0.17763.1431", "10.0.17763.1432", "10.0.17763.6000",
		"10.0.18316.0", "10.0.18317.0", "10.0.18362.0", "10.0.19041.0", "10.0.19042.1586", "10.0.19045.0",
		"10.0.20348.1", "10.0.20348.168", "10.0.20348.169", "10.0.20348.2582", "10.0.22000.0", "10.0.25398.0",
		"10.0.26100.1", "10.0.26200.0",
	}
	verdicts := map[string][]bool{} // rule -> fires, per build
	for _, b := range builds {
		p := base
		p.build = b
		got := p.fires(t)
		for _, id := range []string{"windows-build-unsupported", "windows-build-untested", "svc-snat-source-selector", "session-affinity-build"} {
			verdicts[id] = append(verdicts[id], got[id])
		}
	}
	// A boundary is a build from which the rule stops firing: a minimum,
	// named "17763.1432", or "18317" when the revision does not matter.
	boundaries := func(id string) []string {
		var out []string
		v := verdicts[id]
		for i := 1; i < len(builds); i++ {
			if !v[i-1] || v[i] {
				continue
			}
			num, rev, _ := strings.Cut(strings.TrimPrefix(builds[i], "10.0."), ".")
			prev, _, _ := strings.Cut(strings.TrimPrefix(builds[i-1], "10.0."), ".")
			if prev == num && rev != "0" {
				out = append(out, num+"."+rev)
			} else {
				out = append(out, num)
			}
		}
		return out
	}
	for _, tc := range []struct {
		id   string
		want []string // boundaries the rule must have (a check of the probes)
	}{
		{"windows-build-unsupported", []string{"17763.1432", "20348.169"}},
		{"svc-snat-source-selector", []string{"17763.1432", "18317"}},
		{"session-affinity-build", []string{"20348"}},
	} {
		named := boundaries(tc.id)
		if !slices.Equal(named, tc.want) {
			t.Errorf("%s: accepts from the builds %v, the probes expect %v: update the probes and the rule's texts", tc.id, named, tc.want)
		}
		for _, b := range named {
			for _, field := range []string{"summary", "remedy"} {
				text := cat[tc.id].Summary
				if field == "remedy" {
					text = cat[tc.id].Remedy
				}
				if !strings.Contains(text, b) {
					t.Errorf("%s: the rule's verdict changes at build %s, which its %s does not name: %q", tc.id, b, field, text)
				}
			}
		}
	}

	// windows-build-untested accepts whole lines: its texts name those
	// lines' build numbers, and no other line.
	var accepted []string
	for i, b := range builds {
		num, _, _ := strings.Cut(strings.TrimPrefix(b, "10.0."), ".")
		if !verdicts["windows-build-untested"][i] && !verdicts["windows-build-unsupported"][i] && !slices.Contains(accepted, num) {
			accepted = append(accepted, num)
		}
	}
	if !slices.Equal(accepted, []string{"17763", "20348"}) {
		t.Errorf("windows-build-untested accepts the lines %v; the probes expect 17763 and 20348", accepted)
	}
	lineRE := regexp.MustCompile(`\b(1[4-9]|2[0-9])\d{3}\b`)
	for _, field := range []string{"summary", "remedy"} {
		text := cat["windows-build-untested"].Summary
		if field == "remedy" {
			text = cat["windows-build-untested"].Remedy
		}
		var named []string
		for _, m := range lineRE.FindAllString(text, -1) {
			if !slices.Contains(named, m) {
				named = append(named, m)
			}
		}
		slices.Sort(named)
		if !slices.Equal(named, accepted) {
			t.Errorf("windows-build-untested: its %s names the builds %v, but the rule accepts the lines %v: %q", field, named, accepted, text)
		}
	}

	// Versions: the lowest version each rule accepts is named in its texts.
	for _, tc := range []struct {
		id       string
		versions []string
		set      func(*probe, string)
		want     string
	}{
		{"calico-version", []string{"3.10", "3.11", "3.12", "3.20", "3.26", "3.27", "3.30"}, func(p *probe, v string) { p.calico = v }, "3.12"},
		{"calico-version", []string{"3.10", "3.11", "3.12", "3.20", "3.26", "3.27", "3.30"}, func(p *probe, v string) { p.calico = v; p.operator = true }, "3.27"},
		{"operator-kubernetes-version", []string{"1.19", "1.20", "1.21", "1.22", "1.23", "1.30"}, func(p *probe, v string) { p.kubernetes = v; p.operator = true }, "1.22"},
		{"aks-kubernetes-version", []string{"1.18", "1.19", "1.20", "1.21", "1.30"}, func(p *probe, v string) { p.kubernetes = v; p.platform = "aks" }, "1.20"},
	} {
		lowest := ""
		for i := len(tc.versions) - 1; i >= 0; i-- {
			p := base
			tc.set(&p, tc.versions[i])
			if p.fires(t)[tc.id] {
				break
			}
			lowest = tc.versions[i]
		}
		if lowest != tc.want {
			t.Errorf("%s: accepts from %q, the probes expect %s", tc.id, lowest, tc.want)
		}
		if !strings.Contains(texts(tc.id), lowest) || !strings.Contains(cat[tc.id].Summary, lowest) {
			t.Errorf("%s: the rule accepts from %s, which its summary does not name: %q", tc.id, lowest, cat[tc.id].Summary)
		}
	}
}
