package plan

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
)

// EncodedPart is a shared part in its file form.
type EncodedPart struct {
	Name, Kind, Digest string
	Data               []byte
}

// chunkBudget is how many bytes of policies a program chunk takes before
// the next starts: under MaxPartSize, for the chunk's own fields.
const chunkBudget = MaxPartSize - 8<<10

// EncodeParts encodes the route tables and policy programs plans share,
// each once (plans of one compilation share them by pointer), and sets
// each plan's references to them (RouteTable, ProgramChunks) and its
// Digest, which a table records (RouteShard.Plans). Parts come back in
// name order. A part over MaxPartSize is an error naming what to split.
func EncodeParts(plans []*NodePlan) ([]EncodedPart, error) {
	parts, _, err := EncodeAll(plans)
	return parts, err
}

// EncodeAll is EncodeParts that also returns each plan's encoding (Encode),
// in plans' order: a table records its plans' digests, so the plans are
// encoded before the tables, on all CPUs.
func EncodeAll(plans []*NodePlan) ([]EncodedPart, [][]byte, error) {
	var out []EncodedPart
	var tables []*RouteTable
	seen := map[*RouteTable]bool{}
	programs := map[*Program][]PartRef{}
	for _, p := range plans {
		p.RouteTable, p.ProgramChunks = nil, nil
		if t := p.Routes; t != nil {
			if !seen[t] {
				seen[t] = true
				tables = append(tables, t)
			}
			p.RouteTable = t.Ref()
		}
		if prog := p.Program; prog != nil {
			refs, ok := programs[prog]
			if !ok {
				parts, err := encodeProgram(p.Cluster, prog)
				if err != nil {
					return nil, nil, err
				}
				for _, c := range parts {
					refs = append(refs, PartRef{Name: c.Name, Digest: c.Digest})
				}
				programs[prog] = refs
				out = append(out, parts...)
			}
			p.ProgramChunks = refs
		}
	}
	data, err := encodeEach(plans)
	if err != nil {
		return nil, nil, err
	}
	// By name: tables of equal content are one part, which records the
	// plans of both.
	recorded := map[string][]PartRef{}
	for _, p := range plans {
		if t := p.Routes; t != nil {
			recorded[t.Name] = append(recorded[t.Name], PartRef{Name: p.Node, Digest: p.Digest})
		}
	}
	for _, t := range tables {
		parts, err := encodeTable(t, recorded[t.Name])
		if err != nil {
			return nil, nil, err
		}
		out = append(out, parts...)
	}
	slices.SortFunc(out, func(a, b EncodedPart) int { return cmp.Compare(a.Name, b.Name) })
	// Equal content has equal names: two programs of the same policies
	// are one part. Two tables of one key but other entries are not.
	for i := 1; i < len(out); i++ {
		if out[i].Name == out[i-1].Name && out[i].Digest != out[i-1].Digest {
			return nil, nil, fmt.Errorf("plan: two different parts named %s: the plans come from different compiles", out[i].Name)
		}
	}
	return slices.CompactFunc(out, func(a, b EncodedPart) bool { return a.Name == b.Name }), data, nil
}

// encodeEach encodes plans (Encode, which sets their digests) on all
// CPUs, keeping their order.
func encodeEach(plans []*NodePlan) ([][]byte, error) {
	data := make([][]byte, len(plans))
	errs := make([]error, len(plans))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(runtime.GOMAXPROCS(0), max(len(plans), 1)) {
		wg.Go(func() {
			for i := range next {
				data[i], errs[i] = Encode(plans[i])
			}
		})
	}
	for i := range plans {
		next <- i
	}
	close(next)
	wg.Wait()
	return data, errors.Join(errs...)
}

// encodeTable writes t's shards and its head, filling t.Shards; each
// shard records the digests of the plans of its nodes (plans).
func encodeTable(t *RouteTable, plans []PartRef) ([]EncodedPart, error) {
	var buckets [RouteShards][]RouteNode
	for _, n := range t.Nodes {
		i := ShardOf(n.Node)
		buckets[i] = append(buckets[i], n)
	}
	var recorded [RouteShards][]PartRef
	for _, p := range plans {
		i := ShardOf(p.Name)
		recorded[i] = append(recorded[i], p)
	}
	var out []EncodedPart
	t.Shards = []PartRef{}
	for i, nodes := range buckets {
		if len(nodes) == 0 && len(recorded[i]) == 0 {
			continue
		}
		if nodes == nil {
			nodes = []RouteNode{}
		}
		slices.SortFunc(recorded[i], func(a, b PartRef) int { return cmp.Compare(a.Name, b.Name) })
		s := &RouteShard{FormatVersion: FormatVersion, Kind: KindRouteShard, Name: ShardName(t.Name, i), Cluster: t.Cluster, Nodes: nodes, Plans: recorded[i]}
		b, err := encodeDigested(s, &s.Digest)
		if err != nil {
			return nil, fmt.Errorf("plan: encode route shard %s: %w", s.Name, err)
		}
		if len(b) > MaxPartSize {
			return nil, fmt.Errorf("plan: route shard %s is %d bytes, more than a part's %d: %d nodes hash to it", s.Name, len(b), MaxPartSize, len(nodes))
		}
		t.Shards = append(t.Shards, PartRef{Name: s.Name, Digest: s.Digest})
		out = append(out, EncodedPart{Name: s.Name, Kind: KindRouteShard, Digest: s.Digest, Data: b})
	}
	b, err := encodeDigested(t, &t.Digest)
	if err != nil {
		return nil, fmt.Errorf("plan: encode route table %s: %w", t.Name, err)
	}
	return append(out, EncodedPart{Name: t.Name, Kind: KindRouteTable, Digest: t.Digest, Data: b}), nil
}

// encodeProgram cuts prog into chunks of whole policies, in order, each
// named after its content.
func encodeProgram(cluster string, prog *Program) ([]EncodedPart, error) {
	var chunks []*ProgramChunk
	var cur *ProgramChunk
	size := 0
	for _, t := range prog.Tiers {
		if len(t.Policies) == 0 {
			// An empty tier still says something (its order); keep it.
			if cur == nil {
				cur = &ProgramChunk{}
				chunks = append(chunks, cur)
			}
			cur.Tiers = append(cur.Tiers, Tier{Name: t.Name, DefaultAction: t.DefaultAction, Policies: []NetworkPolicy{}})
			continue
		}
		for _, pol := range t.Policies {
			n, err := indentedSize(pol, 4)
			if err != nil {
				return nil, fmt.Errorf("plan: encode policy %s: %w", pol.ID, err)
			}
			if n > chunkBudget {
				return nil, fmt.Errorf("plan: policy %s (%s) compiles to %d bytes, more than a program chunk's %d: split it into smaller policies", pol.ID, pol.Source, n, chunkBudget)
			}
			if cur == nil || size+n > chunkBudget {
				cur, size = &ProgramChunk{}, 0
				chunks = append(chunks, cur)
			}
			if k := len(cur.Tiers); k == 0 || cur.Tiers[k-1].Name != t.Name {
				cur.Tiers = append(cur.Tiers, Tier{Name: t.Name, DefaultAction: t.DefaultAction})
			}
			last := &cur.Tiers[len(cur.Tiers)-1]
			last.Policies = append(last.Policies, pol)
			size += n
		}
	}
	out := make([]EncodedPart, 0, len(chunks))
	for _, c := range chunks {
		content, err := json.Marshal(c.Tiers)
		if err != nil {
			return nil, fmt.Errorf("plan: encode the policy program: %w", err)
		}
		sum := sha256.Sum256(content)
		c.FormatVersion, c.Kind, c.Cluster = FormatVersion, KindProgramChunk, cluster
		c.Name = "program-" + hex.EncodeToString(sum[:6])
		b, err := encodeDigested(c, &c.Digest)
		if err != nil {
			return nil, fmt.Errorf("plan: encode program chunk %s: %w", c.Name, err)
		}
		if len(b) > MaxPartSize {
			return nil, fmt.Errorf("plan: program chunk %s is %d bytes, more than a part's %d", c.Name, len(b), MaxPartSize)
		}
		out = append(out, EncodedPart{Name: c.Name, Kind: KindProgramChunk, Digest: c.Digest, Data: b})
	}
	return out, nil
}

// indentedSize is the size of v indented as a plan is, at depth levels in.
func indentedSize(v any, depth int) (int, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return 0, err
	}
	b := indent(nil, bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return len(b) + (bytes.Count(b, []byte("\n"))+1)*2*depth, nil
}
