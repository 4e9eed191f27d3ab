//go:build windows

package hnswin

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/Microsoft/hcsshim/hcn"

	"github.com/hnsplan/hnsplan/applier/hns"
)

// hnsError turns the error of an hcn call into an *hns.Error carrying the
// HRESULT, so that hns.IsNotFound, hns.Code and hns.IsTransient work on
// it:
//
//   - hcn.NetworkNotFoundError / EndpointNotFoundError (a lookup by name
//     or ID found nothing) become CodeNetworkNotFound / CodeEndpointNotFound;
//   - an *hcn.HcnError (HNS refused the call) keeps its HRESULT (HCN_E_*,
//     0x803B00xx) with Call set to the failing Win32 function
//     ("hcnCreateNetwork"); a bare Win32 code gets HRESULT_FROM_WIN32's
//     facility back, except ERROR_NOT_FOUND (hcn's "element not found",
//     what hcnOpenNetwork/hcnOpenEndpoint say of a vanished GUID), which
//     becomes notFound when the call is about a network or an endpoint;
//   - Transient is set for the codes in transientCodes.
//
// Errors that are not HNS's (hcsshim's own checks, JSON, a missing
// computenetwork.dll) are wrapped as they are, with call.
func hnsError(call string, notFound uint32, err error) error {
	if err == nil {
		return nil
	}
	var he *hns.Error
	if errors.As(err, &he) {
		return err
	}
	if e := (hcn.NetworkNotFoundError{}); errors.As(err, &e) {
		return &hns.Error{Call: call, Code: hns.CodeNetworkNotFound, Msg: e.Error()}
	}
	if e := (hcn.EndpointNotFoundError{}); errors.As(err, &e) {
		return &hns.Error{Call: call, Code: hns.CodeEndpointNotFound, Msg: e.Error()}
	}
	var ce *hcn.HcnError
	if errors.As(err, &ce) && ce.HcsError != nil {
		var errno syscall.Errno
		if errors.As(ce.Err, &errno) {
			return fromHcnError(call, notFound, ce.Error(), uint32(errno))
		}
	}
	return fmt.Errorf("%s: %w", call, err)
}

// listError is hnsError for a call that lists objects. Listing opens each
// object it enumerates, so one deleted meanwhile fails the whole list
// with "not found": that error is transient (the next snapshot will not
// see the object), not a statement that what was listed is missing.
func listError(call string, err error) error {
	err = hnsError(call, 0, err)
	var he *hns.Error
	if errors.As(err, &he) {
		switch he.Code {
		case hns.CodeNetworkNotFound, hns.CodeEndpointNotFound, hresult(win32NotFound):
			he.Transient = true
		}
	}
	return err
}

// isNotFound reports whether an hcn error says the object is not there,
// for the calls (namespaces) whose errors are not turned into *hns.Error.
func isNotFound(err error) bool {
	if hns.IsNotFound(err) || hcn.IsNotFoundError(err) || hcn.IsElementNotFoundError(err) {
		return true
	}
	return hns.Code(err) == hresult(win32NotFound)
}
