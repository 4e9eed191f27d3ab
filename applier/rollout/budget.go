package rollout

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultMaxUnavailable is windows.rollout.maxUnavailable's default: one
// node at a time.
const DefaultMaxUnavailable = "1"

// MaxUnavailable is how many of nodes may hold a rollout slot at once for
// spec, windows.rollout.maxUnavailable: a count ("2") or a percentage of
// the Windows nodes ("40%"). A percentage rounds down, as a DaemonSet's
// maxUnavailable does, but never below one: a rollout that can never
// start is a stuck cluster, not a safe one. "" is the default.
func MaxUnavailable(spec string, nodes int) (int, error) {
	if spec == "" {
		spec = DefaultMaxUnavailable
	}
	if pct, ok := strings.CutSuffix(spec, "%"); ok {
		p, err := strconv.Atoi(pct)
		if err != nil || p < 1 || p > 100 {
			return 0, fmt.Errorf("windows.rollout.maxUnavailable %q: a percentage is a whole number from 1%% to 100%%", spec)
		}
		return max(1, nodes*p/100), nil
	}
	n, err := strconv.Atoi(spec)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("windows.rollout.maxUnavailable %q: give a count of nodes (1 or more) or a percentage such as 25%%", spec)
	}
	return n, nil
}
