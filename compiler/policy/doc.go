// Package policy compiles the intent's Kubernetes and Calico network
// policies into the policy program (plan.Program): tiers and policies in
// evaluation order, every rule rewritten into a form Windows can enforce
// exactly — or, where Windows has no exact form, failed closed (an Allow
// narrowed or dropped, a Deny widened, never the reverse) with a finding.
//
// Kubernetes NetworkPolicies take Calico's meaning: the default tier, order
// 1000, one Allow rule per peer and protocol.
//
// # Selector scoping
//
// Which pods a policy applies to, and which pods a rule's source or
// destination matches, follow Calico's conversion of the v3 API for Felix
// (projectcalico/calico, libcalico-go/lib/backend/syncersv1/updateprocessors:
// rules.go getEndpointSelector for rules, networkpolicyprocessor.go and
// globalnetworkpolicyprocessor.go for policies) and the selector-scope
// rules of https://docs.tigera.io/calico/latest/reference/resources/networkpolicy
// (EntityRule) and .../calico-labels ("the default values for
// namespaceSelector for NetworkPolicy and GlobalNetworkPolicy are
// different"). In the table, "ns" is a namespaced policy's namespace; a
// pod's namespace is P; a rule side with no row of its own that has no
// selector field matches by nets and ports alone (any address, pod or not).
//
//	where                           | fields used                          | the side matches
//	--------------------------------+--------------------------------------+---------------------------------------------------------------
//	NetworkPolicy spec              | selector S                           | pods with P == ns and S
//	NetworkPolicy spec              | serviceAccountSelector               | rejected (needs ServiceAccount labels hnsplan does not read)
//	GlobalNetworkPolicy spec        | selector S                           | pods with S, every namespace
//	GlobalNetworkPolicy spec        | + namespaceSelector N                | ... and P's labels match N; N = all() or global(): no limit
//	                                |                                      | (Calico rewrites neither to exclude pods here: global() is true)
//	K8s NetworkPolicy spec          | podSelector S                        | pods with P == ns and S
//	NetworkPolicy rule side         | none of the fields below             | any address (nets, ports only)
//	NetworkPolicy rule side         | selector S                           | pods with P == ns and S
//	NetworkPolicy rule side         | serviceAccounts.names A              | pods with P == ns and service account in A
//	NetworkPolicy rule side         | notSelector X alone                  | pods with P == ns and not X (never an address outside ns)
//	NetworkPolicy rule side         | selector S and notSelector X         | pods with P == ns and S and not X
//	any Calico rule side            | namespaceSelector N (not all/global) | pods whose namespace's labels match N (and S, not X if given)
//	any Calico rule side            | namespaceSelector all()              | pods of every namespace (and S, not X if given)
//	any Calico rule side            | namespaceSelector "" (absent)        | as if absent: the rows above/below
//	any Calico rule side            | namespaceSelector global()           | no pod: global() selects non-namespaced resources only; in
//	                                |                                      | an expression, global() is false (!has(projectcalico.org/namespace))
//	GlobalNetworkPolicy rule side   | selector S                           | pods with S, every namespace
//	GlobalNetworkPolicy rule side   | notSelector X alone                  | any address except the pods with X (non-pods included)
//	GlobalNetworkPolicy rule side   | serviceAccounts.names A              | pods with service account in A, every namespace
//	any Calico rule side            | serviceAccounts.selector             | rejected (needs ServiceAccount labels)
//	any Calico rule side            | services {name, namespace}           | the Service's pods (namespace defaults to the policy's), not
//	                                |                                      | scoped to ns; destination ports from the Service's targetPorts
//	K8s rule peer                   | podSelector S                        | pods with P == ns and S
//	K8s rule peer                   | namespaceSelector N (+ podSelector S)| pods whose namespace's labels match N (and S); {} is every ns
//	K8s rule peer                   | ipBlock C except E                   | addresses in C and not in E (pods or not)
//
// Source and destination, ingress and egress are scoped alike: the rule
// side that is the endpoint itself (destination of ingress, source of
// egress) is decided per endpoint by the same test. Nets, when also given,
// must hold as well (an address in the nets and of a matching pod).
package policy
