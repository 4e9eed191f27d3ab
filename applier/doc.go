// Package applier is the agent's reconciler: it turns the node's plan and
// the live cluster into what HNS should hold (want), reads what HNS holds
// (have), and applies hns.Diff between them.
//
// It is level-triggered with a single key, in the shape of
// sample-controller: a plan update, a change in the cluster or a periodic
// resync all just ask for one more pass, and a failed pass is retried with
// a rate limit. A pass remembers nothing it cannot re-read: after a restart
// with nothing changed, it makes no mutating call.
//
// Pod endpoints belong to the CNI; the reconciler only programs their ACL
// lists, rendered by compiler/acl from the plan's policy program and the
// live pods, and sends a list only when its canonical form differs from
// what HNS holds (each update can reset the endpoint's TCP connections). A
// change HNS cannot make in place (a network replace) goes to the
// Replacer, which drains the node first; without one the pass stops at
// state replace-pending and changes nothing.
//
// Agent is the node agent built on it (`hnsplan-agent run` wires its flags
// into a Config and runs it): plans from applier/planwatch, the cluster
// from applier/kube, status to /status, the Node and its Events. Each
// Pass says what the Loop does next (NextAfter); the agent's main holds
// no behaviour of its own.
package applier
