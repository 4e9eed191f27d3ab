package hns

import (
	"context"
	"errors"
	"fmt"
)

// A Client reads and changes HNS. Implementations: hnswin (Windows) and
// hnsmem (tests, dry runs, the demo). Both are held to one contract, the
// conformance suite in applier/hns/hnstest, which spells it out.
type Client interface {
	// Features reports what this host's HNS supports.
	Features(ctx context.Context) (Features, error)
	// Snapshot returns every HNS object, owned or not, in canonical order
	// (State.Canonical). The state is the caller's to change.
	Snapshot(ctx context.Context) (*State, error)
	// Apply performs op. Calling it again after a failure is safe: an op
	// whose effect is already there is a no-op.
	Apply(ctx context.Context, op Op) error
}

// Features are the HNS capabilities the agent needs.
type Features struct {
	V2API       bool   // HNS v2 (hcn) API
	RemoteRoute bool   // RemoteSubnetRoute policies
	VxlanPort   bool   // the VxlanPort policy
	ACLRuleID   bool   // ACL Ids
	Version     string // "9.3", "15.4", ...
}

// HRESULTs of HNS errors the agent acts on (HCNHResult.md).
const (
	CodeNetworkNotFound      = 0x803B0001
	CodeEndpointNotFound     = 0x803B0002
	CodeInvalidPolicy        = 0x803B000D
	CodeNetworkAlreadyExists = 0x803B0010
	CodePolicyAlreadyExists  = 0x803B0012
	CodeEntityHasReferences  = 0x803B002C
)

// Error is an HNS error with its HRESULT and the call that failed.
type Error struct {
	Call string // "hcnCreateNetwork", ...
	Code uint32
	Msg  string
	// Transient errors may succeed when retried (e.g. a timeout, a busy
	// service); others will not.
	Transient bool
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s failed: %s (0x%08X)", e.Call, e.Msg, e.Code)
}

// Code returns the HRESULT of an HNS error, or 0.
func Code(err error) uint32 {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// IsNotFound reports whether err says a network or endpoint is not there.
func IsNotFound(err error) bool {
	c := Code(err)
	return c == CodeNetworkNotFound || c == CodeEndpointNotFound
}

// IsTransient reports whether retrying may help.
func IsTransient(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Transient
	}
	return errors.Is(err, context.DeadlineExceeded)
}
