package statedir

import (
	"fmt"
	"strings"
)

// The Windows side of Prepare, kept free of Windows APIs so the decision
// is tested on every OS: perm_windows.go reads the directory's owner and
// DACL into these and asks judgeACL.

// stateDirSDDL is the state directory's security descriptor: a protected
// DACL (nothing inherited from ProgramData, whose ACL lets Users create
// files) granting full control to SYSTEM and Administrators, inherited by
// the files the agent writes in it.
const stateDirSDDL = "D:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)"

// Well-known SIDs.
const (
	sidSystem         = "S-1-5-18"
	sidAdministrators = "S-1-5-32-544"
	sidCreatorOwner   = "S-1-3-0" // stands for whoever creates a child: the agent
	sidTrustedInstall = "S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464"
)

var sidNames = map[string]string{
	"S-1-1-0":         "Everyone",
	"S-1-5-11":        "Authenticated Users",
	"S-1-5-32-545":    "BUILTIN\\Users",
	"S-1-5-32-546":    "BUILTIN\\Guests",
	"S-1-5-4":         "INTERACTIVE",
	"S-1-5-2":         "NETWORK",
	"S-1-5-7":         "ANONYMOUS LOGON",
	"S-1-5-19":        "LOCAL SERVICE",
	"S-1-5-20":        "NETWORK SERVICE",
	"S-1-15-2-1":      "ALL APPLICATION PACKAGES",
	sidSystem:         "SYSTEM",
	sidAdministrators: "BUILTIN\\Administrators",
}

// Access rights that let a trustee change the directory or what is in it.
const (
	fileWriteData      = 0x2 // FILE_ADD_FILE on a directory
	fileAppendData     = 0x4 // FILE_ADD_SUBDIRECTORY
	fileWriteEA        = 0x10
	fileDeleteChild    = 0x40
	fileWriteAttribute = 0x100
	accessDelete       = 0x10000
	writeDAC           = 0x40000
	writeOwner         = 0x80000
	genericAll         = 0x10000000
	genericWrite       = 0x40000000
	writeRights        = fileWriteData | fileAppendData | fileWriteEA | fileDeleteChild | fileWriteAttribute |
		accessDelete | writeDAC | writeOwner | genericAll | genericWrite
)

// ACE types (winnt.h).
const (
	aceAccessAllowed = 0
	aceAccessDenied  = 1
)

// ace is one entry of a DACL. SID is set for the two basic types only.
type ace struct {
	Type uint8
	Mask uint32
	SID  string
}

func sidName(sid string) string {
	if n, ok := sidNames[sid]; ok {
		return n + " (" + sid + ")"
	}
	return sid
}

// judgeACL says whether directory dir with this owner and DACL is writable
// only by SYSTEM, Administrators and self (the agent's own account).
// Inherit-only entries count too: they give write access to the files
// the agent creates in the directory (the journal). hasDACL false is a
// NULL DACL: everyone has full control.
func judgeACL(dir, owner string, hasDACL bool, aces []ace, self string) error {
	trusted := func(sid string) bool {
		switch sid {
		case sidSystem, sidAdministrators, sidTrustedInstall, sidCreatorOwner, self:
			return true
		}
		return false
	}
	const fix = "only SYSTEM and Administrators may write it, since whoever writes it can make the agent drain the node and recreate its network: remove it and let the agent create it, or run icacls \"%s\" /inheritance:r /grant:r SYSTEM:(OI)(CI)F Administrators:(OI)(CI)F"
	if !trusted(owner) {
		return fmt.Errorf("it is owned by %s, who can change its ACL; "+fix, sidName(owner), dir)
	}
	if !hasDACL {
		return fmt.Errorf("it has no DACL, so everyone may write it; "+fix, dir)
	}
	var who []string
	for _, a := range aces {
		switch {
		case a.Type == aceAccessDenied:
		case a.Type != aceAccessAllowed:
			// Object and callback ACEs have no business on a directory
			// of files: refuse what cannot be judged.
			who = append(who, fmt.Sprintf("an access-allowed entry of type %d", a.Type))
		case a.Mask&writeRights != 0 && !trusted(a.SID):
			who = append(who, sidName(a.SID))
		}
	}
	if len(who) > 0 {
		return fmt.Errorf("%s may write it; "+fix, strings.Join(who, ", "), dir)
	}
	return nil
}
