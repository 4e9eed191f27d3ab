package check

import (
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/vxlan"
)

// RuleVXLANChange is reported for a change of the cluster's VXLAN VNI or
// port: by vet, compile and plan against the live cluster of the
// inventory, by diff between base and head.
const RuleVXLANChange = "vxlan-vni-change"

// vxlanChange reports the change of the cluster's VXLAN VNI or port that
// applying the intent makes to the live cluster the inventory shows (its
// FelixConfiguration "default", or flannel's Node annotations): every
// node must switch, and nodes on different values are cut off from each
// other until all have. Without such objects in the inventory there is
// nothing to compare.
func vxlanChange(x *checker) {
	ch, src := vxlan.LiveChangeOf(x.in, x.Topology, vxlan.Options{})
	if ch == nil {
		return
	}
	at, what, move, pos := []any{"vxlan", "vni"}, "VNI", ch.VNI, src.VNIPos
	if ch.VNI == nil {
		at, what, move, pos = []any{"vxlan", "port"}, "port", ch.Port, src.PortPos
	}
	x.reportRel(RuleVXLANChange, "", at, []diag.Related{diag.At(pos, "%s: %s %d", src.What, what, move.Before)},
		"%s (%s) has VXLAN %s %d, the intent %d: applying the intent switches every node, Linux and Windows, and until all have switched %s; %s",
		src.What, pos, what, move.Before, move.After, ch.Outage(), ch.Advice())
}

// VXLANChange is the finding of rule vxlan-vni-change for ch, the change of
// the cluster's VXLAN VNI or port from a base to head (hnsplan diff of two
// intents), at head's setting, under head's cluster.constraints (which
// may turn it off); none when ch is nil.
func VXLANChange(head *intent.Intent, ch *vxlan.Change, cat Catalog) diag.List {
	if ch == nil || head == nil || head.Cluster == nil {
		return nil
	}
	x := &checker{in: head, c: head.Cluster, cat: cat}
	at, what, move := []any{"vxlan", "vni"}, "VNI", ch.VNI
	if ch.VNI == nil {
		at, what, move = []any{"vxlan", "port"}, "port", ch.Port
	}
	x.report(RuleVXLANChange, "", at, "VXLAN %s %d in the base, %d here: this change switches every node, Linux and Windows, and until all have switched %s; %s",
		what, move.Before, move.After, ch.Outage(), ch.Advice())
	var out diag.List
	for _, f := range Override(x.findings, head.Cluster, cat) {
		if f.Rule == RuleVXLANChange { // not the constraints' own findings: the build reported them
			out = append(out, f)
		}
	}
	return out
}
