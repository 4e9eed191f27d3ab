package hnswin

import (
	"fmt"
	"strings"

	"github.com/hnsplan/hnsplan/applier/hns"
)

// HRESULTs hnswin uses beyond those hns names (winerror.h, HCNHResult.md).
const (
	codeRequestUnsupported      uint32 = 0x803B0015 // HCN_E_REQUEST_UNSUPPORTED
	codeEndpointAlreadyAttached uint32 = 0x803B0014 // HCN_E_ENDPOINT_ALREADY_ATTACHED
	codeManagerStopped          uint32 = 0x803B0020 // HCN_E_MANAGER_STOPPED
	codeEndpointNamespaceExists uint32 = 0x803B002B // HCN_E_ENDPOINT_NAMESPACE_ALREADY_EXISTS
	codeRPCDisconnected         uint32 = 0x80010108 // RPC_E_DISCONNECTED
	codePending                 uint32 = 0x8000000A // E_PENDING
	win32NotFound               uint32 = 1168       // ERROR_NOT_FOUND: hcn's "element not found"
	facilityWin32HRESULT        uint32 = 0x80070000 // HRESULT_FROM_WIN32's high bits
)

// hresult turns the code of a failed hcn call into an HRESULT. hcn's
// syscall stubs hand Win32 errors over as their bare Win32 code (they
// strip HRESULT_FROM_WIN32's facility); those get it back, so that every
// Code in an *hns.Error is an HRESULT.
func hresult(code uint32) uint32 {
	if code == 0 || code&0x80000000 != 0 {
		return code
	}
	return facilityWin32HRESULT | code&0xFFFF
}

// transientCodes are the HRESULTs after which retrying the same call may
// succeed: the HNS service is stopping, restarting or busy, or the RPC to
// it broke or timed out. Everything else (invalid policies, conflicts,
// missing objects) fails again until something else changes.
var transientCodes = map[uint32]string{
	codeManagerStopped:  "HCN_E_MANAGER_STOPPED",
	codeRPCDisconnected: "RPC_E_DISCONNECTED",
	codePending:         "E_PENDING",
	hresult(170):        "ERROR_BUSY",
	hresult(258):        "WAIT_TIMEOUT",
	hresult(1062):       "ERROR_SERVICE_NOT_ACTIVE",
	hresult(1237):       "ERROR_RETRY",
	hresult(1460):       "ERROR_TIMEOUT",
	hresult(1722):       "RPC_S_SERVER_UNAVAILABLE",
	hresult(1723):       "RPC_S_SERVER_TOO_BUSY",
	hresult(1726):       "RPC_S_CALL_FAILED",
	hresult(1727):       "RPC_S_CALL_FAILED_DNE",
}

// isTransient reports whether an HRESULT is in transientCodes.
func isTransient(code uint32) bool {
	_, ok := transientCodes[code]
	return ok
}

// fromHcnError builds the *hns.Error of an hcn.HcnError whose message is
// msg ("hcnCreateNetwork failed in Win32: <text> (0x803b000d) <result
// JSON>") and whose code is errno.
func fromHcnError(call string, notFound uint32, msg string, errno uint32) *hns.Error {
	if title, rest, ok := strings.Cut(msg, " failed in Win32: "); ok && title != "" {
		call, msg = title, rest
	}
	msg = strings.TrimSpace(strings.Replace(msg, fmt.Sprintf(" (0x%x)", errno), "", 1))
	code := hresult(errno)
	if errno == win32NotFound && notFound != 0 {
		code = notFound
	}
	return &hns.Error{Call: call, Code: code, Msg: msg, Transient: isTransient(code)}
}
