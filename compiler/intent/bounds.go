package intent

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

// The limits of what one intent's policies may hold, checked on the YAML
// tree (its aliases expanded) before a policy is decoded: the policy
// compiler's time and memory grow with the peers, ports and rules it is
// given (about 1.5 KB of memory per peer), and a pull request's manifest
// must not take a CI runner with it. The largest real policies of the
// corpus hold tens of rules and a few hundred peers; the largest accepted
// policies (ten of 10,000 peers) vet in about 1 s of CPU and 300 MiB; the
// hostile cases of internal/synth.FanOuts are refused (TestFanOutRefused)
// in under 5 s and 256 MiB each.
const (
	MaxPolicyRules = 1_000   // rules of one policy, ingress and egress
	MaxPolicyPeers = 10_000  // peers of one policy: from/to entries, ipBlock excepts, Calico nets and notNets
	MaxPolicyPorts = 10_000  // ports of one policy: ports and notPorts
	MaxPeers       = 100_000 // peers of all the intent's policies
	// MaxDocumentValues bounds the YAML values of one intent document,
	// its aliases expanded: a 16 MiB file of short values holds about
	// eight million. A policy of 10,000 peers written out holds about
	// 50,000.
	MaxDocumentValues = 200_000
	// MaxIntentValues bounds the YAML values of all the intent's
	// documents: files are each at most --max-file-size, but an intent
	// may have many, and the objects read keep their trees (for the
	// positions of findings): five files of 190,000 values took 342 MiB
	// at 1,000,000, 239 MiB now. 100,000 peers written out hold about
	// 500,000.
	MaxIntentValues = 700_000
	// MaxFileIndicators bounds the YAML indicators (, - : [ { and line
	// ends) of one intent file, counted before it is parsed: the YAML
	// parser's tree takes about 270 bytes a value, so a 16 MiB file of
	// "[a,a,a,...]" took vet 2.1 GiB and 41 s before anything could count
	// its values. Each value but the first needs an indicator.
	MaxFileIndicators = 200_000
)

// indicators counts the bytes of data that may start a YAML value, and
// the line where the count passes max (0 if it does not).
func indicators(data []byte, max int) (n, line int) {
	line = 1
	for _, c := range data {
		switch c {
		case '\n':
			line++
			n++
		case ',', '-', ':', '[', '{':
			n++
		default:
			continue
		}
		if n > max {
			return n, line
		}
	}
	return n, 0
}

// unalias is n, or what the alias n names.
func unalias(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// field is the value of key in the mapping n (aliases followed), or nil.
func field(n *yaml.Node, key string) *yaml.Node {
	n = unalias(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return unalias(n.Content[i+1])
		}
	}
	return nil
}

// items are the entries of the list n (aliases followed), nil if n is not
// a list.
func items(n *yaml.Node) []*yaml.Node {
	n = unalias(n)
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}

// policySize is what one policy holds, as its YAML says.
type policySize struct {
	rules, peers, ports int
	// at is where a limit was first passed: the rule that passed it.
	at *yaml.Node
}

// sizeOfPolicy counts the rules, peers and ports of the policy obj, its
// aliases expanded, stopping at the rule that passes a limit. calico says
// which API's fields to count.
func sizeOfPolicy(obj *yaml.Node, calico bool) policySize {
	var s policySize
	spec := field(obj, "spec")
	for _, dir := range []string{"ingress", "egress"} {
		rules := items(field(spec, dir))
		s.rules += len(rules)
		if s.rules > MaxPolicyRules {
			s.at = field(spec, dir)
			return s
		}
		for _, r := range rules {
			if calico {
				for _, side := range []string{"source", "destination"} {
					e := field(r, side)
					s.peers += len(items(field(e, "nets"))) + len(items(field(e, "notNets"))) + len(items(field(field(e, "serviceAccounts"), "names")))
					s.ports += len(items(field(e, "ports"))) + len(items(field(e, "notPorts")))
				}
			} else {
				peers := items(field(r, "from"))
				if dir == "egress" {
					peers = items(field(r, "to"))
				}
				s.peers += len(peers)
				for _, p := range peers {
					if s.peers > MaxPolicyPeers {
						break
					}
					s.peers += len(items(field(field(p, "ipBlock"), "except")))
				}
				s.ports += len(items(field(r, "ports")))
			}
			if s.peers > MaxPolicyPeers || s.ports > MaxPolicyPorts {
				s.at = r
				return s
			}
		}
	}
	return s
}

// admitPolicy reports whether the policy obj is within the limits, and
// counts its peers against the intent's; a policy past one is an error at
// the rule (or the rule list) that passed it, and is not decoded.
func (m *Manifests) admitPolicy(obj *yaml.Node, src Source, apiVersion, kind string, errs *diag.List) bool {
	s := sizeOfPolicy(obj, apiVersion != "networking.k8s.io/v1")
	pos := src.Pos
	if s.at != nil {
		pos = nodePos(src.File, s.at)
	}
	const todo = "split it into several policies, or write fewer, wider CIDRs"
	refuse := func(format string, args ...any) bool {
		errs.Errorf(RuleManifest, pos, "spec", format+" (counting its YAML aliases expanded); not read%s", append(args, src.where())...)
		return false
	}
	switch {
	case s.rules > MaxPolicyRules:
		return refuse("the %s has more than %s rules, more than hnsplan reads in one policy: %s", kind, diag.Thousands(MaxPolicyRules), todo)
	case s.peers > MaxPolicyPeers:
		return refuse("the %s has more than %s peers (from/to entries, ipBlock excepts, nets), more than hnsplan reads in one policy: %s", kind, diag.Thousands(MaxPolicyPeers), todo)
	case s.ports > MaxPolicyPorts:
		return refuse("the %s has more than %s ports, more than hnsplan reads in one policy: %s, or port ranges", kind, diag.Thousands(MaxPolicyPorts), "split it into several policies")
	}
	m.peers += s.peers
	if m.peers > MaxPeers {
		errs.Errorf(RuleManifest, src.Pos, "spec", "with this %s the intent's policies hold more than %s peers in all (from/to entries, ipBlock excepts, nets; YAML aliases expanded), more than hnsplan reads: write fewer, wider CIDRs, or use selectors%s", kind, diag.Thousands(MaxPeers), src.where())
		return false
	}
	return true
}

// tooManyValues is the message for a document of the intent past
// MaxDocumentValues.
func tooManyValues(expanded, doc int) string {
	return fmt.Sprintf("the document holds %s YAML values (its aliases expanded), more than the %s hnsplan reads in one document of the intent: split it into several files or documents (document %d)", diag.Thousands(expanded), diag.Thousands(MaxDocumentValues), doc)
}
