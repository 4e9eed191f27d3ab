package hnswin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/Microsoft/hcsshim"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/internal/golden"
)

// newACLs is the ACL list the tests write: Ids, every kind of field, and
// one ACL with nothing optional (no Id, Priority 0, no RuleType), which
// both forms must leave out rather than send empty.
var newACLs = []plan.ACL{
	{Id: "hnsplan-allow-dns", Protocols: "17", Action: "Allow", Direction: "Out", RemoteAddresses: "10.0.0.10", RemotePorts: "53", RuleType: "Switch", Priority: 1000},
	{Id: "hnsplan-allow-web", Protocols: "6", Action: "Allow", Direction: "In", LocalAddresses: "10.224.0.37", LocalPorts: "80,443", RuleType: "Switch", Priority: 1001},
	{Action: "Block", Direction: "In"},
}

// endpointDocs are the endpoint documents of testdata/real, with how many
// of their policies are not ACLs and how many are.
var endpointDocs = []struct {
	file       string
	kept, acls int
}{
	{"01-endpoint-v2-acl.json", 0, 3},
	{"02-endpoint-v1-azurecni.json", 3, 0},
	{"03-endpoint-v1-calico-overlay-pod.json", 2, 0},
	{"04-endpoint-v1-calico-default-acl.json", 3, 1},
	{"08-endpoint-v2-azurecni-aks.json", 2, 4},
	{"09-endpoint-v2-vpcbridge-eks.json", 3, 0},
	{"10-endpoint-v1-flannel-winoverlay.json", 3, 0},
}

// documentPolicies returns the policies of an endpoint document (04 is a
// bare policy list) as a reader holds them: json.RawMessage keeps the
// bytes of a value exactly, whitespace and escapes included, as
// hcsshim's HNSEndpoint.Policies does with HNS v1's reply.
func documentPolicies(t *testing.T, file string) (doc []byte, policies []json.RawMessage) {
	t.Helper()
	doc = readReal(t, file)
	if err := json.Unmarshal(doc, &policies); err == nil {
		return doc, policies
	}
	var ep struct{ Policies []json.RawMessage }
	if err := json.Unmarshal(doc, &ep); err != nil {
		t.Fatal(err)
	}
	return doc, ep.Policies
}

// modifyRequest is hcn.ModifyEndpointSettingRequest, which hcn marshals
// before calling HNS (hcn has no types off Windows).
type modifyRequest struct {
	ResourceType string          `json:",omitempty"`
	RequestType  string          `json:",omitempty"`
	Settings     json.RawMessage `json:",omitempty"`
}

// aclForms are the two ACL update forms as the tests drive them: the
// policy list, the request hnswin builds from it, and the policy list as
// it reaches HNS, with what a kept policy becomes on the way.
var aclForms = []struct {
	form   ACLForm
	update func([]json.RawMessage, []plan.ACL) ([]json.RawMessage, error)
	// request is what hnswin hands to hcsshim: the Settings of the v2
	// ModifyEndpointSettings request, the body of the v1 POST.
	request func(ps []json.RawMessage) ([]byte, error)
	// sent is the policy list of the bytes that reach HNS.
	sent func(request []byte) ([]json.RawMessage, error)
	// onTheWire is what the bytes of a kept policy become in them.
	onTheWire func(json.RawMessage) []byte
}{{
	form:    ACLFormV2,
	update:  aclUpdateV2,
	request: func(ps []json.RawMessage) ([]byte, error) { return v2PolicyRequest(ps) },
	// hcn.ModifyEndpointSettings json.Marshals the request: the Settings
	// are compacted and <, >, & in strings escaped, the same JSON values.
	sent: func(settings []byte) ([]json.RawMessage, error) {
		wire, err := json.Marshal(modifyRequest{ResourceType: "Policy", RequestType: "Update", Settings: settings})
		if err != nil {
			return nil, err
		}
		var req modifyRequest
		if err := json.Unmarshal(wire, &req); err != nil {
			return nil, err
		}
		var body struct{ Policies []json.RawMessage }
		err = json.Unmarshal(req.Settings, &body)
		return body.Policies, err
	},
	onTheWire: func(p json.RawMessage) []byte {
		b, _ := json.Marshal(p)
		return b
	},
}, {
	form:    ACLFormV1,
	update:  aclUpdateV1,
	request: func(ps []json.RawMessage) ([]byte, error) { return v1UpdateBody("ep-id", ps) },
	// hcsshim's HNSEndpointRequest sends the body as it is.
	sent: func(body []byte) ([]json.RawMessage, error) {
		var b struct {
			ID       string
			Policies []json.RawMessage
		}
		if err := json.Unmarshal(body, &b); err != nil {
			return nil, err
		}
		if b.ID != "ep-id" {
			return nil, fmt.Errorf("body's ID is %q", b.ID)
		}
		return b.Policies, nil
	},
	onTheWire: func(p json.RawMessage) []byte { return p },
}}

// TestACLUpdateKeepsPolicies writes newACLs to every real endpoint
// document in both forms. Every non-ACL policy of the document reaches
// HNS in its place: in v1 byte for byte as in the document; in v2 as
// hnswin hands it to hcn byte for byte, then compacted by hcn's
// json.Marshal (onTheWire). No ACL of the document is left, each new ACL
// is there once, in the form's shape, and reads back as the plan.ACL
// sent. Kept policies come first, in the document's order, then the ACLs
// in newACLs' order.
func TestACLUpdateKeepsPolicies(t *testing.T) {
	for _, d := range endpointDocs {
		for _, f := range aclForms {
			t.Run(d.file+"/"+string(f.form), func(t *testing.T) {
				doc, read := documentPolicies(t, d.file)
				if len(read) != d.kept+d.acls {
					t.Fatalf("the document has %d policies, want %d", len(read), d.kept+d.acls)
				}
				var kept []json.RawMessage
				for _, raw := range read {
					if !bytes.Contains(doc, raw) {
						t.Fatalf("the reader changed policy %s", raw)
					}
					p, err := readPolicy(raw)
					if err != nil {
						t.Fatal(err)
					}
					if !isACLType(p.Type) {
						kept = append(kept, raw)
					}
				}
				if len(kept) != d.kept {
					t.Fatalf("%d non-ACL policies in the document, want %d", len(kept), d.kept)
				}

				ps, err := f.update(read, newACLs)
				if err != nil {
					t.Fatal(err)
				}
				for i, p := range kept {
					if i >= len(ps) || !bytes.Equal(ps[i], p) {
						t.Errorf("policy %d of the list is not the document's %s", i, p)
					}
				}
				req, err := f.request(ps)
				if err != nil {
					t.Fatal(err)
				}
				sent, err := f.sent(req)
				if err != nil {
					t.Fatalf("the request %s: %v", req, err)
				}
				if len(sent) != len(kept)+len(newACLs) {
					t.Fatalf("%d policies sent, want %d kept and %d ACLs:\n%s", len(sent), len(kept), len(newACLs), req)
				}
				for i, p := range kept {
					if want := f.onTheWire(p); !bytes.Equal(sent[i], want) {
						t.Errorf("kept policy %d reaches HNS as\n%s\nwant\n%s", i, sent[i], want)
					}
				}
				for j, want := range newACLs {
					raw := sent[len(kept)+j]
					checkACLShape(t, f.form, raw)
					p, err := readPolicy(raw)
					if err != nil || !isACLType(p.Type) {
						t.Fatalf("ACL %d sent as %s: not an ACL policy (%v)", j, raw, err)
					}
					got, err := parseACL(p.Settings)
					if err != nil {
						t.Fatal(err)
					}
					if got != want {
						t.Errorf("ACL %d sent as %s reads back as %+v, want %+v", j, raw, got, want)
					}
				}
			})
		}
	}
}

// checkACLShape checks that an ACL policy has its form's shape: v2's
// {"Type":"ACL","Settings":{...}}, v1's flat {"Type":"ACL",...} with no
// Settings. Both leave out the empty optional fields.
func checkACLShape(t *testing.T, form ACLForm, raw json.RawMessage) {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		t.Fatal(err)
	}
	_, settings := top["Settings"]
	switch {
	case string(top["Type"]) != `"ACL"`:
		t.Errorf("%s ACL %s: Type is not \"ACL\"", form, raw)
	case form == ACLFormV2 && (len(top) != 2 || !settings):
		t.Errorf("v2 ACL %s: want exactly Type and Settings", raw)
	case form == ACLFormV1 && settings:
		t.Errorf("v1 ACL %s: has Settings, want the flat form", raw)
	case bytes.Contains(raw, []byte(`""`)) || bytes.Contains(raw, []byte(`"Priority":0`)):
		t.Errorf("%s ACL %s: an empty field is sent", form, raw)
	}
}

// TestACLUpdateGolden records the exact request of both forms for every
// real endpoint document: what a reviewer compares with what Felix and
// Azure NPM send. HNSPLAN_UPDATE=1 go test ./applier/hns/hnswin rewrites
// testdata/aclupdate.txtar.
func TestACLUpdateGolden(t *testing.T) {
	c := golden.Extract(t, "testdata/aclupdate.txtar", "requests")
	var b strings.Builder
	for _, d := range endpointDocs {
		_, read := documentPolicies(t, d.file)
		for _, f := range aclForms {
			ps, err := f.update(read, newACLs)
			if err != nil {
				t.Fatal(err)
			}
			req, err := f.request(ps)
			if err != nil {
				t.Fatal(err)
			}
			what := "ModifyEndpointSettings Policy Update, Settings:"
			if f.form == ACLFormV1 {
				what = "POST /endpoints/ep-id"
			}
			fmt.Fprintf(&b, "## %s %s %s\n%s\n", d.file, f.form, what, req)
		}
	}
	c.Check(t, "the ACL update requests", b.String())
}

// TestACLPolicyRecognised: an ACL is a policy whose Type is "ACL" in any
// case and in either form; it is replaced, and the reader calls it an
// ACL too. A policy that merely mentions ACL elsewhere is kept, byte for
// byte, and read as another policy.
func TestACLPolicyRecognised(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		acl    bool
	}{
		{"v2", `{"Type":"ACL","Settings":{"Action":"Block","Direction":"In","Priority":300}}`, true},
		{"v2 lower case", `{"Type":"acl","Settings":{"Action":"Block","Direction":"In"}}`, true},
		{"v2 keys in lower case", `{"type":"Acl","settings":{"Action":"Allow","Direction":"Out"}}`, true},
		{"v1 flat", `{"Action":"Block","Direction":"In","Priority":65500,"Protocols":"256","RuleType":"Switch","Scope":0,"Type":"ACL"}`, true},
		{"v1 flat, spaced, lower case", `{ "Action" : "Allow", "Direction" : "Out", "Type" : "acl" }`, true},
		{"v1 flat with Felix's numeric Protocol", `{"Type":"ACL","Id":"CNIDefaultDenyAllPolicy","Protocol":256,"Action":"Block","Direction":"In","Priority":65500}`, true},
		{"ACL in the settings' values", `{"Type":"OutBoundNAT","Settings":{"Exceptions":["10.0.0.0/8"],"Comment":"ACL"}}`, false},
		{"a Type ACL inside the settings", `{"Type":"ProxyPolicy","Settings":{"Type":"ACL","Action":"Block"}}`, false},
		{"a flat field named ACL", `{ "ACL" : "ACL", "Type" : "L2Driver" }`, false},
		{"a type containing ACL", `{"Type":"NetworkACL","Settings":{"Action":"Block","Direction":"In"}}`, false},
		{"no Type", `{"Settings":{"Type":"ACL"}}`, false},
		{"a Type that is not a string", `{"Type":["ACL"]}`, false},
	}
	var read []json.RawMessage
	var kept []json.RawMessage
	for _, tt := range tests {
		raw := json.RawMessage(tt.policy)
		got, err := isACLPolicy(raw)
		if err != nil || got != tt.acl {
			t.Errorf("%s: isACLPolicy(%s) = %v, %v; want %v", tt.name, raw, got, err, tt.acl)
		}
		read = append(read, raw)
		if !tt.acl {
			kept = append(kept, raw)
		}
		// The reader agrees: an ACL is read into Endpoint.ACLs.
		if p, err := readPolicy(raw); err == nil {
			_, acls, err := readEndpointPolicies([]rawPolicy{p})
			if err != nil {
				t.Errorf("%s: readEndpointPolicies: %v", tt.name, err)
			} else if (len(acls) == 1) != tt.acl {
				t.Errorf("%s: the reader's ACLs are %+v, want an ACL: %v", tt.name, acls, tt.acl)
			}
		}
	}
	acl := plan.ACL{Id: "hnsplan-deny", Protocols: "256", Action: "Block", Direction: "In", RuleType: "Switch", Priority: 65000}
	for _, f := range aclForms {
		ps, err := f.update(read, []plan.ACL{acl})
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != len(kept)+1 {
			t.Fatalf("%s: %d policies, want the %d kept and the ACL: %s", f.form, len(ps), len(kept), ps)
		}
		for i := range kept {
			if !bytes.Equal(ps[i], kept[i]) {
				t.Errorf("%s: policy %d is %s, want %s", f.form, i, ps[i], kept[i])
			}
		}
	}
}

// TestACLUpdateRefuses: a policy read that is not a JSON object cannot be
// classified, an ACL without Action or Direction cannot be written, and
// a request is never built around invalid JSON.
func TestACLUpdateRefuses(t *testing.T) {
	read := []json.RawMessage{json.RawMessage(`{"Type":"L2Driver"}`), json.RawMessage(`"ACL"`)}
	for _, f := range aclForms {
		if _, err := f.update(read, nil); err == nil || !strings.Contains(err.Error(), "policy 1 of the endpoint") {
			t.Errorf("%s: a policy that is no object: %v", f.form, err)
		}
		if _, err := f.update(nil, []plan.ACL{{Id: "x", Action: "Allow"}}); err == nil {
			t.Errorf("%s: an ACL without a Direction was written", f.form)
		}
		if _, err := f.request([]json.RawMessage{json.RawMessage(`{"Type":`)}); err == nil {
			t.Errorf("%s: a request was built around invalid JSON", f.form)
		}
	}
	if _, err := v1UpdateBody("", nil); err == nil {
		t.Error("a v1 update body without an ID")
	}
}

// TestACLUpdateEmpty: clearing the ACLs of an endpoint with no other
// policy sends an empty list, which neither hcn's PolicyEndpointRequest
// nor hcsshim's HNSEndpoint would send (omitempty): without it HNS would
// keep the ACLs.
func TestACLUpdateEmpty(t *testing.T) {
	read := []json.RawMessage{json.RawMessage(`{"Type":"ACL","Settings":{"Action":"Block","Direction":"In"}}`)}
	for _, tt := range []struct {
		form ACLForm
		want string
	}{
		{ACLFormV2, `{"Policies":[]}`},
		{ACLFormV1, `{"ID":"ep-id","Policies":[]}`},
	} {
		for _, f := range aclForms {
			if f.form != tt.form {
				continue
			}
			ps, err := f.update(read, nil)
			if err != nil {
				t.Fatal(err)
			}
			req, err := f.request(ps)
			if err != nil || string(req) != tt.want {
				t.Errorf("%s: request %s, %v; want %s", f.form, req, err, tt.want)
			}
		}
	}
}

// TestV1ACLIsHcsshims: the v1 flat ACL is, byte for byte, what hcsshim's
// ACLPolicy (the type of Felix's ApplyACLPolicy) marshals to for the same
// rule: its field order, Id, omitempty, Priority 0 absent.
func TestV1ACLIsHcsshims(t *testing.T) {
	acls := append([]plan.ACL{
		{Id: "every-field", Protocols: "6", Action: "Allow", Direction: "In", LocalAddresses: "10.0.0.1", RemoteAddresses: "10.1.0.0/16,10.2.0.0/16",
			LocalPorts: "80,443", RemotePorts: "1024-65535", RuleType: "Host", Priority: 65535},
		{Protocols: "256", Action: "Block", Direction: "Out", Priority: 0},
	}, newACLs...)
	for _, a := range acls {
		got, err := marshalV1ACL(a)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(&hcsshim.ACLPolicy{
			Type:            hcsshim.ACL,
			Id:              a.Id,
			Protocols:       a.Protocols,
			Action:          hcsshim.ActionType(a.Action),
			Direction:       hcsshim.DirectionType(a.Direction),
			LocalAddresses:  a.LocalAddresses,
			RemoteAddresses: a.RemoteAddresses,
			LocalPorts:      a.LocalPorts,
			RemotePorts:     a.RemotePorts,
			RuleType:        hcsshim.RuleType(a.RuleType),
			Priority:        a.Priority,
		})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("v1 ACL of %+v:\n got %s\nwant %s (hcsshim)", a, got, want)
		}
	}
}

func TestACLFormOptions(t *testing.T) {
	tests := []struct {
		opts    []Option
		want    ACLForm
		wantErr bool
	}{
		{nil, ACLFormV2, false},
		{[]Option{WithACLForm(ACLFormV1)}, ACLFormV1, false},
		{[]Option{WithACLForm(ACLFormV1), WithACLForm(ACLFormV2)}, ACLFormV2, false},
		{[]Option{WithACLForm("")}, ACLFormV2, false},
		{[]Option{WithACLForm("v3")}, "", true},
		{[]Option{WithACLForm("V1")}, "", true},
	}
	for _, tt := range tests {
		o, err := newOptions(tt.opts...)
		if (err != nil) != tt.wantErr || o.aclForm != tt.want {
			t.Errorf("newOptions: form %q, %v; want %q (error: %v)", o.aclForm, err, tt.want, tt.wantErr)
		}
	}
}

func TestV1Error(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want *hns.Error // nil: wrapped as it is
	}{{
		name: "HNS refused: element not found is the endpoint's not-found",
		err:  errors.New("hns failed with error : Element not found. "),
		want: &hns.Error{Call: "GET", Code: hns.CodeEndpointNotFound, Msg: "Element not found."},
	}, {
		name: "the call failed: its code, transient",
		err:  fmt.Errorf("failed during hnsCallRawResponse: %w", errors.New("hnsCall  failed in Win32: The RPC server is unavailable. (0x6ba)")),
		want: &hns.Error{Call: "GET", Code: 0x800706BA, Msg: "The RPC server is unavailable.", Transient: true},
	}, {
		name: "the call failed: ERROR_NOT_FOUND",
		err:  errors.New("failed during hnsCallRawResponse: hnsCall  failed in Win32: Element not found. (0x490)"),
		want: &hns.Error{Call: "GET", Code: hns.CodeEndpointNotFound, Msg: "Element not found."},
	}, {
		name: "the call failed: an HNS HRESULT",
		err:  errors.New("failed during hnsCallRawResponse: hnsCall  failed in Win32: The specified policy is invalid. (0x803b000d)"),
		want: &hns.Error{Call: "GET", Code: hns.CodeInvalidPolicy, Msg: "The specified policy is invalid."},
	}, {
		name: "HNS refused something else: no code to give",
		err:  errors.New("hns failed with error : The parameter is incorrect. "),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := v1Error("GET", hns.CodeEndpointNotFound, tt.err)
			var he *hns.Error
			if tt.want == nil {
				if errors.As(got, &he) || !errors.Is(got, tt.err) {
					t.Errorf("v1Error = %#v, want %v wrapped", got, tt.err)
				}
				return
			}
			if !errors.As(got, &he) || !reflect.DeepEqual(he, tt.want) {
				t.Errorf("v1Error = %#v, want %+v", got, *tt.want)
			}
		})
	}
	if v1Error("GET", 0, nil) != nil {
		t.Error("v1Error(nil) is not nil")
	}
}

// TestHcnReadLoss: a v1-only policy type that came through hcn without
// settings stops a v2 update; the same type with settings, and v2 types
// with none (L2Driver, an OutBoundNAT without exceptions), do not.
func TestHcnReadLoss(t *testing.T) {
	tests := []struct {
		policies []rawPolicy
		loss     bool
	}{
		{[]rawPolicy{raw("OutBoundNAT", `{"Exceptions":["10.0.0.0/8"]}`), {Type: "ROUTE"}}, true},
		{[]rawPolicy{{Type: "PA", Settings: json.RawMessage("null")}}, true},
		{[]rawPolicy{raw("ROUTE", `{"DestinationPrefix":"10.0.0.0/16","NeedEncap":true}`), raw("PA", `{"PA":"10.1.0.5"}`)}, false},
		{[]rawPolicy{{Type: "L2Driver"}, {Type: "OutBoundNAT"}, raw("ACL", `{"Action":"Block","Direction":"In"}`)}, false},
		{nil, false},
	}
	for _, tt := range tests {
		err := hcnReadLoss(tt.policies)
		if (err != nil) != tt.loss {
			t.Errorf("hcnReadLoss(%+v) = %v, want a loss: %v", tt.policies, err, tt.loss)
		}
		if err != nil && !strings.Contains(err.Error(), "windows-v1") {
			t.Errorf("the error does not say what to do: %v", err)
		}
	}
}
