// Package vxlan says what a change of the cluster's VXLAN identity — its
// VNI or its UDP port — does beyond what compiler/diff lists node by node
// (each Windows network's replace): what changes on the Linux nodes and
// how to apply it, which pairs of nodes cannot exchange VXLAN traffic
// while some nodes have switched and others have not, and how long that
// lasts at the pace of the Windows nodes' rollout.
//
// Why pairs break: a VXLAN packet carries its VNI and goes to one UDP
// port, and a node delivers it only to a tunnel of that VNI on that port
// — Linux's vxlan driver looks the device up by the packet's VNI on the
// socket of the device's port; HNS matches the Overlay network's VSID and
// listens on its VxlanPort — and drops it otherwise. No node can speak
// both values at once: Felix keeps one vxlan.calico device, flanneld one
// flannel.<VNI>, HNS one VSID per network. So from the moment one node
// switches until the last one has, cross-node pod traffic between a node
// on the old values and one on the new is lost, both ways.
//
// A Side is one end of a change (the base or head of a diff, the live
// cluster or the intent); Compare makes the Change, which renders itself
// (Lines, Summary) and encodes as JSON.
package vxlan

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/topology"
)

// Who programs the VXLAN tunnels of the nodes (Side.Owner, Linux.Owner,
// Windows.Owner).
const (
	OwnerHnsplan  = "hnsplan"  // the agent: its plan's Overlay network
	OwnerFlanneld = "flanneld" // flanneld, from net-conf.json (both OSes)
	OwnerCalico   = "calico"   // Felix, from FelixConfiguration (Linux)
)

// The pace of a Windows node's replace, from which a wave's time is
// estimated (see Options and Window). They are the agent's defaults
// (applier.Config, applier/replace); applier's tests hold them equal.
const (
	// DefaultDrain is how long a node's pods take to leave: Kubernetes'
	// default terminationGracePeriodSeconds, which a drain waits out for
	// a pod that does not end sooner (Options.Drain, --drain-time).
	DefaultDrain = 30 * time.Second
	// Recreate is the replace's steps after the drain: delete and create
	// the network, wait for its provider address, restore host routes,
	// program the routes. BenchmarkFreshNodeRoutes measures a fresh node
	// of a 5,000-node cluster at 6.5 s with HNS at 50 ms a call; rounded
	// up.
	Recreate = 10 * time.Second
	// SlotPoll is how often a node waiting for a rollout slot asks again
	// (applier.Config.SlotPoll): at most that long between one node's
	// slot freed and the next node's drain.
	SlotPoll = 10 * time.Second
	// DrainTimeout is the agent's --drain-timeout: a drain not done by
	// then reports blocked, keeps its slot, and the rollout halts.
	DrainTimeout = 10 * time.Minute
)

// Side is one end of a change: the cluster's VXLAN identity and what the
// pace of its Windows nodes' rollout depends on.
type Side struct {
	// VXLAN says the Windows nodes network with VXLAN; what follows means
	// something only then.
	VXLAN bool
	// Networking is the intent's networking ("calico-vxlan").
	Networking string
	VNI, Port  int
	// Owner programs the Windows nodes' VXLAN network: OwnerHnsplan, or
	// OwnerFlanneld (a policy-only plan beside flanneld).
	Owner string
	// Windows and Linux count the nodes; Linux is -1 when unknown (plans
	// hold no Linux node).
	Windows, Linux int
	// Rollout is windows.rollout as the plans carry it (nil: defaults).
	Rollout *plan.Rollout
	// Groups are the sizes of rollout.order's groups of Windows nodes, in
	// the order they replace; nil without an order or when unknown (plans
	// hold no labels).
	Groups []int
}

// FromPlans is the side a set of plans gives: the VNI and port of their
// Overlay networks. Policy-only plans hold no network: the side is then
// no VXLAN of hnsplan's, whoever owns it.
func FromPlans(ps []*plan.NodePlan) Side {
	s := Side{Windows: len(ps), Linux: -1}
	for _, p := range ps {
		if s.Networking == "" {
			s.Networking, s.Rollout = p.Networking, p.Rollout
		}
		if s.VXLAN || p.PolicyOnly != nil || p.Network.Type != "Overlay" {
			continue
		}
		s.VXLAN, s.Owner, s.Port = true, OwnerHnsplan, intent.DefaultVXLANPort
		for _, ipam := range p.Network.Ipams {
			for _, sub := range ipam.Subnets {
				if v, ok := plan.Find[plan.VSID](sub.Policies); ok && s.VNI == 0 {
					s.VNI = int(v.IsolationId)
				}
			}
		}
		if v, ok := plan.Find[plan.VxlanPort](p.Network.Policies); ok {
			s.Port = int(v.Port)
		}
	}
	return s
}

// FromIntent is the side an intent gives: its VXLAN settings (or their
// defaults) when its Windows nodes network with VXLAN, hnsplan's network
// or flanneld's; its node counts; its rollout and, with rollout.order, the
// groups its nodes' labels make.
func FromIntent(c *intent.Cluster) Side { return FromTopology(topology.New(c)) }

// FromTopology is FromIntent of t.Cluster, with its topology already
// derived.
func FromTopology(t *topology.Topology) Side {
	c := t.Cluster
	s := Side{Networking: string(c.Networking), Windows: len(t.Windows), Linux: len(t.Linux),
		VNI: intent.DefaultVXLANVNI, Port: intent.DefaultVXLANPort, Owner: OwnerHnsplan}
	if v := c.VXLAN; v != nil {
		s.VNI, s.Port = v.VNI, v.Port
	}
	switch {
	case c.Networking == intent.FlannelVXLAN:
		s.VXLAN, s.Owner = true, OwnerFlanneld
	case c.PolicyOnly():
		// The platform's CNI: its tunnels, if any, are not the intent's.
	case c.Networking == intent.CalicoVXLAN:
		s.VXLAN = true
	default:
		s.VXLAN = slices.ContainsFunc(t.WindowsPools, func(p *topology.Pool) bool { return p.Encapsulation == "VXLAN" })
	}
	if r := c.Windows.Rollout; r != nil {
		s.Rollout = &plan.Rollout{MaxUnavailable: r.MaxUnavailable, Order: r.Order}
		if r.VXLANChange == plan.VXLANAllAtOnce {
			s.Rollout.VXLANChange = r.VXLANChange
		}
		if r.Order != "" {
			s.Groups = groups(t, r.Order)
		}
	}
	return s
}

// groups are the sizes of the groups of Windows nodes by the value of the
// label key order, in the order the agents take them: values sorted, the
// nodes without the label last.
func groups(t *topology.Topology, order string) []int {
	by := map[string]int{}
	unlabelled := 0
	for _, n := range t.Windows {
		if v, ok := t.Labels[n.Name][order]; ok {
			by[v]++
		} else {
			unlabelled++
		}
	}
	var out []int
	for _, v := range slices.Sorted(maps.Keys(by)) {
		out = append(out, by[v])
	}
	if unlabelled > 0 {
		out = append(out, unlabelled)
	}
	return out
}

// Live is the side of the live cluster in the intent's inventory, when it
// shows one: for Calico, the FelixConfiguration "default" (its vxlanVNI
// and vxlanPort; Calico's defaults where unset); for flannel-vxlan, the
// VNI the Nodes' flannel.alpha.coreos.com/backend-data annotations publish
// (the first that differs from the intent's; the port is not published:
// the intent's is assumed). src says where. ok is false when the
// inventory has no such object. The live side has the intent's nodes and
// rollout: it is the same cluster.
func Live(in *intent.Intent) (s Side, src LiveSource, ok bool) {
	return live(in, topology.New(in.Cluster))
}

// live is Live with the intent's topology t.
func live(in *intent.Intent, t *topology.Topology) (s Side, src LiveSource, ok bool) {
	s = FromTopology(t)
	if !s.VXLAN {
		return s, src, false
	}
	switch linuxOwner(s) {
	case OwnerCalico:
		for _, l := range in.Inventory.Calico.FelixConfigs {
			if l.Name != "default" {
				continue
			}
			s.VNI, s.Port = intent.DefaultVXLANVNI, intent.DefaultVXLANPort
			if v := l.Spec.VXLANVNI; v != nil {
				s.VNI = *v
			}
			if v := l.Spec.VXLANPort; v != nil {
				s.Port = *v
			}
			return s, LiveSource{What: "the live FelixConfiguration default", VNIPos: l.Source.PosOf("spec", "vxlanVNI"),
				PortPos: l.Source.PosOf("spec", "vxlanPort")}, true
		}
	case OwnerFlanneld:
		want := s.VNI
		for _, n := range in.Inventory.Nodes {
			var data struct {
				VNI int `json:"VNI"`
			}
			if json.Unmarshal([]byte(n.Annotations[FlannelBackendData]), &data) != nil || data.VNI == 0 {
				continue
			}
			if !ok || data.VNI != want {
				src, ok = LiveSource{What: "the live Node " + n.Name + "'s annotation " + FlannelBackendData, VNIPos: n.Source.Pos, PortPos: n.Source.Pos}, true
			}
			if data.VNI != want {
				s.VNI = data.VNI
				break
			}
		}
		return s, src, ok
	}
	return s, src, false
}

// LiveChange is the change that applying the intent makes to the live
// cluster its inventory shows (Live), and where the live values are
// written; nil when the inventory shows none or the values agree.
func LiveChange(in *intent.Intent, o Options) (*Change, LiveSource) {
	return LiveChangeOf(in, topology.New(in.Cluster), o)
}

// LiveChangeOf is LiveChange with the intent's topology t (topology.New
// of in.Cluster), which the caller has already derived.
func LiveChangeOf(in *intent.Intent, t *topology.Topology, o Options) (*Change, LiveSource) {
	l, src, ok := live(in, t)
	if !ok {
		return nil, src
	}
	return Compare(l, FromTopology(t), o), src
}

// LiveSource says where a live side is written: the object, and the
// positions of its VNI and port (the object's where it does not write them).
type LiveSource struct {
	What            string
	VNIPos, PortPos diag.Pos
}

// FlannelBackendData is the Node annotation in which flanneld publishes
// its VXLAN backend's VNI and VTEP MAC.
const FlannelBackendData = "flannel.alpha.coreos.com/backend-data"

// linuxOwner is who programs the Linux nodes' VXLAN for a side.
func linuxOwner(s Side) string {
	switch {
	case s.Owner == OwnerFlanneld:
		return OwnerFlanneld
	case strings.HasPrefix(s.Networking, "calico-"):
		return OwnerCalico
	}
	return ""
}
