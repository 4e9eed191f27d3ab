package plan

import (
	"errors"
	"fmt"
	"strings"
)

// Parts is what a reader holds of the shared parts: each verified
// (DecodeRouteTable, DecodeRouteShard, DecodeProgramChunk), by name.
// Assemble attaches them to a plan; plans assembled from one Parts share
// their route table and program, as the compiler's do.
type Parts struct {
	Tables map[string]*RouteTable
	Shards map[string]*RouteShard
	Chunks map[string]*ProgramChunk

	tables   map[string]*RouteTable // assembled, by head digest
	programs map[string]*Program    // assembled, by the chunks' digests
}

// Add records a decoded part (a *RouteTable, *RouteShard or
// *ProgramChunk) under its name, replacing one of the same name.
func (ps *Parts) Add(part any) {
	switch v := part.(type) {
	case *RouteTable:
		if ps.Tables == nil {
			ps.Tables = map[string]*RouteTable{}
		}
		ps.Tables[v.Name] = v
	case *RouteShard:
		if ps.Shards == nil {
			ps.Shards = map[string]*RouteShard{}
		}
		ps.Shards[v.Name] = v
	case *ProgramChunk:
		if ps.Chunks == nil {
			ps.Chunks = map[string]*ProgramChunk{}
		}
		ps.Chunks[v.Name] = v
	}
}

// ErrPartMissing is wrapped by a *PartError for a part a plan names that
// the reader does not hold, or holds at another digest or key.
var ErrPartMissing = errors.New("part not held")

// PartError says which part a plan could not be assembled without.
type PartError struct {
	Node string // the plan's node
	Part string // the part's name
	Want string // the digest (or, for a route table, key) the plan names
	Have string // what the reader holds: a digest, a key, or "" for nothing
}

func (e *PartError) Error() string {
	if e.Have == "" {
		return fmt.Sprintf("plan for node %s names part %s (%s), which is not published yet", e.Node, e.Part, e.Want)
	}
	return fmt.Sprintf("plan for node %s names part %s at %s, but %s is published: waiting for the plan and its parts to agree", e.Node, e.Part, e.Want, e.Have)
}

func (e *PartError) Unwrap() error { return ErrPartMissing }

// VersionError says that a plan's route table, though at the key the plan
// names, was compiled with another plan of the node (or none): the two
// are of different compiles, so the plan waits for its own table (or the
// table for its plan) like a missing part.
type VersionError struct {
	Node  string // the plan's node
	Shard string // the shard that records the node's plans
	Want  string // the plan's digest
	Have  string // the digest the table records for the node; "" for none
}

func (e *VersionError) Error() string {
	have := "records no plan for the node"
	if e.Have != "" {
		have = "was compiled with plan " + e.Have
	}
	return fmt.Sprintf("plan %s for node %s is not the plan its route table (shard %s) was published with: the table %s; the plan and the table are of different publish runs (one under way or interrupted, or one that held this node back with --nodes or --canary) until both are published", e.Want, e.Node, e.Shard, have)
}

func (e *VersionError) Unwrap() error { return ErrPartMissing }

// Assemble attaches to p the route table and program it names, when ps
// holds every part at the digests (and the route table at the key) p
// names and the table records p's digest; otherwise p is left as it was
// and the error, a *PartError or *VersionError, says what is missing. A
// reader applies only an assembled plan.
func (ps *Parts) Assemble(p *NodePlan) error {
	var routes *RouteTable
	if ref := p.RouteTable; ref != nil {
		t, err := ps.table(p.Node, ref)
		if err != nil {
			return err
		}
		if have := t.PlanDigest(p.Node); have != p.Digest {
			return &VersionError{Node: p.Node, Shard: ShardName(t.Name, ShardOf(p.Node)), Want: p.Digest, Have: have}
		}
		routes = t
	}
	var prog *Program
	if len(p.ProgramChunks) > 0 {
		var err error
		if prog, err = ps.program(p.Node, p.ProgramChunks); err != nil {
			return err
		}
	}
	p.Routes, p.Program = routes, prog
	return nil
}

func (ps *Parts) table(node string, ref *RouteTableRef) (*RouteTable, error) {
	head := ps.Tables[ref.Name]
	switch {
	case head == nil:
		return nil, &PartError{Node: node, Part: ref.Name, Want: ref.Key}
	case head.Key != ref.Key:
		return nil, &PartError{Node: node, Part: ref.Name, Want: ref.Key, Have: head.Key}
	}
	if t := ps.tables[head.Digest]; t != nil {
		return t, nil
	}
	t := *head
	t.Nodes, t.plans = nil, map[string]string{}
	for _, s := range head.Shards {
		shard := ps.Shards[s.Name]
		switch {
		case shard == nil:
			return nil, &PartError{Node: node, Part: s.Name, Want: s.Digest}
		case shard.Digest != s.Digest:
			return nil, &PartError{Node: node, Part: s.Name, Want: s.Digest, Have: shard.Digest}
		}
		t.Nodes = append(t.Nodes, shard.Nodes...)
		for _, pr := range shard.Plans {
			// Only a node that hashes to the shard: a shard cannot speak
			// for another's plan.
			if ShardName(head.Name, ShardOf(pr.Name)) == s.Name {
				t.plans[pr.Name] = pr.Digest
			}
		}
	}
	sortRouteNodes(t.Nodes)
	if ps.tables == nil {
		ps.tables = map[string]*RouteTable{}
	}
	ps.tables[head.Digest] = &t
	return &t, nil
}

func (ps *Parts) program(node string, refs []PartRef) (*Program, error) {
	var key strings.Builder
	for _, r := range refs {
		c := ps.Chunks[r.Name]
		switch {
		case c == nil:
			return nil, &PartError{Node: node, Part: r.Name, Want: r.Digest}
		case c.Digest != r.Digest:
			return nil, &PartError{Node: node, Part: r.Name, Want: r.Digest, Have: c.Digest}
		}
		key.WriteString(r.Digest)
	}
	if p := ps.programs[key.String()]; p != nil {
		return p, nil
	}
	prog := &Program{Tiers: []Tier{}}
	for _, r := range refs {
		for _, t := range ps.Chunks[r.Name].Tiers {
			if k := len(prog.Tiers); k > 0 && prog.Tiers[k-1].Name == t.Name {
				last := &prog.Tiers[k-1]
				last.Policies = append(last.Policies, t.Policies...)
				continue
			}
			t.Policies = append([]NetworkPolicy{}, t.Policies...)
			prog.Tiers = append(prog.Tiers, t)
		}
	}
	if ps.programs == nil {
		ps.programs = map[string]*Program{}
	}
	ps.programs[key.String()] = prog
	return prog, nil
}

// Names are the parts a plan names, route table shards included (those
// the held head names), for a reader to fetch or watch.
func (ps *Parts) Names(p *NodePlan) []string {
	var out []string
	if ref := p.RouteTable; ref != nil {
		out = append(out, ref.Name)
		if head := ps.Tables[ref.Name]; head != nil && head.Key == ref.Key {
			for _, s := range head.Shards {
				out = append(out, s.Name)
			}
		}
	}
	for _, r := range p.ProgramChunks {
		out = append(out, r.Name)
	}
	return out
}
