package hnswin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// This file is the portable half of an ACL update (KindACL): what is sent
// to HNS, given the endpoint's policies as read at the call. The Windows
// half (client_windows.go) only reads the endpoint and makes the call.
//
// Both forms keep every non-ACL policy of the endpoint as the very bytes
// it was read as: the CNI's OutBoundNAT, SDNRoute, L2Driver, PA, ... are
// never decoded into plan types and encoded again, so a field or a form
// hnsplan does not know survives the update. Every ACL policy read is
// dropped: the op's ACLs are the endpoint's whole ACL list.

// ACLForm is the HNS API through which a Client writes an endpoint's ACL
// list. See the package documentation ("Writing ACLs") for why there are
// two.
type ACLForm string

const (
	// ACLFormV2 reads the endpoint through hcn and sends its policy list
	// in one v2 ModifyEndpointSettings request (ResourceType Policy,
	// RequestType Update), the call of hcn's ApplyPolicy that Azure NPM
	// makes. The default.
	ACLFormV2 ACLForm = "v2"
	// ACLFormV1 reads the endpoint through HNS v1 (GET /endpoints/<id>) and
	// POSTs its policy list to /endpoints/<id>, the call under hcsshim's
	// HNSEndpoint.ApplyACLPolicy that Calico Felix makes, with the ACLs in
	// v1's flat form.
	ACLFormV1 ACLForm = "v1"
)

// ParseACLForm reads an ACLForm by its name, "v2" or "v1" ("" is v2).
func ParseACLForm(s string) (ACLForm, error) {
	switch f := ACLForm(s); f {
	case "", ACLFormV2:
		return ACLFormV2, nil
	case ACLFormV1:
		return f, nil
	}
	return "", fmt.Errorf("hnswin: ACL write form %q: want %q or %q", s, ACLFormV2, ACLFormV1)
}

// options are a Client's settings, given to New.
type options struct {
	aclForm ACLForm
}

// An Option sets up a Client in New.
type Option func(*options)

// WithACLForm makes the Client write ACL lists in form f (default
// ACLFormV2). New fails on a form ParseACLForm does not know.
func WithACLForm(f ACLForm) Option {
	return func(o *options) { o.aclForm = f }
}

// newOptions applies opts to the defaults and checks the result.
func newOptions(opts ...Option) (options, error) {
	o := options{aclForm: ACLFormV2}
	for _, opt := range opts {
		opt(&o)
	}
	f, err := ParseACLForm(string(o.aclForm))
	if err != nil {
		return options{}, err
	}
	o.aclForm = f
	return o, nil
}

// isACLType reports whether a policy type is HNS's ACL, in any case: the
// reader (readEndpointPolicies) and the writers (aclUpdateV2, aclUpdateV1)
// must agree on which policies are the endpoint's ACL list.
func isACLType(typ string) bool { return strings.EqualFold(typ, plan.TypeACL) }

// isACLPolicy reports whether one policy of an endpoint, as read (v2's
// {"Type","Settings"} or v1's flat form), is an ACL: its "Type" key,
// matched without regard to case as readPolicy does, is a string that
// isACLType accepts. A policy with no string Type is not an ACL, whatever
// its other fields hold. A policy that is not a JSON object is an error:
// whether it is an ACL cannot be told, and an update must not guess.
func isACLPolicy(raw json.RawMessage) (bool, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return false, fmt.Errorf("policy %s is not a JSON object: cannot tell whether it is an ACL", raw)
	}
	for k, v := range fields {
		if !strings.EqualFold(k, "Type") {
			continue
		}
		var typ string
		if json.Unmarshal(v, &typ) == nil && isACLType(typ) {
			return true, nil
		}
	}
	return false, nil
}

// keptPolicies returns the policies of read that are not ACLs, in their
// order: the very slices read, not copies re-encoded.
func keptPolicies(read []json.RawMessage) ([]json.RawMessage, error) {
	kept := make([]json.RawMessage, 0, len(read))
	for i, raw := range read {
		acl, err := isACLPolicy(raw)
		if err != nil {
			return nil, fmt.Errorf("policy %d of the endpoint: %w", i, err)
		}
		if !acl {
			kept = append(kept, raw)
		}
	}
	return kept, nil
}

// aclUpdateV2 is the policy list an ACLFormV2 update sends, given the
// endpoint's policies as read through hcn (each policy's whole JSON
// object): its non-ACL policies exactly as read, in their order, then
// one {"Type":"ACL","Settings":{...}} policy per ACL of acls, in their
// order, with the Id hcn's AclPolicySetting lacks (aclSettings). HNS's
// Update replaces the whole list, so this is the endpoint's new list.
func aclUpdateV2(read []json.RawMessage, acls []plan.ACL) ([]json.RawMessage, error) {
	out, err := keptPolicies(read)
	if err != nil {
		return nil, err
	}
	for _, a := range acls {
		settings, err := marshalACL(a)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(rawPolicy{Type: plan.TypeACL, Settings: settings})
		if err != nil {
			return nil, fmt.Errorf("ACL %q: %w", a.Id, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// hcnReadLoss returns an error if a policy of an endpoint, as hcn read it
// (hcn.EndpointPolicy: only Type and Settings), has lost its settings: a
// policy of a type that exists only in HNS v1's flat form ("ROUTE",
// "PA"; v2 calls them SDNRoute and ProviderAddress) with no Settings was
// returned flat, and hcn dropped its fields. An ACLFormV2 update would
// send it back without them, deleting the CNI's route or provider
// address; ACLFormV1 reads the raw policies and keeps them. The check is
// partial: a flat OutBoundNAT read without its ExceptionList looks like
// a v2 OutBoundNAT without exceptions, which is valid.
func hcnReadLoss(ps []rawPolicy) error {
	for i, p := range ps {
		if _, v1Only := v1OnlyTypes[p.Type]; !v1Only {
			continue
		}
		if s := bytes.TrimSpace(p.Settings); len(s) == 0 || string(s) == "null" {
			return fmt.Errorf("policy %d (Type %q) came through hcn without its settings: HNS returned it in v1's flat form, "+
				"whose fields hcn does not read, and an update through HNS v2 would send it back without them; "+
				"write this endpoint's ACLs through HNS v1 (ACLFormV1, hnsplan-agent --hns windows-v1)", i, p.Type)
		}
	}
	return nil
}

// v1OnlyTypes are the policy types of HNS v1's flat form that v2 knows by
// another name.
var v1OnlyTypes = map[string]struct{}{"ROUTE": {}, "PA": {}}

// v1ACL is an ACL policy in HNS v1's flat form: hcsshim's ACLPolicy
// (internal/hns/hnspolicy.go), with its JSON names, field order and
// omitempty, limited to the fields a plan.ACL has. Like hcsshim it keeps
// Action and Direction even when empty (marshalACL refuses that), and
// leaves out an empty Protocols, address or port list, an empty RuleType
// and a zero Priority (HNS's defaults). Unlike hcn's AclPolicySetting it
// has the Id, which HNS v1 takes (Felix names its rules with it).
type v1ACL struct {
	Type            string `json:"Type"`
	Id              string `json:"Id,omitempty"`
	Protocols       string `json:"Protocols,omitempty"`
	Action          string `json:"Action"`
	Direction       string `json:"Direction"`
	LocalAddresses  string `json:"LocalAddresses,omitempty"`
	RemoteAddresses string `json:"RemoteAddresses,omitempty"`
	LocalPorts      string `json:"LocalPorts,omitempty"`
	RemotePorts     string `json:"RemotePorts,omitempty"`
	RuleType        string `json:"RuleType,omitempty"`
	Priority        uint16 `json:"Priority,omitempty"`
}

// marshalV1ACL renders an ACL as an HNS v1 flat ACL policy.
func marshalV1ACL(a plan.ACL) (json.RawMessage, error) {
	if a.Action == "" || a.Direction == "" {
		return nil, fmt.Errorf("ACL %q: Action and Direction are required", a.Id)
	}
	return json.Marshal(v1ACL{
		Type:            plan.TypeACL,
		Id:              a.Id,
		Protocols:       a.Protocols,
		Action:          a.Action,
		Direction:       a.Direction,
		LocalAddresses:  a.LocalAddresses,
		RemoteAddresses: a.RemoteAddresses,
		LocalPorts:      a.LocalPorts,
		RemotePorts:     a.RemotePorts,
		RuleType:        a.RuleType,
		Priority:        a.Priority,
	})
}

// aclUpdateV1 is the policy list an ACLFormV1 update sends, given the
// endpoint's Policies as HNS v1 returned them (hcsshim's HNSEndpoint
// keeps each as the raw bytes of HNS's reply): its non-ACL policies
// exactly as read, in their order, then one flat v1 ACL policy per ACL of
// acls, in their order.
func aclUpdateV1(read []json.RawMessage, acls []plan.ACL) ([]json.RawMessage, error) {
	out, err := keptPolicies(read)
	if err != nil {
		return nil, err
	}
	for _, a := range acls {
		b, err := marshalV1ACL(a)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// policyArray renders a policy list as a JSON array that holds each
// policy's bytes as they are (json.Marshal would compact them). A policy
// that is not valid JSON is an error: it would make the request invalid.
func policyArray(ps []json.RawMessage) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, p := range ps {
		if !json.Valid(p) {
			return nil, fmt.Errorf("policy %d is not valid JSON: %s", i, p)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(p)
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

// v2PolicyRequest is the Settings of the v2 ModifyEndpointSettings
// request that sets an endpoint's policy list to ps: hcn's
// PolicyEndpointRequest, {"Policies":[...]}. An empty list is sent as
// "Policies":[] (PolicyEndpointRequest would leave it out, and HNS would
// then keep the ACLs).
func v2PolicyRequest(ps []json.RawMessage) (json.RawMessage, error) {
	arr, err := policyArray(ps)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(`{"Policies":` + string(arr) + `}`), nil
}

// v1UpdateBody is the body of the HNS v1 POST /endpoints/<id> that sets
// the endpoint's policy list to ps: {"ID":id,"Policies":[...]}, with each
// policy's bytes as they are. It is the body Felix's ApplyACLPolicy sends
// (hcsshim's HNSEndpoint with only its ID set, its Policies appended to),
// which names no other field of the endpoint, so that nothing else is
// asked to change. An empty list is sent as "Policies":[]: hcsshim's
// omitempty would leave it out.
func v1UpdateBody(id string, ps []json.RawMessage) ([]byte, error) {
	if id == "" {
		return nil, fmt.Errorf("an HNS v1 endpoint update needs the endpoint's ID")
	}
	idJSON, err := json.Marshal(id)
	if err != nil {
		return nil, err
	}
	arr, err := policyArray(ps)
	if err != nil {
		return nil, err
	}
	return []byte(`{"ID":` + string(idJSON) + `,"Policies":` + string(arr) + `}`), nil
}
