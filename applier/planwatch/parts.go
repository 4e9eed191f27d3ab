package planwatch

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// MaxProgramChunks bounds how many policy program chunks a plan may name:
// with plan.MaxPartSize each, 64 MiB of program, the size a plan could
// have before the split (plan.MaxSize). A plan naming more is refused
// before any part is read.
const MaxProgramChunks = 256

// MaxPlanParts bounds how many parts a plan needs: its route table's head,
// at most plan.RouteShards shards, and MaxProgramChunks chunks. So a
// source never holds more than MaxPlanParts × plan.MaxPartSize of parts
// for a plan.
const MaxPlanParts = 1 + plan.RouteShards + MaxProgramChunks

// ErrPartUnreadable is wrapped by a rejection for a part that exists but
// cannot be read (permissions, not a regular file, a symlink).
var ErrPartUnreadable = errors.New("part cannot be read")

// partReader reads one part where the source publishes it: its bytes and
// its detached signature (nil if none). A part that is not published is
// an error wrapping fs.ErrNotExist. where names the place for messages
// ("_routes-….json", "configmap hnsplan-system/routes-…").
type partReader interface {
	readPart(name string) (data, sig []byte, err error)
	where(name string) string
	sigWhere(name string) string
}

// heldPart is a part as last decoded, by its bytes' hash, so that a look
// that finds the same bytes does not decode them again.
type heldPart struct {
	sum  [sha256.Size]byte
	part any // *plan.RouteTable, *plan.RouteShard or *plan.ProgramChunk
}

// partCache holds the decoded parts a source's plan used at its last look;
// parts the plan no longer names are dropped, so it never holds more than
// one plan's parts.
type partCache struct {
	held map[string]heldPart
	used map[string]bool // names touched by the look in progress
}

func (c *partCache) begin() { c.used = map[string]bool{} }

// end drops what the look did not use.
func (c *partCache) end() {
	for name := range c.held {
		if !c.used[name] {
			delete(c.held, name)
		}
	}
	c.used = nil
}

// decode returns data decoded as kind, from the cache if the bytes are the
// same as last time.
func (c *partCache) decode(name, kind string, data []byte) (any, error) {
	sum := sha256.Sum256(data)
	if c.used != nil {
		c.used[name] = true
	}
	if h, ok := c.held[name]; ok && h.sum == sum && kindOf(h.part) == kind {
		return h.part, nil
	}
	var part any
	var err error
	switch kind {
	case plan.KindRouteTable:
		part, err = plan.DecodeRouteTable(data, name)
	case plan.KindRouteShard:
		part, err = plan.DecodeRouteShard(data, name)
	default:
		part, err = plan.DecodeProgramChunk(data, name)
	}
	if err != nil {
		return nil, err
	}
	if c.held == nil {
		c.held = map[string]heldPart{}
	}
	c.held[name] = heldPart{sum: sum, part: part}
	return part, nil
}

func kindOf(part any) string {
	switch part.(type) {
	case *plan.RouteTable:
		return plan.KindRouteTable
	case *plan.RouteShard:
		return plan.KindRouteShard
	case *plan.ProgramChunk:
		return plan.KindProgramChunk
	}
	return ""
}

// partsOutcome is what gathering a plan's parts found: the parts (when
// every one is held) and the key of what was used, or why not.
type partsOutcome struct {
	parts *plan.Parts
	// key identifies the parts used: the head's digest and signer, the
	// chunks' digests. With the plan's digest, it says whether what is
	// delivered changed.
	key string
	// raw is the part whose problem is reported, for the rejection's Raw.
	raw []byte
	// unchanged says the plan and every part it uses are as last
	// delivered: nothing to send.
	unchanged bool
	err       error  // nil, or why the plan cannot be assembled now
	msg       string // the rejection's message, with err
}

// gather reads and verifies the parts p names, through r: first the route
// table's head (whose signature it checks with e's Trust: a plan names its
// table by key, not digest, so only the head's signature proves the routes
// came from whoever signs plans), then the shards the head names and the
// chunks p names, each checked against its digest by Assemble.
func (e *emitter) gather(p *plan.NodePlan, r partReader) partsOutcome {
	var key strings.Builder
	if n := len(p.ProgramChunks); n > MaxProgramChunks {
		return partsOutcome{err: plan.ErrInvalid, msg: fmt.Sprintf("the plan names %d program chunks, more than the %d an agent reads: hnsplan compile never writes such a plan; compile it again with hnsplan compile and republish it", n, MaxProgramChunks)}
	}
	var names []string
	if ref := p.RouteTable; ref != nil {
		names = append(names, ref.Name)
	}
	for _, c := range p.ProgramChunks {
		names = append(names, c.Name)
	}
	for _, n := range names {
		if err := plan.CheckPartName(n); err != nil {
			return partsOutcome{err: fmt.Errorf("%w: %w", plan.ErrInvalid, err), msg: fmt.Sprintf("the plan names a part that cannot be one: %v: hnsplan compile never writes such a plan; compile it again with hnsplan compile and republish it", err)}
		}
	}
	ps := &plan.Parts{}
	if ref := p.RouteTable; ref != nil {
		data, sig, err := r.readPart(ref.Name)
		if err != nil {
			return e.partReadFailed(p, r, ref.Name, ref.Key, err)
		}
		signer, err := e.trust.verify(data, sig)
		if err != nil {
			return partsOutcome{raw: data, err: err, msg: "route table " + ref.Name + " " + SignatureRefusal(err, r.sigWhere(ref.Name))}
		}
		v, err := e.parts.decode(ref.Name, plan.KindRouteTable, data)
		if err != nil {
			return e.partRefused(r, ref.Name, data, err)
		}
		head := v.(*plan.RouteTable)
		if len(head.Shards) > plan.RouteShards {
			return partsOutcome{raw: data, err: plan.ErrInvalid, msg: fmt.Sprintf("route table %s (%s) names %d shards, more than the %d a table has: hnsplan compile never writes such a table; compile again and republish", ref.Name, r.where(ref.Name), len(head.Shards), plan.RouteShards)}
		}
		ps.Add(head)
		fmt.Fprintf(&key, "head %s %s %s;", head.Name, head.Digest, signer)
		if head.Key == ref.Key {
			// A head at another key is reported by Assemble below, and
			// its shards are not worth reading.
			for _, s := range head.Shards {
				if err := plan.CheckPartName(s.Name); err != nil {
					return partsOutcome{raw: data, err: fmt.Errorf("%w: %w", plan.ErrInvalid, err), msg: fmt.Sprintf("route table %s names a shard that cannot be one: %v: compile again and republish", ref.Name, err)}
				}
				out, ok := e.readDecoded(p, r, ps, s, plan.KindRouteShard)
				if !ok {
					return out
				}
			}
		}
	}
	for _, c := range p.ProgramChunks {
		if _, dup := ps.Chunks[c.Name]; dup {
			continue
		}
		out, ok := e.readDecoded(p, r, ps, c, plan.KindProgramChunk)
		if !ok {
			return out
		}
		fmt.Fprintf(&key, "chunk %s;", c.Digest)
	}
	return partsOutcome{parts: ps, key: key.String()}
}

// readDecoded reads and decodes the part ref names into ps; false with
// the outcome to report if it could not.
func (e *emitter) readDecoded(p *plan.NodePlan, r partReader, ps *plan.Parts, ref plan.PartRef, kind string) (partsOutcome, bool) {
	data, _, err := r.readPart(ref.Name)
	if err != nil {
		return e.partReadFailed(p, r, ref.Name, ref.Digest, err), false
	}
	v, err := e.parts.decode(ref.Name, kind, data)
	if err != nil {
		return e.partRefused(r, ref.Name, data, err), false
	}
	ps.Add(v)
	return partsOutcome{}, true
}

// partReadFailed words a part that could not be read: not published yet
// (the plan was published before its parts, or its parts were removed),
// which is a wait; or unreadable.
func (e *emitter) partReadFailed(p *plan.NodePlan, r partReader, name, want string, err error) partsOutcome {
	if errors.Is(err, fs.ErrNotExist) {
		pe := &plan.PartError{Node: p.Node, Part: name, Want: want}
		return partsOutcome{err: pe, msg: e.waitMsg(pe, r)}
	}
	return partsOutcome{err: fmt.Errorf("%w: %w", ErrPartUnreadable, err), msg: fmt.Sprintf("cannot read part %s (%s): %v%s", name, r.where(name), err, e.keeps())}
}

// partRefused words a part that did not decode: corrupt, the wrong kind,
// another format major, too large.
func (e *emitter) partRefused(r partReader, name string, data []byte, err error) partsOutcome {
	return partsOutcome{raw: data, err: err, msg: fmt.Sprintf("part %s (%s): %s", name, r.where(name), e.decodeMsg(data, err))}
}

// waitMsg says which part the plan waits for, at what, and what is held.
func (e *emitter) waitMsg(pe *plan.PartError, r partReader) string {
	at := "at"
	if strings.HasPrefix(pe.Part, "routes-") && len(pe.Part) == len("routes-")+12 {
		at = "with key" // a head is named by key
	}
	msg := fmt.Sprintf("waiting for part %s %s %s (%s)", pe.Part, at, pe.Want, r.where(pe.Part))
	if pe.Have == "" {
		msg += ": not published yet"
	} else {
		msg += fmt.Sprintf(": %s is published, the plan and its parts disagree until both are published", pe.Have)
	}
	return msg + e.keeps()
}

// keeps says what stays in force meanwhile.
func (e *emitter) keeps() string {
	if e.good {
		return "; the last good plan and its parts stay in force"
	}
	return "; nothing is applied until the plan and its parts agree"
}

// assembled reports whether every part p names is held and attaches
// them; otherwise the outcome says what is awaited.
func (e *emitter) assemble(p *plan.NodePlan, r partReader, out partsOutcome) partsOutcome {
	if err := out.parts.Assemble(p); err != nil {
		var pe *plan.PartError
		if errors.As(err, &pe) {
			return partsOutcome{err: pe, msg: e.waitMsg(pe, r)}
		}
		var ve *plan.VersionError
		if errors.As(err, &ve) {
			return partsOutcome{err: ve, msg: fmt.Sprintf("waiting for the plan and route table of one publish: %v (%s)%s", ve, r.where(ve.Shard), e.keeps())}
		}
		return partsOutcome{err: err, msg: err.Error()}
	}
	return out
}

// lookParts runs gather and assemble inside one cache generation.
// planKey identifies the plan (its digest and signer): with the parts' key
// it is compared with what was last delivered.
func (e *emitter) lookParts(p *plan.NodePlan, planKey string, r partReader) partsOutcome {
	e.parts.begin()
	defer e.parts.end()
	out := e.gather(p, r)
	if out.err != nil {
		return out
	}
	if planKey+" "+out.key == e.lastPlan {
		// Nothing the plan uses changed: no need to assemble what the
		// caller already holds.
		return partsOutcome{key: out.key, unchanged: true}
	}
	return e.assemble(p, r, out)
}

// AssembleFromDir reads the parts p names from dir (their files
// plan.PartFileName beside the plan, as compile writes them) and assembles
// p with them, as a File source does: with trust, the route table's head
// must be signed by one of its keys (its signature file beside it). The
// error is an *Error naming the part that is missing or refused; p is then
// unchanged. For a one-shot reader (hnsplan-agent apply --once).
func AssembleFromDir(p *plan.NodePlan, dir string, trust *Trust) error {
	e := &emitter{node: p.Node, trust: trust, source: dir}
	out := e.lookParts(p, "", dirParts(dir))
	if out.err != nil {
		return &Error{Source: dir, Msg: out.msg, Err: out.err}
	}
	return nil
}
