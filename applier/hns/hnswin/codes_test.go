package hnswin

import (
	"testing"

	"github.com/hnsplan/hnsplan/applier/hns"
)

func TestHresult(t *testing.T) {
	for in, want := range map[uint32]uint32{
		0:          0,
		1168:       0x80070490, // ERROR_NOT_FOUND
		1722:       0x800706BA, // RPC_S_SERVER_UNAVAILABLE
		0x803B0001: 0x803B0001, // already an HRESULT
	} {
		if got := hresult(in); got != want {
			t.Errorf("hresult(%#x) = %#x, want %#x", in, got, want)
		}
	}
}

func TestFromHcnError(t *testing.T) {
	tests := []struct {
		name     string
		notFound uint32
		msg      string
		errno    uint32
		want     hns.Error
	}{{
		name:  "HNS error: its HRESULT and the Win32 call",
		msg:   `hcnCreateEndpoint failed in Win32: The specified policy is invalid. (0x803b000d) {"Success":false,"Error":"The specified policy is invalid. ","ErrorCode":2151350285}`,
		errno: 0x803B000D,
		want: hns.Error{Call: "hcnCreateEndpoint", Code: hns.CodeInvalidPolicy,
			Msg: `The specified policy is invalid. {"Success":false,"Error":"The specified policy is invalid. ","ErrorCode":2151350285}`},
	}, {
		name:     "element not found on a network call is the network's not-found",
		notFound: hns.CodeNetworkNotFound,
		msg:      "hcnOpenNetwork failed in Win32: Element not found. (0x490)",
		errno:    1168,
		want:     hns.Error{Call: "hcnOpenNetwork", Code: hns.CodeNetworkNotFound, Msg: "Element not found."},
	}, {
		name:  "element not found elsewhere",
		msg:   "hcnOpenNamespace failed in Win32: Element not found. (0x490)",
		errno: 1168,
		want:  hns.Error{Call: "hcnOpenNamespace", Code: 0x80070490, Msg: "Element not found."},
	}, {
		name:  "RPC failure is transient",
		msg:   "hcnEnumerateNetworks failed in Win32: The RPC server is unavailable. (0x6ba)",
		errno: 1722,
		want:  hns.Error{Call: "hcnEnumerateNetworks", Code: 0x800706BA, Msg: "The RPC server is unavailable.", Transient: true},
	}, {
		name:  "HNS stopping is transient",
		msg:   "hcnModifyNetwork failed in Win32: stopped (0x803b0020)",
		errno: 0x803B0020,
		want:  hns.Error{Call: "hcnModifyNetwork", Code: 0x803B0020, Msg: "stopped", Transient: true},
	}, {
		name:  "a message of another shape is kept whole",
		msg:   "something else",
		errno: 0x803B002C,
		want:  hns.Error{Call: "HostComputeNetwork.Delete", Code: hns.CodeEntityHasReferences, Msg: "something else"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fromHcnError("HostComputeNetwork.Delete", tt.notFound, tt.msg, tt.errno)
			if *got != tt.want {
				t.Errorf("fromHcnError:\n got %+v\nwant %+v", *got, tt.want)
			}
			if hns.IsTransient(got) != tt.want.Transient {
				t.Errorf("hns.IsTransient = %v", !tt.want.Transient)
			}
		})
	}
	if !hns.IsNotFound(fromHcnError("x", hns.CodeEndpointNotFound, "", 1168)) {
		t.Error("element not found on an endpoint call is not hns.IsNotFound")
	}
}

func TestTransientCodes(t *testing.T) {
	for _, c := range []uint32{hns.CodeNetworkNotFound, hns.CodeInvalidPolicy, hns.CodeEntityHasReferences, hns.CodePolicyAlreadyExists, hresult(5)} {
		if isTransient(c) {
			t.Errorf("%#x is transient; retrying it cannot help", c)
		}
	}
	for c, name := range transientCodes {
		if c&0x80000000 == 0 {
			t.Errorf("%s (%#x) is not an HRESULT", name, c)
		}
	}
}

func TestOpName(t *testing.T) {
	for _, tt := range []struct {
		op   hns.Op
		want string
	}{
		{hns.Op{Action: hns.Replace, Kind: hns.KindNetwork, Name: "flannel.4096"}, `replace network "flannel.4096"`},
		{hns.Op{Action: hns.Create, Kind: hns.KindRoute, Name: "10.244.2.0/24", Network: "flannel.4096"}, `create route "10.244.2.0/24" on "flannel.4096"`},
		{hns.Op{Kind: hns.KindACL, Name: "ep"}, `action "" acl "ep"`},
	} {
		if got := opName(tt.op); got != tt.want {
			t.Errorf("opName = %s, want %s", got, tt.want)
		}
	}
}
