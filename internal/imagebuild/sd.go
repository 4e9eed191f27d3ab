package imagebuild

import "encoding/binary"

// Windows security descriptors, self-relative, for the layers' files
// (PAX record MSWINDOWS.rawsd, which hcsshim's backuptar writes as the
// file's security) and the hives' root keys.

type sid []uint32 // S-1-<authority>-<sub>...: authority first

var (
	sidAdministrators = sid{5, 32, 544} // BA
	sidSystem         = sid{5, 18}      // SY
	sidUsers          = sid{5, 32, 545} // BU
)

func (s sid) bytes() []byte {
	b := make([]byte, 8+4*(len(s)-1))
	b[0], b[1] = 1, byte(len(s)-1)
	b[7] = byte(s[0]) // identifier authority, 48-bit big-endian
	for i, sub := range s[1:] {
		binary.LittleEndian.PutUint32(b[8+4*i:], sub)
	}
	return b
}

type ace struct {
	flags byte
	mask  uint32
	who   sid
}

// Access masks and ACE flags used below.
const (
	fileAll         = 0x001f01ff // FILE_ALL_ACCESS
	fileReadExecute = 0x001200a9 // read, execute, synchronize
	keyAll          = 0x000f003f // KEY_ALL_ACCESS
	keyRead         = 0x00020019 // KEY_READ
	inheritOI       = 0x01       // OBJECT_INHERIT_ACE
	inheritCI       = 0x02       // CONTAINER_INHERIT_ACE
)

// securityDescriptor is a self-relative descriptor: owner, group and a
// DACL of access-allowed ACEs, no SACL.
func securityDescriptor(owner, group sid, aces []ace) []byte {
	le := binary.LittleEndian
	var acl []byte
	for _, a := range aces {
		s := a.who.bytes()
		e := make([]byte, 8, 8+len(s))
		e[0], e[1] = 0, a.flags // ACCESS_ALLOWED_ACE_TYPE
		le.PutUint16(e[2:], uint16(8+len(s)))
		le.PutUint32(e[4:], a.mask)
		acl = append(acl, append(e, s...)...)
	}
	hdr := make([]byte, 8)
	hdr[0] = 2 // ACL_REVISION
	le.PutUint16(hdr[2:], uint16(8+len(acl)))
	le.PutUint16(hdr[4:], uint16(len(aces)))
	acl = append(hdr, acl...)

	o, g := owner.bytes(), group.bytes()
	sd := make([]byte, 20)
	sd[0] = 1                           // SECURITY_DESCRIPTOR_REVISION
	le.PutUint16(sd[2:], 0x8000|0x0004) // SE_SELF_RELATIVE | SE_DACL_PRESENT
	le.PutUint32(sd[16:], 20)           // DACL
	le.PutUint32(sd[4:], uint32(20+len(acl)))
	le.PutUint32(sd[8:], uint32(20+len(acl)+len(o)))
	sd = append(sd, acl...)
	sd = append(sd, o...)
	return append(sd, g...)
}

// fileSD: O:BA G:SY D:(A;;FA;;;BA)(A;;FA;;;SY)(A;;0x1200a9;;;BU), the
// descriptor BuildKit gives a file it copies into a Windows layer.
func fileSD() []byte {
	return securityDescriptor(sidAdministrators, sidSystem, []ace{
		{0, fileAll, sidAdministrators}, {0, fileAll, sidSystem}, {0, fileReadExecute, sidUsers},
	})
}

// dirSD is fileSD's, inherited by what the directory holds.
func dirSD() []byte {
	f := inheritOI | inheritCI
	return securityDescriptor(sidAdministrators, sidSystem, []ace{
		{byte(f), fileAll, sidAdministrators}, {byte(f), fileAll, sidSystem}, {byte(f), fileReadExecute, sidUsers},
	})
}

// keySecurityDescriptor is a hive root key's: Administrators and SYSTEM
// full control, Users read, each inherited by subkeys.
func keySecurityDescriptor() []byte {
	return securityDescriptor(sidAdministrators, sidSystem, []ace{
		{inheritCI, keyAll, sidAdministrators}, {inheritCI, keyAll, sidSystem}, {inheritCI, keyRead, sidUsers},
	})
}
