package plan

import "net/netip"

// TypeACL is an endpoint ACL policy.
const TypeACL = "ACL"

// ACL is an endpoint ACL policy's settings, in the HNS v2 schema (with the
// Id field hcsshim's struct lacks). Lists are comma-joined strings, as HNS
// takes them; "" matches anything. Protocols is one IANA number, or "256"
// for any.
type ACL struct {
	Id              string `json:"Id,omitempty"`
	Protocols       string `json:"Protocols"`
	Action          string `json:"Action"`    // "Allow" or "Block"
	Direction       string `json:"Direction"` // "In" or "Out"
	LocalAddresses  string `json:"LocalAddresses,omitempty"`
	RemoteAddresses string `json:"RemoteAddresses,omitempty"`
	LocalPorts      string `json:"LocalPorts,omitempty"`
	RemotePorts     string `json:"RemotePorts,omitempty"`
	RuleType        string `json:"RuleType"` // "Switch" (VFP) or "Host" (WFP)
	Priority        uint16 `json:"Priority"`
}

func (ACL) policyType() string { return TypeACL }

// ProtocolAny is HNS's protocol number for any protocol.
const ProtocolAny = 256

// Program is the compiled policy program: every policy of the cluster,
// sorted, with its rules rewritten into the positive forms Windows can
// enforce. Which policies apply to an endpoint, and which addresses a
// selector stands for, depend on live pods: compiler/acl renders an
// endpoint's ACL list from the program and the pods it knows.
type Program struct {
	// Tiers in evaluation order (tier order, then name; the default tier
	// holds Kubernetes NetworkPolicies at order 1000).
	Tiers []Tier `json:"tiers"`
}

// Tier is a Calico tier.
type Tier struct {
	Name string `json:"name"`
	// DefaultAction is what happens to traffic that no rule of an applying
	// policy matched: "Deny", or "Pass" to the next tier.
	DefaultAction string          `json:"defaultAction"`
	Policies      []NetworkPolicy `json:"policies"` // in evaluation order (order, then name)
}

// NetworkPolicy is one Kubernetes or Calico network policy. (A bare
// Policy is an HNS policy.)
type NetworkPolicy struct {
	// ID is "<kind>.<namespace>.<name>" (kind knp, np or gnp; no namespace
	// for gnp); ACL ids start with it.
	ID string `json:"id"`
	// Source is where the policy is written: "file:line:col".
	Source string `json:"source,omitempty"`
	// Namespace is a namespaced policy's namespace: it applies to that
	// namespace's endpoints only (its Selector says so too; this lets a
	// renderer skip it without evaluating the selector).
	Namespace string `json:"namespace,omitempty"`
	// Selector selects the endpoints the policy applies to: a Calico
	// selector over the endpoint labels (see EndpointLabels).
	Selector string `json:"selector"`
	// NamespaceSelector, for a GlobalNetworkPolicy, also limits it to
	// endpoints in the namespaces it selects (over namespace labels).
	NamespaceSelector string `json:"namespaceSelector,omitempty"`
	// Ingress and Egress say which directions the policy applies to (its
	// types); a policy of a type with no rules still applies, and denies.
	Ingress      bool         `json:"ingress"`
	Egress       bool         `json:"egress"`
	IngressRules []PolicyRule `json:"ingressRules,omitempty"`
	EgressRules  []PolicyRule `json:"egressRules,omitempty"`
}

// PolicyRule is one rule of a network policy. For ingress, Local is the destination and Remote the
// source; for egress the other way round.
type PolicyRule struct {
	ID       string `json:"id"`     // "<policy id>-<in|out><index>[.<part>]"
	Action   string `json:"action"` // "Allow", "Deny" or "Pass" (Log rules are dropped)
	Protocol int    `json:"protocol,omitempty"`
	// NotProtocols lists protocol numbers the rule must not match when
	// Protocol is 0 (any): a rewritten notProtocol.
	NotProtocols []int  `json:"notProtocols,omitempty"`
	Local        Match  `json:"local"`
	Remote       Match  `json:"remote"`
	Source       string `json:"source,omitempty"` // "file:line:col" of the rule
}

// Match is one side of a rule. Every constraint that is set must hold.
type Match struct {
	// Nets are the addresses the side may have; nil is any. Negated nets
	// are already subtracted.
	Nets []netip.Prefix `json:"nets,omitempty"`
	// Selector, if set, limits the side to endpoints it selects (Calico
	// selector over endpoint labels), in Namespace if set, or in the
	// namespaces NamespaceSelector selects (over namespace labels).
	Selector          string `json:"selector,omitempty"`
	Namespace         string `json:"namespace,omitempty"`
	NamespaceSelector string `json:"namespaceSelector,omitempty"`
	// NotSelector excludes the endpoints it selects (all namespaces).
	NotSelector string `json:"notSelector,omitempty"`
	// Ports are the side's port ranges, NamedPorts its named ports; both
	// nil is any port.
	Ports      []PortRange `json:"ports,omitempty"`
	NamedPorts []string    `json:"namedPorts,omitempty"`
}

// PortRange is an inclusive range of ports.
type PortRange struct {
	First uint16 `json:"first"`
	Last  uint16 `json:"last"`
}

// EndpointLabels are the labels a pod endpoint carries for selectors: its
// own, plus those Calico adds.
const (
	LabelNamespace      = "projectcalico.org/namespace"
	LabelOrchestrator   = "projectcalico.org/orchestrator"
	LabelServiceAccount = "projectcalico.org/serviceaccount"
	LabelNamespaceName  = "projectcalico.org/name" // on namespaces
)
