//go:build windows

package statedir

import (
	"errors"
	"fmt"
	"io/fs"
	"unsafe"

	"golang.org/x/sys/windows"
)

// createPrivate creates dir with stateDirSDDL as its security descriptor,
// in the one call: there is no moment when it holds ProgramData's
// inherited ACL.
func createPrivate(dir string) error {
	sd, err := windows.SecurityDescriptorFromString(stateDirSDDL)
	if err != nil {
		return fmt.Errorf("security descriptor %s: %w", stateDirSDDL, err)
	}
	name, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return err
	}
	sa := &windows.SecurityAttributes{Length: uint32(unsafe.Sizeof(windows.SecurityAttributes{})), SecurityDescriptor: sd}
	err = windows.CreateDirectory(name, sa)
	if errors.Is(err, windows.ERROR_ALREADY_EXISTS) || errors.Is(err, windows.ERROR_FILE_EXISTS) {
		return fs.ErrExist
	}
	return err
}

// checkPrivate reads dir's owner and DACL and refuses a directory anyone
// but SYSTEM, Administrators and the agent's own account may write.
func checkPrivate(dir string, _ fs.FileInfo) error {
	sd, err := windows.GetNamedSecurityInfo(dir, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return fmt.Errorf("read its security descriptor: %w", err)
	}
	owner, _, err := sd.Owner()
	if err != nil {
		return fmt.Errorf("read its owner: %w", err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return fmt.Errorf("read its DACL: %w", err)
	}
	var aces []ace
	if dacl != nil {
		for i := range uint32(dacl.AceCount) {
			var a *windows.ACCESS_ALLOWED_ACE
			if err := windows.GetAce(dacl, i, &a); err != nil {
				return fmt.Errorf("read entry %d of its DACL: %w", i, err)
			}
			e := ace{Type: a.Header.AceType, Mask: uint32(a.Mask)}
			if e.Type == aceAccessAllowed || e.Type == aceAccessDenied {
				// Both lay out the SID at SidStart.
				e.SID = (*windows.SID)(unsafe.Pointer(&a.SidStart)).String()
			}
			aces = append(aces, e)
		}
	}
	self := ""
	if u, err := windows.GetCurrentProcessToken().GetTokenUser(); err == nil {
		self = u.User.Sid.String()
	}
	ownerSID := ""
	if owner != nil {
		ownerSID = owner.String()
	}
	return judgeACL(dir, ownerSID, dacl != nil, aces, self)
}
