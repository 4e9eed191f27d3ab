package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/types"
)

// Annotations the agent keeps on its Node.
const (
	AnnotationDigest = "hnsplan.io/applied-digest"
	// AnnotationRoutes is the digest of the route table head whose
	// routes HNS holds.
	AnnotationRoutes    = "hnsplan.io/applied-routes"
	AnnotationState     = "hnsplan.io/state"
	AnnotationLastError = "hnsplan.io/last-error"
	// AnnotationReadbackMismatch names the fields HNS reads back
	// otherwise than the agent wrote them (state hns-readback-mismatch).
	AnnotationReadbackMismatch = "hnsplan.io/readback-mismatch"
	// AnnotationCordoned marks a cordon made by the agent, so that after a
	// restart it knows to lift it, and never lifts an operator's.
	AnnotationCordoned = "hnsplan.io/cordoned-by-agent"
	// AnnotationAudit is the summary of the HNS audit (applier/audit), at
	// most 1 KiB.
	AnnotationAudit = "hnsplan.io/audit"
	// AnnotationLetGo records that an operator let go of the agent's
	// cordon (hnsplan rollout resume): the node, cordoned and holding no
	// rollout slot, no longer counts against maxUnavailable. The agent
	// removes it with its next cordon or uncordon.
	AnnotationLetGo = "hnsplan.io/let-go"
)

// AgentAnnotations are every Node annotation the agent writes: its
// status (SetStatus), its cordon marker and the operator's let-go of it
// (removed with its next cordon or uncordon), and the VXLAN tunnel for
// Calico's Linux nodes (PublishTunnel). deploy/node-patch-policy.yaml
// admits exactly these (examples/deploy_test.go), and a test here holds
// every write to them.
var AgentAnnotations = []string{AnnotationDigest, AnnotationRoutes, AnnotationState, AnnotationLastError, AnnotationReadbackMismatch,
	AnnotationAudit, AnnotationCordoned, AnnotationLetGo, AnnotationTunnelAddr, AnnotationTunnelMAC}

// Stranded says whether a node is left disrupted by hnsplan with no one
// to finish it: cordoned by the agent (unschedulable, with its marker),
// not let go of by an operator. Whether it still holds a live rollout
// slot is the caller's to check: a node that does is in its replace, not
// stranded. Such a node counts against maxUnavailable (its agent died,
// or its slot was taken over after it expired).
func Stranded(unschedulable bool, annotations map[string]string) bool {
	_, agents := annotations[AnnotationCordoned]
	_, letGo := annotations[AnnotationLetGo]
	return unschedulable && agents && !letGo
}

// NodeState is the node's state as the agent reports it: the Node
// annotation hnsplan.io/state, `state` in /status and the state label of
// the pass metrics. It is the one vocabulary of states: applier's passes,
// applier/replace's runs and this package's annotation all speak it, and
// the strings are a contract with operators (docs/operations.md, States).
type NodeState string

const (
	StateWaiting        NodeState = "waiting"         // for a verified plan, or for the cluster's caches
	StateConverged      NodeState = "converged"       // HNS matches the plan
	StateReplacing      NodeState = "replacing"       // network replacement (drain, recreate) under way, or failed and will resume
	StateBlocked        NodeState = "blocked"         // replacement waits on evictions a PodDisruptionBudget refuses; nothing was deleted
	StateReplacePending NodeState = "replace-pending" // replacement needed, but replacement is "manual" (or there is no replacer)
	StateError          NodeState = "error"           // the last pass failed; see last-error
	// StateRolloutWaiting: a replace is needed and waits for a rollout
	// slot (applier/rollout), or for an earlier group of rollout.order to
	// finish; nothing was done (the node is not cordoned).
	StateRolloutWaiting NodeState = "rollout-waiting"
	// StateRolloutHalted: the node's rollout slot was freed by an operator
	// (hnsplan rollout resume) while its replace was halted; the agent
	// does nothing more for that plan's replace until hnsplan-agent
	// replace --retry (or --abort).
	StateRolloutHalted NodeState = "rollout-halted"
	// StateReadbackMismatch: HNS reads an object back otherwise than the
	// agent wrote it, and writing it again would not mend it (see
	// hns.Echo): the object is reported and left alone until the plan or
	// the object changes; see readback-mismatch.
	StateReadbackMismatch NodeState = "hns-readback-mismatch"
	// StateConflict: another dataplane programs this node's HNS (a
	// calico-node-windows or flanneld pod runs here, or something keeps
	// rewriting an endpoint's ACLs the agent wrote): the agent writes
	// nothing to HNS until it is gone; last-error names it.
	StateConflict NodeState = "conflict"
	// StateSuspended: an operator suspended the agent (the ConfigMap
	// hnsplan-system/hnsplan-control, applier/control): it writes nothing
	// to HNS and takes no step of a replace until unsuspended; last-error
	// names the key and the reason.
	StateSuspended NodeState = "suspended"
	// StateRolloutHeld: a replace is needed, but the node runs a Windows
	// build with a known container-networking regression
	// (compiler/winbuild) and the plan's rollout.buildRegression is
	// "hold": the agent takes no slot and does not cordon until the node
	// reports a fixed build; last-error names the build and the update.
	StateRolloutHeld NodeState = "rollout-held"
)

// Status is what SetStatus publishes.
type Status struct {
	Digest string // digest of the plan last applied completely; "" removes the annotation
	Routes string // digest of its route table's head; "" removes hnsplan.io/applied-routes
	State  NodeState
	Error  string // "" removes hnsplan.io/last-error
	// Mismatch is the read-back mismatches, one line; "" removes
	// hnsplan.io/readback-mismatch.
	Mismatch string
	// Audit is the HNS audit's summary; "" removes hnsplan.io/audit.
	Audit string
}

// SetStatus writes st to this Node's hnsplan.io/ annotations with a JSON
// merge patch, which touches no other field. It skips the request when the
// cache already shows exactly these values, so calling it after every
// reconcile costs nothing while nothing changes.
func (c *Client) SetStatus(ctx context.Context, st Status) error {
	want := map[string]string{AnnotationDigest: st.Digest, AnnotationRoutes: st.Routes, AnnotationState: string(st.State), AnnotationLastError: st.Error, AnnotationReadbackMismatch: st.Mismatch, AnnotationAudit: st.Audit}
	if n, ok := c.Node(); ok {
		same := true
		for k, v := range want {
			if got, has := n.Annotations[k]; got != v || has != (v != "") {
				same = false
			}
		}
		if same {
			return nil
		}
	}
	ann := map[string]any{}
	for k, v := range want {
		if v == "" {
			ann[k] = nil // merge patch: remove
		} else {
			ann[k] = v
		}
	}
	if err := c.patchNode(ctx, map[string]any{"metadata": map[string]any{"annotations": ann}}); err != nil {
		return fmt.Errorf("kube: set status of node %q: %w", c.node, err)
	}
	return nil
}

// PublishTunnel sets this Node's projectcalico.org/VXLANTunnelMACAddr and
// projectcalico.org/IPv4VXLANTunnelAddr annotations, which Calico's Linux
// nodes read to program their VXLAN routes and FDB entries towards this node.
// mac may be in any form net.ParseMAC accepts; it is written lower-case and
// colon-separated, the form Calico's own nodes write (Calico parses either).
// vtep must be IPv4.
func (c *Client) PublishTunnel(ctx context.Context, mac string, vtep netip.Addr) error {
	hns, err := NormalizeMAC(mac)
	if err != nil {
		return fmt.Errorf("kube: publish tunnel of node %q: %w", c.node, err)
	}
	if !vtep.Is4() {
		return fmt.Errorf("kube: publish tunnel of node %q: VTEP address %v is not IPv4", c.node, vtep)
	}
	linux := macColon(hns)
	patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		AnnotationTunnelMAC: linux, AnnotationTunnelAddr: vtep.String(),
	}}}
	if err := c.patchNode(ctx, patch); err != nil {
		return fmt.Errorf("kube: publish tunnel of node %q: %w", c.node, err)
	}
	return nil
}

// macColon turns "00-15-5D-7A-00-22" into "00:15:5d:7a:00:22".
func macColon(hns string) string {
	b := []byte(hns)
	for i, ch := range b {
		switch {
		case ch == '-':
			b[i] = ':'
		case 'A' <= ch && ch <= 'F':
			b[i] = ch + ('a' - 'A')
		}
	}
	return string(b)
}

func (c *Client) patchNode(ctx context.Context, patch map[string]any) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = c.client.CoreV1().Nodes().Patch(ctx, c.node, types.MergePatchType, data, metav1PatchOptions)
	return err
}
