package check

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/winbuild"
)

// buildRegression reports Windows nodes on a build of compiler/winbuild's
// catalog: by the intent's windows.build, and by the inventory's Nodes
// (status.nodeInfo.kernelVersion, what the node runs now). A node whose
// inventory build is the intent's is reported once, at the intent.
// Builds either side cannot read are left to windows-build-unsupported
// (the intent's) or not checked (the inventory's: a Linux kernel).
func buildRegression(x *checker) {
	said := map[string]string{} // node → the build reported for it
	for _, n := range x.Windows {
		b, r, ok, err := winbuild.Check(n.WindowsBuild)
		if err != nil || !ok {
			continue
		}
		said[n.Name] = b.String()
		x.report("windows-build-regression", n.Name, []any{"nodes", n.Name, "windows", "build"}, "%s", regressionText(n.Name, b, r))
	}
	for _, n := range x.in.Inventory.Nodes {
		if n.Labels["kubernetes.io/os"] != "windows" {
			continue
		}
		b, r, ok, err := winbuild.Check(n.Status.NodeInfo.KernelVersion)
		if err != nil || !ok || said[n.Name] == b.String() {
			continue
		}
		x.reportAt("windows-build-regression", n.Name, n.Source.Pos, "Node "+n.Name+" status.nodeInfo.kernelVersion",
			"%s", regressionText(n.Name, b, r))
	}
}

// regressionText names the node, its build, what breaks and the update
// that fixes it.
func regressionText(node string, b winbuild.Build, r winbuild.Regression) string {
	src := slices.Clone(r.Sources)
	for i, s := range src {
		src[i], _, _ = strings.Cut(s, " ")
	}
	return fmt.Sprintf("Windows node %s runs build %s, which has a known container-networking regression since %s: %s; install %s or later (%s)",
		node, b, r.Introduced, r.Summary, r.Fixed, strings.Join(src[:min(2, len(src))], ", "))
}
