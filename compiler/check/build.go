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

// Builds that the rules name (reference 000, 001, 002, 003).
var (
	build1809      = Build{17763, 0}    // Windows Server 2019 / 1809
	build1809Min   = Build{17763, 1432} // Calico for Windows minimum; kube-proxy SNAT fix
	build1903VXLAN = Build{18317, 0}    // 1903 line: VXLAN and the SNAT fix from insider build 18317
	build1903      = Build{18362, 0}    // 1903 GA: preserve-destination
	buildAffinity  = Build{19551, 0}    // session affinity
	build20H2      = 19042
)

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
