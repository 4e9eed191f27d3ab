package acl

// Address sets as ranges, and the fewest prefixes between two of them:
// the optimiser's arithmetic. A complement costs no more than its set.

import (
	"net/netip"
	"slices"
)

// coverIn appends to out the fewest prefixes inside the prefix of bits
// bits at base that hold must and none of forbidden; free is what is in
// neither. Of the three, only the ranges that overlap the prefix are
// given.
func coverIn(base uint32, bits int, must, forbidden, free ranges, out []netip.Prefix) []netip.Prefix {
	if len(must) == 0 {
		return out
	}
	if len(forbidden) == 0 || bits == 32 {
		// (bits == 32 with both cannot happen: must and forbidden are
		// disjoint.)
		return append(out, netip.PrefixFrom(addrOf(base), bits))
	}
	last := base | uint32(uint64(1)<<(32-bits)-1)
	if len(free) == 0 {
		// Nothing to choose here: must, exactly.
		for _, r := range must {
			out = appendPrefixes(out, max(r.lo, base), min(r.hi, last))
		}
		return out
	}
	half := uint32(1) << (31 - bits)
	mid := base | half
	out = coverIn(base, bits+1, must.window(base, mid-1), forbidden.window(base, mid-1), free.window(base, mid-1), out)
	return coverIn(mid, bits+1, must.window(mid, last), forbidden.window(mid, last), free.window(mid, last), out)
}

// countIn is the length of coverIn's list for a must that ps, the
// canonical prefixes of its addresses, holds exactly.
func countIn(base uint32, bits int, must, forbidden, free ranges, ps []netip.Prefix) int {
	if len(must) == 0 {
		return 0
	}
	if len(forbidden) == 0 || bits == 32 {
		return 1
	}
	last := base | uint32(uint64(1)<<(32-bits)-1)
	if len(free) == 0 && ps == nil {
		n := 0
		for _, r := range must {
			n += countPrefixes(max(r.lo, base), min(r.hi, last))
		}
		return n
	}
	if len(free) == 0 {
		i, _ := slices.BinarySearchFunc(ps, base, func(p netip.Prefix, v uint32) int { return cmpU32(u32(p.Addr()), v) })
		j, _ := slices.BinarySearchFunc(ps[i:], last, func(p netip.Prefix, v uint32) int {
			if u32(p.Addr()) <= v {
				return -1
			}
			return 1
		})
		return j
	}
	half := uint32(1) << (31 - bits)
	mid := base | half
	return countIn(base, bits+1, must.window(base, mid-1), forbidden.window(base, mid-1), free.window(base, mid-1), ps) +
		countIn(mid, bits+1, must.window(mid, last), forbidden.window(mid, last), free.window(mid, last), ps)
}

func cmpU32(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// countPrefixes is the number of prefixes appendPrefixes makes of [lo, hi].
func countPrefixes(lo, hi uint32) int {
	n := 0
	for v := uint64(lo); v <= uint64(hi); n++ {
		bits := 32
		for bits > 0 {
			size := uint64(1) << (33 - bits)
			if v%size != 0 || v+size-1 > uint64(hi) {
				break
			}
			bits--
		}
		v += uint64(1) << (32 - bits)
	}
	return n
}

// appendPrefixes appends the fewest prefixes that make up [lo, hi].
func appendPrefixes(out []netip.Prefix, lo, hi uint32) []netip.Prefix {
	for v := uint64(lo); v <= uint64(hi); {
		bits := 32
		// The largest aligned block at v that ends at or before hi.
		for bits > 0 {
			size := uint64(1) << (33 - bits)
			if v%size != 0 || v+size-1 > uint64(hi) {
				break
			}
			bits--
		}
		out = append(out, netip.PrefixFrom(addrOf(uint32(v)), bits))
		v += uint64(1) << (32 - bits)
	}
	return out
}

// window returns the ranges of a that overlap [lo, hi].
func (a ranges) window(lo, hi uint32) ranges {
	i, _ := slices.BinarySearchFunc(a, lo, func(r addrRange, v uint32) int {
		if r.hi < v {
			return -1
		}
		return 1
	})
	j, _ := slices.BinarySearchFunc(a[i:], hi, func(r addrRange, v uint32) int {
		if r.lo <= v {
			return -1
		}
		return 1
	})
	return a[i : i+j]
}

// v4All is the IPv4 address space, the universe the optimiser works in.
var v4All = netip.MustParsePrefix("0.0.0.0/0")

// ranges is a set of IPv4 addresses as sorted, disjoint, non-adjacent
// inclusive ranges: complements stay as short as the sets.
type ranges []addrRange

type addrRange struct{ lo, hi uint32 }

var allAddrs = ranges{{0, 1<<32 - 1}}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func addrOf(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// rangesOf returns the addresses of ps: IPv4 prefixes, sorted and
// disjoint (a normalised prefixSet's).
func rangesOf(ps []netip.Prefix) ranges {
	out := make(ranges, 0, len(ps))
	for _, p := range ps {
		lo := u32(p.Masked().Addr())
		hi := lo | uint32(uint64(1)<<(32-p.Bits())-1)
		if n := len(out); n > 0 && uint64(out[n-1].hi)+1 >= uint64(lo) {
			out[n-1].hi = max(out[n-1].hi, hi)
			continue
		}
		out = append(out, addrRange{lo, hi})
	}
	return out
}

func (a ranges) add(out ranges, r addrRange) ranges {
	if n := len(out); n > 0 && uint64(out[n-1].hi)+1 >= uint64(r.lo) {
		out[n-1].hi = max(out[n-1].hi, r.hi)
		return out
	}
	return append(out, r)
}

// union returns a ∪ b.
func (a ranges) union(b ranges) ranges {
	if len(a) == 0 {
		return b
	}
	if len(b) == 0 {
		return a
	}
	out := make(ranges, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		if j == len(b) || i < len(a) && a[i].lo <= b[j].lo {
			out = a.add(out, a[i])
			i++
		} else {
			out = a.add(out, b[j])
			j++
		}
	}
	return out
}

// intersect returns a ∩ b.
func (a ranges) intersect(b ranges) ranges {
	switch {
	case a.all():
		return b
	case b.all():
		return a
	}
	out := make(ranges, 0, min(len(a), len(b))+1)
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		lo, hi := max(a[i].lo, b[j].lo), min(a[i].hi, b[j].hi)
		if lo <= hi {
			out = append(out, addrRange{lo, hi})
		}
		if a[i].hi < b[j].hi {
			i++
		} else {
			j++
		}
	}
	return out
}

// minus returns a − b.
func (a ranges) minus(b ranges) ranges {
	if len(b) == 0 || len(a) == 0 {
		return a
	}
	out := make(ranges, 0, len(a)+len(b))
	j := 0
	for _, r := range a {
		lo := uint64(r.lo)
		for j < len(b) && b[j].hi < r.lo {
			j++
		}
		k := j
		for ; k < len(b) && b[k].lo <= r.hi; k++ {
			if uint64(b[k].lo) > lo {
				out = append(out, addrRange{uint32(lo), b[k].lo - 1})
			}
			lo = uint64(b[k].hi) + 1
		}
		if lo <= uint64(r.hi) {
			out = append(out, addrRange{uint32(lo), r.hi})
		}
	}
	return out
}

// minCover returns the fewest prefixes that hold every address of must
// and none of forbidden (disjoint from must).
func minCover(must, forbidden ranges) []netip.Prefix {
	free := allAddrs.minus(must).minus(forbidden)
	return coverIn(0, 0, must, forbidden, free, make([]netip.Prefix, 0, len(must)))
}

// holesAtLeast is a lower bound of the prefixes a cover of forbidden
// within room takes: one for each range of room that holds some of it.
func holesAtLeast(room, forbidden ranges) int {
	n, j := 0, 0
	for _, r := range room {
		for j < len(forbidden) && forbidden[j].hi < r.lo {
			j++
		}
		if j < len(forbidden) && forbidden[j].lo <= r.hi {
			n++
		}
	}
	return n
}

// countCover is len(minCover(must, forbidden)), without making the list.
func countCover(must, forbidden ranges) int {
	return countIn(0, 0, must, forbidden, allAddrs.minus(must).minus(forbidden), nil)
}

// all reports whether a is every address.
func (a ranges) all() bool { return len(a) == 1 && a[0] == allAddrs[0] }

// size is the number of addresses in a.
func (a ranges) size() uint64 {
	var n uint64
	for _, r := range a {
		n += uint64(r.hi-r.lo) + 1
	}
	return n
}

// separated is a lower bound of holesAtLeast: the ranges of forbidden,
// less those with no address of live between them and the next (room
// never holds live addresses).
func separated(forbidden, live ranges) int {
	n, j := 0, 0
	for i := range forbidden {
		if i == len(forbidden)-1 {
			n++
			break
		}
		for j < len(live) && live[j].hi < forbidden[i].hi {
			j++
		}
		if j < len(live) && live[j].lo < forbidden[i+1].lo {
			n++
		}
	}
	return n
}
