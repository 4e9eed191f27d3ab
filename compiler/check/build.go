package check

import (
	"fmt"
	"strconv"
	"strings"
)

// Build is a Windows OS build: 10.0.<Number>.<Revision>.
type Build struct {
	Number, Revision int
}

// ParseBuild parses "10.0.17763.1432".
func ParseBuild(s string) (Build, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 4 || parts[0] != "10" || parts[1] != "0" {
		return Build{}, fmt.Errorf("windows build %q is not of the form 10.0.<build>.<revision>", s)
	}
	n, err1 := strconv.Atoi(parts[2])
	r, err2 := strconv.Atoi(parts[3])
	if err1 != nil || err2 != nil || n < 0 || r < 0 {
		return Build{}, fmt.Errorf("windows build %q is not of the form 10.0.<build>.<revision>", s)
	}
	return Build{Number: n, Revision: r}, nil
}

// Less reports whether b is older than o.
func (b Build) Less(o Build) bool {
	return b.Number < o.Number || b.Number == o.Number && b.Revision < o.Revision
}

func (b Build) String() string { return fmt.Sprintf("10.0.%d.%d", b.Number, b.Revision) }

// Builds that the rules name. The Calico for Windows requirements
// (docs.tigera.io, 3.28 to 3.30) list Windows Server 1809 from 17763.1432
// and 2022 from 20348.169; Kubernetes' "Networking on Windows" gives the
// minimum builds of the Service features.
var (
	build1809      = Build{17763, 0}    // Windows Server 2019 / 1809
	build1809Min   = Build{17763, 1432} // Calico for Windows minimum; kube-proxy SNAT fix
	build1903VXLAN = Build{18317, 0}    // 1903 line: VXLAN and the SNAT fix from insider build 18317
	build1903      = Build{18362, 0}    // 1903 GA: preserve-destination
	build2022      = Build{20348, 0}    // Windows Server 2022: session affinity (Kubernetes docs)
	build2022Min   = Build{20348, 169}  // Calico for Windows minimum on Windows Server 2022
	build2025      = 26100              // Windows Server 2025: Kubernetes supports it, Calico's list does not
	buildAffinity  = build2022
)

// calicoTested reports whether b is on a line the Calico for Windows
// requirements list: Windows Server 1809/2019 (17763) or 2022 (20348).
func calicoTested(b Build) bool {
	return b.Number == build1809.Number || b.Number == build2022.Number
}

// vxlanCapable reports whether a build supports Calico VXLAN: 1809 (17763)
// or, past it, the 1903 line from insider build 18317 (reference 000).
func vxlanCapable(b Build) bool {
	return b.Number == build1809.Number || !b.Less(build1903VXLAN)
}

// snatsClusterIPTraffic reports whether kube-proxy on b source-NATs pod
// traffic to ClusterIPs: 1809 before .1432, and the 1903 line before 18317
// (references 000, 001).
func snatsClusterIPTraffic(b Build) bool {
	return b.Less(build1809Min) || b.Number > build1809.Number && b.Less(build1903VXLAN)
}
