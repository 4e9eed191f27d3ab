// Package reach decides pod-to-pod connections in a hybrid cluster, each
// side where it is enforced: a pod on a Windows node by its compiled HNS
// ACL list (package sim, never a second reading of the policies), a pod on
// a Linux node by Calico's Felix from the policy program (Linux). A
// connection is allowed when the source's egress and the destination's
// ingress both allow it.
//
// The Linux side reads the program as compiled, so where the compiler
// failed closed for Windows (an Allow it dropped, a Deny it widened, a Pass
// it made a Deny: ICMP types, HTTP matches, named ports with notPorts,
// IPv6-only rules) the Linux verdict is as strict as the Windows one,
// where Felix on Linux, enforcing the rule as written, may allow more.
// It never allows more than Calico does.
package reach

import (
	"fmt"

	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/sim"
)

// Operating systems of a node.
const (
	OSWindows = "windows"
	OSLinux   = "linux"
)

// Endpoint is a pod and where it runs.
type Endpoint struct {
	Pod  *acl.Pod
	Node string
	OS   string // OSWindows or OSLinux
	// ACL is a Windows pod's compiled ACL list.
	ACL *sim.List
}

// Key is the pod's "namespace/name".
func (e *Endpoint) Key() string { return e.Pod.Key() }

// Side is how one end decided: the source's egress or the destination's
// ingress.
type Side struct {
	Endpoint *Endpoint
	Allowed  bool
	// Windows is the ACL verdict of a Windows pod.
	Windows sim.Verdict
	// Linux is the policy program's decision for a Linux pod.
	Linux Decision
}

// Verdict is the outcome of one connection.
type Verdict struct {
	Egress, Ingress Side
	Allowed         bool
}

// DecidedBy says which enforcement decided: for a blocked connection the
// OS of the side that blocked it (the source's, when both would: the
// packet never leaves), for an allowed one both sides' ("windows",
// "linux" or "windows+linux").
func (v Verdict) DecidedBy() string {
	switch {
	case !v.Egress.Allowed:
		return v.Egress.Endpoint.OS
	case !v.Ingress.Allowed:
		return v.Ingress.Endpoint.OS
	case v.Egress.Endpoint.OS == v.Ingress.Endpoint.OS:
		return v.Egress.Endpoint.OS
	}
	return OSWindows + "+" + OSLinux
}

// EphemeralPort stands for the client's source port.
const EphemeralPort = 49152

// Decider decides connections between endpoints.
type Decider struct {
	linux *Linux
}

// NewDecider returns a decider whose Linux side evaluates prog over world.
func NewDecider(prog *plan.Program, world *acl.World) *Decider {
	return &Decider{linux: NewLinux(prog, world)}
}

// Decide decides a connection from src to dst on proto and port.
func (d *Decider) Decide(src, dst *Endpoint, proto int, port uint16) (Verdict, error) {
	out, err := d.side(src, "Out", sim.Packet{Protocol: proto, Remote: dst.Pod.IP, LocalPort: EphemeralPort, RemotePort: port})
	if err != nil {
		return Verdict{}, err
	}
	in, err := d.side(dst, "In", sim.Packet{Protocol: proto, Remote: src.Pod.IP, LocalPort: port, RemotePort: EphemeralPort})
	if err != nil {
		return Verdict{}, err
	}
	return Verdict{Egress: out, Ingress: in, Allowed: out.Allowed && in.Allowed}, nil
}

// Direction decides one end of a connection between e and peer: e's
// egress to peer when egress is set, else e's ingress from peer; port is
// the destination port. Decide is the source's egress and the
// destination's ingress.
func (d *Decider) Direction(e, peer *Endpoint, egress bool, proto int, port uint16) (Side, error) {
	if egress {
		return d.side(e, "Out", sim.Packet{Protocol: proto, Remote: peer.Pod.IP, LocalPort: EphemeralPort, RemotePort: port})
	}
	return d.side(e, "In", sim.Packet{Protocol: proto, Remote: peer.Pod.IP, LocalPort: port, RemotePort: EphemeralPort})
}

// Linux is the decider's Linux evaluator.
func (d *Decider) Linux() *Linux { return d.linux }

func (d *Decider) side(e *Endpoint, direction string, p sim.Packet) (Side, error) {
	s := Side{Endpoint: e}
	switch e.OS {
	case OSWindows:
		if e.ACL == nil {
			return s, fmt.Errorf("pod %s on Windows node %s has no ACL list", e.Key(), e.Node)
		}
		s.Windows = e.ACL.Evaluate(direction, p)
		s.Allowed = s.Windows.Allowed
	case OSLinux:
		dec, err := d.linux.Evaluate(e.Pod, direction, p)
		if err != nil {
			return s, fmt.Errorf("pod %s: %w", e.Key(), err)
		}
		s.Linux, s.Allowed = dec, dec.Allowed
	default:
		return s, fmt.Errorf("pod %s: node %s has OS %q, not windows or linux", e.Key(), e.Node, e.OS)
	}
	return s, nil
}
