package fleet

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// An Object is one ConfigMap publish writes: a node's plan, or a part the
// plans share.
type Object struct {
	compiler.File
	name   string // the ConfigMap's name
	key    string // the data key of the file: PlanKey or PartKey
	sigKey string // the data key of its signature: PlanSigKey or PartSigKey
	labels map[string]string
	// refs are the parts the object names: a plan its route table's head
	// and its program's chunks, a head its shards.
	refs []string
}

// Name is the ConfigMap's name.
func (o *Object) Name() string { return o.name }

// phase orders the writes: shards and chunks, then heads, then plans, so
// that an agent never finds an object before what it names.
func (o *Object) phase() int {
	switch {
	case o.IsPlan():
		return 2
	case o.Kind == plan.KindRouteTable:
		return 1
	}
	return 0
}

// PartLabel is the value of LabelPart for a part of kind.
func PartLabel(kind string) string { return strings.ToLower(kind) }

// Objects makes the ConfigMaps of files (parts and plans, as
// compiler.EncodePlans and compiler.ReadPlanDir give them; plans are the
// decoded plans, which name their parts) in the order they are written,
// and checks that each can be one: a valid name, at most MaxObject bytes,
// and every part a plan or a head names among the parts. All problems are
// reported at once, before anything is sent.
func Objects(files []compiler.File, plans []*plan.NodePlan) ([]*Object, error) {
	byNode := make(map[string]*plan.NodePlan, len(plans))
	for _, p := range plans {
		byNode[p.Node] = p
	}
	var errs []error
	objs := make([]*Object, 0, len(files))
	seen := map[string]bool{}
	for _, f := range files {
		var o *Object
		if f.IsPlan() {
			o, errs = planObject(f, byNode[f.Node], seen, errs)
		} else {
			o, errs = partObject(f, seen, errs)
		}
		seen[o.name] = true
		objs = append(objs, o)
	}
	errs = checkRefs(objs, byNode, errs)
	slices.SortStableFunc(objs, func(a, b *Object) int { return a.phase() - b.phase() })
	return objs, errors.Join(errs...)
}

// planObject makes the ConfigMap of the plan file f, whose decoded plan
// is p, appending its problems to errs.
func planObject(f compiler.File, p *plan.NodePlan, seen map[string]bool, errs []error) (*Object, []error) {
	o := &Object{File: f}
	o.name, o.key, o.sigKey = ConfigMapName(f.Node), PlanKey, PlanSigKey
	o.labels = map[string]string{LabelManagedBy: "hnsplan"}
	if len(validation.IsValidLabelValue(f.Node)) == 0 {
		o.labels[LabelNode] = f.Node
	}
	if seen[o.name] {
		errs = append(errs, fmt.Errorf("node %s has two plans", f.Node))
	}
	if msgs := validation.IsDNS1123Subdomain(o.name); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("node %s: ConfigMap name %q is invalid: %s", f.Node, o.name, strings.Join(msgs, "; ")))
	}
	if p == nil {
		errs = append(errs, fmt.Errorf("node %s: the plan file has no decoded plan", f.Node))
	} else {
		if p.RouteTable != nil {
			o.refs = append(o.refs, p.RouteTable.Name)
		}
		for _, c := range p.ProgramChunks {
			o.refs = append(o.refs, c.Name)
		}
	}
	if n := o.size(); n > MaxObject {
		why := "its own network, host endpoint and pod template"
		if p != nil && len(p.Endpoints) > 0 {
			why = fmt.Sprintf("%d pod endpoints rendered from --inventory, each with its ACLs: compile without --inventory, and the agent renders them from the live pods", len(p.Endpoints))
		}
		errs = append(errs, fmt.Errorf("the plan of node %s is %d bytes (%.1f KiB) with its keys and signature; a published ConfigMap holds at most %d bytes (256 KiB): the plan holds %s",
			f.Node, n, float64(n)/1024, MaxObject, why))
	}
	return o, errs
}

// partObject makes the ConfigMap of the part file f, appending its
// problems to errs.
func partObject(f compiler.File, seen map[string]bool, errs []error) (*Object, []error) {
	o := &Object{File: f}
	o.name, o.key, o.sigKey = f.Part, PartKey, PartSigKey
	o.labels = map[string]string{LabelManagedBy: "hnsplan", LabelPart: PartLabel(f.Kind)}
	if seen[o.name] {
		errs = append(errs, fmt.Errorf("part %s is there twice", f.Part))
	}
	if err := plan.CheckPartName(f.Part); err != nil {
		errs = append(errs, err)
	}
	switch f.Kind {
	case plan.KindRouteTable:
		if t, err := plan.DecodeRouteTable(f.Data, f.Part); err != nil {
			errs = append(errs, fmt.Errorf("part %s: %w", f.Part, err))
		} else {
			for _, s := range t.Shards {
				o.refs = append(o.refs, s.Name)
			}
		}
	case plan.KindRouteShard, plan.KindProgramChunk:
	default:
		errs = append(errs, fmt.Errorf("part %s: unknown kind %q", f.Part, f.Kind))
	}
	if n := o.size(); n > MaxObject {
		errs = append(errs, fmt.Errorf("part %s (%s) is %d bytes (%.1f KiB) with its keys and signature; a published ConfigMap holds at most %d bytes (256 KiB): compile it again with this hnsplan, which splits parts below that",
			f.Part, f.Kind, n, float64(n)/1024, MaxObject))
	}
	return o, errs
}

// checkRefs checks that every name resolves to a part of the right kind:
// publish never sends a plan or head whose parts it does not send too.
func checkRefs(objs []*Object, byNode map[string]*plan.NodePlan, errs []error) []error {
	kinds := map[string]string{}
	for _, o := range objs {
		if !o.IsPlan() {
			kinds[o.name] = o.Kind
		}
	}
	for _, o := range objs {
		for i, r := range o.refs {
			want := plan.KindRouteShard
			if o.IsPlan() {
				want = plan.KindProgramChunk
				if i == 0 && byNode[o.Node] != nil && byNode[o.Node].RouteTable != nil {
					want = plan.KindRouteTable
				}
			}
			if kinds[r] != want {
				what := "the plan of node " + o.Node
				if !o.IsPlan() {
					what = "route table " + o.Part
				}
				errs = append(errs, fmt.Errorf("%s names part %s (%s), which is not among the parts to publish: compile again", what, r, want))
			}
		}
	}
	return errs
}

// size is the size of the object's data: keys, file and signature.
func (o *Object) size() int {
	n := len(o.key) + len(o.Data)
	if o.Signature != nil {
		n += len(o.sigKey) + len(o.Signature)
	}
	return n
}

// nodesOf lists the nodes of the plans among objs, in order.
func nodesOf(objs []*Object) []string {
	var out []string
	for _, o := range objs {
		if o.IsPlan() {
			out = append(out, o.Node)
		}
	}
	return out
}

// sendSet is the ConfigMaps a publish writes (unless unchanged): the
// picked plans and every part they name, with the shards of the heads
// they name.
func sendSet(objs []*Object, picked map[string]bool) map[string]bool {
	byName := map[string]*Object{}
	for _, o := range objs {
		byName[o.name] = o
	}
	send := map[string]bool{}
	for _, o := range objs {
		if !o.IsPlan() || !picked[o.Node] {
			continue
		}
		send[o.name] = true
		for _, r := range o.refs {
			send[r] = true
			if head := byName[r]; head != nil {
				for _, s := range head.refs {
					send[s] = true
				}
			}
		}
	}
	return send
}
