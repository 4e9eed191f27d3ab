package hnswin

import (
	"fmt"
	"strconv"
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

// v1Error turns the error of an HNS v1 call (hcsshim's hnsCall, under
// GetHNSEndpointByID and HNSEndpointRequest) into an *hns.Error where its
// text says what happened, since hcsshim's v1 errors carry no HRESULT a
// caller can reach:
//
//   - the call itself failed: "… failed in Win32: <text> (0x<code>)"
//     gives the code, made an HRESULT and classified as fromHcnError does
//     (ERROR_NOT_FOUND becoming notFound when it is not 0);
//   - HNS refused it: "hns failed with error : <text>" has no code; HNS's
//     "Element not found." becomes notFound, anything else is returned
//     wrapped with call, as it is.
//
// hcsshim's EndpointNotFoundError (a lookup by name that found nothing)
// is for the Windows caller to classify: its type is Windows only.
func v1Error(call string, notFound uint32, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, " failed in Win32: "); ok {
		if i := strings.LastIndex(rest, " (0x"); i >= 0 {
			if end := strings.IndexByte(rest[i:], ')'); end > 0 {
				if errno, perr := strconv.ParseUint(rest[i+4:i+end], 16, 32); perr == nil {
					code := hresult(uint32(errno))
					if uint32(errno) == win32NotFound && notFound != 0 {
						code = notFound
					}
					return &hns.Error{Call: call, Code: code, Msg: strings.TrimSpace(rest[:i]), Transient: isTransient(code)}
				}
			}
		}
	}
	if _, text, ok := strings.Cut(msg, "hns failed with error : "); ok && notFound != 0 && strings.HasPrefix(text, "Element not found") {
		return &hns.Error{Call: call, Code: notFound, Msg: strings.TrimSpace(text)}
	}
	return fmt.Errorf("%s: %w", call, err)
}
