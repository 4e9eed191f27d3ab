package imagebuild

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unicode/utf16"
)

// The HostProcess base layer holds Files\Windows\System32\config\{DEFAULT,
// SAM, SECURITY, SOFTWARE, SYSTEM}: containerd's Windows snapshotter
// imports the first layer of an image as a base layer
// (wclayer.ProcessBaseLayer), which opens those hives, and from Windows
// Server 2025 they must be valid registry hives, not empty files
// (microsoft/windows-host-process-containers-base-image,
// New-HostProcessBaseImage.ps1). Hive writes one: a key with no values or
// subkeys, in the regf format as documented in "Windows registry file
// format specification" (Maxim Suhanov, github.com/msuhanoff/regf):
// a 4 KiB base block, then one 4 KiB hive bin with the root key (nk), its
// security descriptor (sk) and a free cell for the rest.

const (
	regfBlock   = 4096
	filetimeOff = 11644473600 // seconds from 1601-01-01 to 1970-01-01
)

func filetime(t time.Time) uint64 {
	return uint64(t.Unix()+filetimeOff)*10_000_000 + uint64(t.Nanosecond()/100)
}

// Hive returns a registry hive file whose root key is named root
// (e.g. "TempEmpty_SYSTEM"), its timestamps at t.
func Hive(root, fileName string, t time.Time) []byte {
	le := binary.LittleEndian
	out := make([]byte, 2*regfBlock)
	ft := filetime(t)

	// Base block.
	b := out[:regfBlock]
	copy(b, "regf")
	le.PutUint32(b[4:], 1)   // primary sequence number
	le.PutUint32(b[8:], 1)   // secondary: equal, the hive is consistent
	le.PutUint64(b[12:], ft) // last written
	le.PutUint32(b[20:], 1)  // major version
	le.PutUint32(b[24:], 3)  // minor version 3: every Windows since XP loads it
	le.PutUint32(b[28:], 0)  // primary file
	le.PutUint32(b[32:], 1)  // direct memory load
	le.PutUint32(b[36:], 0x20)
	le.PutUint32(b[40:], regfBlock) // hive bins data size
	le.PutUint32(b[44:], 1)         // clustering factor
	name := utf16.Encode([]rune(fileName))
	if len(name) > 31 {
		name = name[len(name)-31:] // the field holds the name's last characters
	}
	for i, u := range name {
		le.PutUint16(b[48+2*i:], u)
	}
	le.PutUint32(b[508:], regfChecksum(b))

	// Hive bin.
	h := out[regfBlock:]
	copy(h, "hbin")
	le.PutUint32(h[4:], 0)
	le.PutUint32(h[8:], regfBlock)
	le.PutUint64(h[20:], ft)

	// Root key node at hive offset 0x20.
	nkOff := uint32(0x20)
	nkSize := align8(4 + 76 + len(root))
	skOff := nkOff + uint32(nkSize)
	sd := keySecurityDescriptor()
	skSize := align8(4 + 20 + len(sd))

	nk := h[nkOff:]
	le.PutUint32(nk, uint32(-int32(nkSize)))
	c := nk[4:]
	copy(c, "nk")
	le.PutUint16(c[2:], 0x0004|0x0008|0x0020) // KEY_HIVE_ENTRY | KEY_NO_DELETE | KEY_COMP_NAME
	le.PutUint64(c[4:], ft)
	le.PutUint32(c[16:], 0xffffffff) // parent: none
	le.PutUint32(c[28:], 0xffffffff) // subkeys list
	le.PutUint32(c[32:], 0xffffffff) // volatile subkeys list
	le.PutUint32(c[40:], 0xffffffff) // values list
	le.PutUint32(c[44:], skOff)
	le.PutUint32(c[48:], 0xffffffff) // class name
	le.PutUint16(c[72:], uint16(len(root)))
	copy(c[76:], root)

	sk := h[skOff:]
	le.PutUint32(sk, uint32(-int32(skSize)))
	c = sk[4:]
	copy(c, "sk")
	le.PutUint32(c[4:], skOff) // flink: the only descriptor, a list of one
	le.PutUint32(c[8:], skOff) // blink
	le.PutUint32(c[12:], 1)    // reference count: the root key
	le.PutUint32(c[16:], uint32(len(sd)))
	copy(c[20:], sd)

	freeOff := skOff + uint32(skSize)
	le.PutUint32(h[freeOff:], regfBlock-freeOff) // unallocated: positive size
	return out
}

func align8(n int) int { return (n + 7) &^ 7 }

// regfChecksum is the base block's: the XOR of its first 127 dwords, 0
// and ^0 being reserved.
func regfChecksum(b []byte) uint32 {
	var x uint32
	for i := 0; i < 508; i += 4 {
		x ^= binary.LittleEndian.Uint32(b[i:])
	}
	switch x {
	case 0:
		return 1
	case 0xffffffff:
		return 0xfffffffe
	}
	return x
}

// HiveInfo is what CheckHive read of a hive.
type HiveInfo struct {
	Root  string
	Cells int
}

// CheckHive reads a hive as a loader would: the base block's signature,
// checksum, versions and sizes, then every cell of every bin, and the root
// key and its security cell. It reads the hives Hive writes (a root key
// with no subkeys or values), for the tests; a real hive with keys is
// refused as not modelled. (libregf's regfinfo and hivex's hivexml read
// them too; checked by hand, they are not in CI.)
func CheckHive(data []byte) (HiveInfo, error) {
	le := binary.LittleEndian
	var info HiveInfo
	if len(data) < regfBlock || string(data[:4]) != "regf" {
		return info, errors.New("no regf base block")
	}
	b := data[:regfBlock]
	if got, want := le.Uint32(b[508:]), regfChecksum(b); got != want {
		return info, fmt.Errorf("base block checksum %#x, want %#x", got, want)
	}
	if le.Uint32(b[4:]) != le.Uint32(b[8:]) {
		return info, errors.New("sequence numbers differ: the hive needs recovery")
	}
	if le.Uint32(b[20:]) != 1 || le.Uint32(b[24:]) < 3 || le.Uint32(b[24:]) > 6 {
		return info, fmt.Errorf("version %d.%d", le.Uint32(b[20:]), le.Uint32(b[24:]))
	}
	size := int(le.Uint32(b[40:]))
	if size == 0 || size%regfBlock != 0 || regfBlock+size > len(data) {
		return info, fmt.Errorf("hive bins data size %d in a %d-byte file", size, len(data))
	}
	bins := data[regfBlock : regfBlock+size]
	cells := map[uint32]int{} // allocated cell offset -> size
	for off := 0; off < size; {
		if string(bins[off:off+4]) != "hbin" || int(le.Uint32(bins[off+4:])) != off {
			return info, fmt.Errorf("no hive bin at %#x", off)
		}
		bsize := int(le.Uint32(bins[off+8:]))
		if bsize < regfBlock || bsize%regfBlock != 0 || off+bsize > size {
			return info, fmt.Errorf("hive bin at %#x: size %d", off, bsize)
		}
		for c := off + 32; c < off+bsize; {
			if c+4 > off+bsize {
				return info, fmt.Errorf("cell at %#x past its bin", c)
			}
			n := int32(le.Uint32(bins[c:]))
			sz := int(n)
			if n < 0 {
				sz = int(-n)
				cells[uint32(c)] = sz
			}
			if sz < 8 || sz%8 != 0 || c+sz > off+bsize {
				return info, fmt.Errorf("cell at %#x: size %d", c, sz)
			}
			info.Cells++
			c += sz
		}
		off += bsize
	}
	cell := func(off uint32, sig string) ([]byte, error) {
		sz, ok := cells[off]
		if !ok {
			return nil, fmt.Errorf("no allocated cell at %#x for %s", off, sig)
		}
		c := bins[off+4 : int(off)+sz]
		if string(c[:2]) != sig {
			return nil, fmt.Errorf("cell at %#x is %q, want %s", off, c[:2], sig)
		}
		return c, nil
	}
	nk, err := cell(le.Uint32(b[36:]), "nk")
	if err != nil {
		return info, err
	}
	if le.Uint16(nk[2:])&0x0004 == 0 {
		return info, errors.New("root key is not flagged as the hive's entry")
	}
	nlen := int(le.Uint16(nk[72:]))
	if 76+nlen > len(nk) {
		return info, errors.New("root key name past its cell")
	}
	info.Root = string(nk[76 : 76+nlen])
	if le.Uint32(nk[20:]) != 0 || le.Uint32(nk[36:]) != 0 {
		return info, errors.New("root key has subkeys or values: not modelled")
	}
	skOff := le.Uint32(nk[44:])
	sk, err := cell(skOff, "sk")
	if err != nil {
		return info, err
	}
	if le.Uint32(sk[4:]) != skOff || le.Uint32(sk[8:]) != skOff || le.Uint32(sk[12:]) != 1 {
		return info, errors.New("security cell: not a list of one, referenced once")
	}
	if n := int(le.Uint32(sk[16:])); 20+n > len(sk) || n < 20 || sk[20] != 1 {
		return info, errors.New("security cell: bad descriptor")
	}
	return info, nil
}
