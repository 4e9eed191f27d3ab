package acl

import (
	"net/netip"
	"slices"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// prefixSet is a set of addresses: any, or the union of disjoint prefixes,
// sorted by address.
type prefixSet struct {
	any bool
	ps  []netip.Prefix
}

var anyAddr = prefixSet{any: true}

func (s prefixSet) empty() bool { return !s.any && len(s.ps) == 0 }

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// normalize sorts ps, drops prefixes another contains, and merges sibling
// pairs into their parent, so that equal sets have equal lists.
func normalize(ps []netip.Prefix) []netip.Prefix {
	out := slices.Clone(ps)
	for i := range out {
		out[i] = out[i].Masked()
	}
	slices.SortFunc(out, comparePrefix)
	for {
		merged := out[:0]
		changed := false
		for _, p := range out {
			if n := len(merged); n > 0 {
				last := merged[n-1]
				if last.Addr().Is4() == p.Addr().Is4() && last.Bits() <= p.Bits() && last.Contains(p.Addr()) {
					changed = changed || last != p
					continue
				}
				if sibling(last, p) {
					parent, _ := last.Addr().Prefix(last.Bits() - 1)
					merged[n-1] = parent
					changed = true
					continue
				}
			}
			merged = append(merged, p)
		}
		out = merged
		if !changed {
			return out
		}
	}
}

// sibling reports whether a and b are the two halves of one prefix.
func sibling(a, b netip.Prefix) bool {
	if a.Bits() != b.Bits() || a.Bits() == 0 || a.Addr().Is4() != b.Addr().Is4() {
		return false
	}
	pa, _ := a.Addr().Prefix(a.Bits() - 1)
	pb, _ := b.Addr().Prefix(b.Bits() - 1)
	return pa == pb && a != b
}

func setOf(ps []netip.Prefix) prefixSet { return prefixSet{ps: normalize(ps)} }

// intersect returns a ∩ b.
func (a prefixSet) intersect(b prefixSet) prefixSet {
	switch {
	case a.any:
		return b
	case b.any:
		return a
	}
	var out []netip.Prefix
	i, j := 0, 0
	for i < len(a.ps) && j < len(b.ps) {
		x, y := a.ps[i], b.ps[j]
		switch {
		case x.Bits() <= y.Bits() && x.Contains(y.Addr()):
			out = append(out, y)
			j++
		case y.Bits() <= x.Bits() && y.Contains(x.Addr()):
			out = append(out, x)
			i++
		case x.Addr().Less(y.Addr()):
			i++
		default:
			j++
		}
	}
	return prefixSet{ps: normalize(out)}
}

// minus returns a − b, splitting prefixes as needed (exact).
func (a prefixSet) minus(b prefixSet) prefixSet {
	if b.any {
		return prefixSet{}
	}
	if len(b.ps) == 0 {
		return a
	}
	base := a.ps
	if a.any {
		base = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	}
	var out []netip.Prefix
	for _, p := range base {
		out = subtract(p, b.ps, out)
	}
	return prefixSet{ps: normalize(out)}
}

// subtract appends p − holes to out. holes is sorted and disjoint.
func subtract(p netip.Prefix, holes []netip.Prefix, out []netip.Prefix) []netip.Prefix {
	// The holes that overlap p, found by binary search on the sorted list.
	lo, _ := slices.BinarySearchFunc(holes, p, func(h, p netip.Prefix) int {
		if h.Overlaps(p) {
			return 0
		}
		return comparePrefix(h, p)
	})
	var in []netip.Prefix
	for k := lo; k >= 0 && k < len(holes); k-- { // scan back: an earlier, larger hole may cover p
		if !holes[k].Overlaps(p) {
			break
		}
		in = append(in, holes[k])
	}
	for k := lo + 1; k < len(holes) && holes[k].Overlaps(p); k++ {
		in = append(in, holes[k])
	}
	if len(in) == 0 {
		return append(out, p)
	}
	for _, h := range in {
		if h.Bits() <= p.Bits() {
			return out // p lies inside a hole
		}
	}
	if p.Bits() == p.Addr().BitLen() {
		return out
	}
	slices.SortFunc(in, comparePrefix)
	lowHalf, _ := p.Addr().Prefix(p.Bits() + 1)
	highHalf := netip.PrefixFrom(highAddr(p), p.Bits()+1)
	out = subtract(lowHalf, in, out)
	return subtract(highHalf, in, out)
}

// highAddr returns the first address of the upper half of p.
func highAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	bit := p.Bits()
	b[bit/8] |= 0x80 >> (bit % 8)
	a, _ := netip.AddrFromSlice(b)
	return a
}

// portSet is a set of ports: any, or disjoint sorted ranges.
type portSet struct {
	any    bool
	ranges []plan.PortRange
}

var anyPort = portSet{any: true}

func portsOf(rs []plan.PortRange) portSet {
	out := slices.Clone(rs)
	slices.SortFunc(out, func(a, b plan.PortRange) int { return int(a.First) - int(b.First) })
	merged := out[:0]
	for _, r := range out {
		if n := len(merged); n > 0 && int(r.First) <= int(merged[n-1].Last)+1 {
			merged[n-1].Last = max(merged[n-1].Last, r.Last)
			continue
		}
		merged = append(merged, r)
	}
	return portSet{ranges: merged}
}

func (a portSet) empty() bool { return !a.any && len(a.ranges) == 0 }

func (a portSet) intersect(b portSet) portSet {
	switch {
	case a.any:
		return b
	case b.any:
		return a
	}
	var out []plan.PortRange
	for _, x := range a.ranges {
		for _, y := range b.ranges {
			lo, hi := max(x.First, y.First), min(x.Last, y.Last)
			if lo <= hi {
				out = append(out, plan.PortRange{First: lo, Last: hi})
			}
		}
	}
	return portsOf(out)
}

// complementPorts returns every port not in rs.
func complementPorts(rs []plan.PortRange) []plan.PortRange {
	s := portsOf(rs)
	var out []plan.PortRange
	next := 0
	for _, r := range s.ranges {
		if int(r.First) > next {
			out = append(out, plan.PortRange{First: uint16(next), Last: r.First - 1})
		}
		next = int(r.Last) + 1
	}
	if next <= 65535 {
		out = append(out, plan.PortRange{First: uint16(next), Last: 65535})
	}
	return out
}

// protoSet is a set of IP protocol numbers: any, or a sorted list.
type protoSet struct {
	any  bool
	nums []int
}

var anyProto = protoSet{any: true}

func (a protoSet) empty() bool { return !a.any && len(a.nums) == 0 }

func (a protoSet) intersect(b protoSet) protoSet {
	switch {
	case a.any:
		return b
	case b.any:
		return a
	}
	var out []int
	for _, n := range a.nums {
		if slices.Contains(b.nums, n) {
			out = append(out, n)
		}
	}
	return protoSet{nums: out}
}

func (a protoSet) contains(n int) bool { return a.any || slices.Contains(a.nums, n) }

// Subtract returns the addresses of base outside holes, as a sorted list of
// disjoint prefixes: the positive form of nets with notNets or an ipBlock
// with except.
func Subtract(base, holes []netip.Prefix) []netip.Prefix {
	return setOf(base).minus(setOf(holes)).ps
}
