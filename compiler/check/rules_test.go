package check_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/check"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/internal/golden"
)

func catalog(t *testing.T) check.Catalog {
	t.Helper()
	rules, err := intent.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	return check.NewCatalog(rules)
}

// vet builds dir (with dir+".inventory.yaml" as inventory if it exists)
// as `hnsplan vet` does and returns every finding, file names (related
// positions' too) relative to root.
func vet(t *testing.T, root, dir string) diag.List {
	t.Helper()
	var inventory []string
	if inv := dir + ".inventory.yaml"; fileExists(inv) {
		inventory = []string{inv}
	}
	_, all, err := compiler.Build(dir, compiler.Options{Inventory: inventory})
	if err != nil {
		t.Fatal(err)
	}
	all = all.RelativeTo(root)
	for i := range all {
		all[i].Message = strings.ReplaceAll(all[i].Message, root+string(filepath.Separator), "")
	}
	return all
}

func fileExists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

func only(l diag.List, rule string) diag.List {
	var out diag.List
	for _, f := range l {
		if f.Rule == rule {
			out = append(out, f)
		}
	}
	return out
}

func text(l diag.List) string {
	var b strings.Builder
	_ = l.WriteText(&b, false)
	return b.String()
}

// TestRules runs testdata/rules/<rule-id>.txtar: the intent in fire/ must
// produce exactly the findings of rule-id in the golden file "want" (rule,
// severity, position, message), and the near miss in near/ none of them.
// Neither may have findings from the loader's rules (a case that does not
// load tests nothing). HNSPLAN_UPDATE=1 rewrites "want".
func TestRules(t *testing.T) {
	cat := catalog(t)
	files, _ := filepath.Glob("testdata/rules/*.txtar")
	if len(files) == 0 {
		t.Fatal("no rule cases")
	}
	for _, file := range files {
		id := strings.TrimSuffix(filepath.Base(file), ".txtar")
		t.Run(id, func(t *testing.T) {
			if _, ok := cat[id]; !ok {
				t.Fatalf("%s: no rule %q in the catalog", file, id)
			}
			c := golden.Extract(t, file, "want")
			root := c.Dir
			for _, variant := range []string{"fire", "near"} {
				all := vet(t, root, filepath.Join(root, variant))
				for _, f := range all {
					if r := cat[f.Rule]; r.Phase == "load" && f.Rule != id {
						t.Errorf("%s: loader finding: %s", variant, f)
					}
				}
				got := only(all, id)
				switch variant {
				case "fire":
					if len(got) == 0 {
						t.Errorf("fire: rule %s did not fire; all findings:\n%s", id, text(all))
					}
					for _, f := range got {
						if !f.Pos.IsValid() || f.Pos.Line == 0 {
							t.Errorf("fire: finding without a position: %s", f)
						}
					}
					c.Check(t, "fire: findings of "+id, text(got))
				case "near":
					if len(got) != 0 {
						t.Errorf("near miss fired:\n%s", text(got))
					}
				}
			}
		})
	}
}

// testedElsewhere are rules whose firing case lives where they are
// reported, not in testdata/rules: the plan compiler's (compiler tests).
var testedElsewhere = map[string]string{
	"policy-acl-budget":    "compiler.TestACLBudget",
	"ipam-block-invalid":   "compiler TestModes/calico-vxlan-conflicts",
	"ipam-no-block":        "compiler TestModes/calico-vxlan-pinned",
	"pod-ip-outside-block": "compiler TestModes/calico-vxlan-inventory",
	"pod-ip-duplicate":     "compiler TestModes/aks-policy-only",
}

// TestEveryRuleHasACase fails for a vet-time or policy rule of the catalog
// without a case in testdata/rules (the loader's rules are tested by the
// CLI scripts, a few compile-time ones where they are reported).
func TestEveryRuleHasACase(t *testing.T) {
	for id, r := range catalog(t) {
		if r.Phase == "load" && id != "cidr-host-bits" {
			continue
		}
		if where, ok := testedElsewhere[id]; ok {
			t.Logf("%s: tested in %s", id, where)
			continue
		}
		if !fileExists(filepath.Join("testdata/rules", id+".txtar")) {
			t.Errorf("rule %s (%s) has no case testdata/rules/%s.txtar", id, r.Family, id)
		}
	}
}

// The pages the documented deviations rest on (read for Calico 3.28 to
// 3.30 and the current Kubernetes documentation).
const (
	calicoReq28 = "https://docs.tigera.io/calico/3.28/getting-started/kubernetes/windows-calico/requirements"
	calicoReq30 = "https://docs.tigera.io/calico/3.30/getting-started/kubernetes/windows-calico/requirements"
	calicoLim29 = "https://docs.tigera.io/calico/3.29/getting-started/kubernetes/windows-calico/limitations"
	k8sWinIntro = "https://kubernetes.io/docs/concepts/windows/intro/"
	k8sWinNet   = "https://kubernetes.io/docs/concepts/services-networking/windows-networking/"
)

// addedRules are vet-time rules CONSTRAINTS.md, the origin document, does
// not list: each is accepted here with the page that justifies it (or, for
// the Calico configuration rules, why it is hnsplan's own).
var addedRules = map[string]string{
	"pool-encapsulation-mode":      calicoReq30 + " (pools: ipipMode Never, vxlanMode Always); Calico encapsulates by the modes alone",
	"felix-vxlan-disabled":         calicoReq30 + " (CNI and networking options > Calico VXLAN)",
	"disabled-pool-windows":        calicoLim29 + " (IP mobility/borrowing: Windows nodes take addresses only from blocks of their own pools)",
	"nat-exceptions-without-nat":   calicoLim29 + " (NATOutgoing: exceptions belong to the NAT policy of a natOutgoing pool)",
	"operator-kubernetes-version":  calicoReq30 + " (Operator install requirements: Kubernetes v1.22+)",
	"managed-platform-cni":         calicoReq30 + " (What's supported: EKS: VPC CNI; AKS: Azure CNI)",
	"managed-platform-policy-only": calicoReq30 + " (What's supported: EKS: VPC CNI; AKS: Azure CNI)",
	"calico-config-drift":          "hnsplan's own: the live Calico configuration (--inventory) against the intent",
	"network-owner":                calicoReq30 + " (What's supported: EKS: VPC CNI; AKS: Azure CNI: Calico enforces policy only there); hnsplan's own for flannel-vxlan: flanneld programs its routes",
	"network-match-missing":        "hnsplan's own: the HNS networks a policy-only agent finds pod endpoints on (Calico's KUBE_NETWORK)",
	"network-match-ignored":        "hnsplan's own: windows.networkMatch without a CNI that owns the network",
	"windows-build-regression":     "compiler/winbuild's catalog of builds with known container-networking regressions (each entry with its public sources: microsoft/Windows-Containers#516, projectcalico/calico#8529, KB5044281's notes)",
	"policy-host-endpoint":         "Calico's own semantics (felix/calc/event_sequencer.go: workload endpoints get only policies that are neither untracked nor pre-DNAT); " + calicoLim29 + " (no host endpoints on Windows)",
	"vxlan-vni-change":             "hnsplan's own: a change of the VXLAN VNI or port (diff, or the live FelixConfiguration of --inventory) cuts nodes on the old values off from nodes on the new (Felix's daemon.go and vxlan_mgr.go, flannel's kube.go and vxlan_windows.go) for as long as the Windows rollout takes",
}

// changedRules are rules whose data the review against the current
// documentation changed from what CONSTRAINTS.md says: the text the
// origin row still holds (so that an entry goes stale when the document is
// updated), and the page that justifies the change.
var changedRules = map[string][2]string{
	"windows-build-untested":    {"20H2 (19042)", calicoReq28 + ", " + calicoReq30 + " list 1809 (17763) and 2022 (20348); " + k8sWinIntro + " supports 2022 and 2025"},
	"windows-build-unsupported": {"below 10.0.17763.1432", calicoReq30 + ": Windows Server 2022 from build 20348.169"},
	"calico-version":            {"below 3.12", calicoReq28 + ": v3.12+ for manual installs, v3.27+ for operator installs"},
	"session-affinity-build":    {"below 19551", k8sWinNet + ": session affinity from Windows Server 2022"},
	"datastore-support":         {"with the etcd datastore", calicoReq30 + ": the operator install supports only the Kubernetes datastore"},
}

// TestCatalogMatchesConstraints checks the catalog against the contract in
// testdata/oracles/constraints/CONSTRAINTS.md: the same ids with the same
// default severities, in the same families.
func TestCatalogMatchesConstraints(t *testing.T) {
	data, err := os.ReadFile("../../testdata/oracles/constraints/CONSTRAINTS.md")
	if err != nil {
		t.Fatalf("CONSTRAINTS.md: %v", err)
	}
	families := map[string]string{
		"Encapsulation and VXLAN": "encapsulation", "IPAM": "ipam", "BGP and routing": "bgp", "NAT": "nat",
		"Platform and versions": "platform", "Services and pods (manifests and inventory)": "services",
		"Network policy (reported per policy rule, with the rule's file:line)": "netpol",
	}
	type entry struct{ severity, family, row string }
	want := map[string]entry{}
	family := ""
	for _, line := range strings.Split(string(data), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			family = families[h]
			continue
		}
		if family == "" || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		id := strings.Trim(strings.TrimSpace(cells[1]), "`")
		want[id] = entry{strings.TrimSpace(cells[2]), family, line}
	}
	if len(want) < 50 {
		t.Fatalf("read only %d rules from CONSTRAINTS.md", len(want))
	}
	cat := catalog(t)
	for id, w := range want {
		r, ok := cat[id]
		if !ok {
			t.Errorf("CONSTRAINTS.md rule %s is not in the catalog", id)
			continue
		}
		if r.Severity != w.severity || r.Family != w.family {
			t.Errorf("rule %s: catalog has %s/%s, CONSTRAINTS.md %s/%s", id, r.Severity, r.Family, w.severity, w.family)
		}
	}
	for id, r := range cat {
		// hnsplan's own rules (the loader's, the plan compiler's) are not
		// Windows constraints; every other rule must be in the contract.
		if _, ok := want[id]; !ok && r.Phase != "load" && r.Phase != "compile" {
			if why, ok := addedRules[id]; ok {
				t.Logf("%s: not in CONSTRAINTS.md; added: %s", id, why)
				continue
			}
			t.Errorf("catalog rule %s (phase %s) is not in CONSTRAINTS.md", id, r.Phase)
		}
	}
	for id := range addedRules {
		if _, ok := cat[id]; !ok {
			t.Errorf("addedRules names %s, which the catalog does not have", id)
		}
		if _, ok := want[id]; ok {
			t.Errorf("addedRules names %s, which CONSTRAINTS.md now lists: drop the entry", id)
		}
	}
	for id, c := range changedRules {
		w, ok := want[id]
		switch {
		case !ok:
			t.Errorf("changedRules names %s, which CONSTRAINTS.md does not list", id)
		case !strings.Contains(w.row, c[0]):
			t.Errorf("changedRules: CONSTRAINTS.md's row of %s no longer says %q: update or drop the entry", id, c[0])
		case !strings.Contains(c[1], "https://"):
			t.Errorf("changedRules: %s has no URL that justifies the change", id)
		default:
			t.Logf("%s: changed from CONSTRAINTS.md (%q): %s", id, c[0], c[1])
		}
	}
	if ids := slices.Collect(func(yield func(string) bool) {
		for id := range cat {
			if !yield(id) {
				return
			}
		}
	}); len(ids) == 0 {
		t.Fatal("empty catalog")
	}
}
