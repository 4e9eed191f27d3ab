package plan

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// PolicyOnly is what a plan holds when another program owns the node's
// HNS network and its pods' endpoints (the platform's CNI, flanneld): the
// agent programs the ACL lists of the pod endpoints it finds on the
// networks Networks match, by the pods' addresses, keeps every other
// policy the owner put on them, and never creates, deletes or replaces a
// network or an endpoint. Such a plan's Network, HostEndpoint and
// PodEndpoint are empty and it names no route table.
type PolicyOnly struct {
	// Owner is who creates the network and the endpoints: "azure-cni",
	// "vpc-cni", "flanneld" or "cni".
	Owner string `json:"owner"`
	// Networks are RE2 regular expressions, each matched against a whole
	// HNS network name: an endpoint is the agent's to program when its
	// network's name matches one of them.
	Networks []string `json:"networks"`
	// NodeAddress is the node's address, the source of what the host
	// sends its pods (kubelet probes): the ACL lists allow it in. The
	// agent takes the Node's InternalIP where the cluster gives one.
	NodeAddress netip.Addr `json:"nodeAddress"`
}

// Bounds on PolicyOnly.
const (
	MaxNetworkPatterns = 16
	maxPatternLen      = MaxNameLen
)

// CheckNetworkPattern says what is wrong with one network pattern: empty,
// too long, or not an RE2 regular expression.
func CheckNetworkPattern(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("an empty network pattern matches no network name; write the name (\"azure\") or a pattern (\"azure.*\")")
	case len(p) > maxPatternLen:
		return fmt.Errorf("network pattern of %d bytes: at most %d", len(p), maxPatternLen)
	}
	if _, err := regexp.Compile(anchored(p)); err != nil {
		return fmt.Errorf("network pattern %q is not an RE2 regular expression: %v", p, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	return nil
}

func anchored(p string) string { return "^(?:" + p + ")$" }

// NetworkMatcher tells whether an HNS network is one of a policy-only
// plan's networks.
type NetworkMatcher struct {
	patterns []string
	re       *regexp.Regexp
}

// NewNetworkMatcher compiles patterns (CheckNetworkPattern each). No
// pattern matches nothing.
func NewNetworkMatcher(patterns []string) (*NetworkMatcher, error) {
	if len(patterns) > MaxNetworkPatterns {
		return nil, fmt.Errorf("%d network patterns: at most %d", len(patterns), MaxNetworkPatterns)
	}
	parts := make([]string, len(patterns))
	for i, p := range patterns {
		if err := CheckNetworkPattern(p); err != nil {
			return nil, err
		}
		parts[i] = anchored(p)
	}
	m := &NetworkMatcher{patterns: patterns}
	if len(parts) > 0 {
		m.re = regexp.MustCompile(strings.Join(parts, "|"))
	}
	return m, nil
}

// Match reports whether the network named name is one of the matcher's.
func (m *NetworkMatcher) Match(name string) bool {
	return m != nil && m.re != nil && m.re.MatchString(name)
}

// String lists the patterns, for messages: "azure.*" or "flannel\.[0-9]+, vxlan0".
func (m *NetworkMatcher) String() string {
	if m == nil {
		return ""
	}
	q := make([]string, len(m.patterns))
	for i, p := range m.patterns {
		q[i] = fmt.Sprintf("%q", p)
	}
	return strings.Join(q, ", ")
}
