package hns_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

func TestEquivalentACLs(t *testing.T) {
	base := plan.ACL{Id: "a", Protocols: "6", Action: "Allow", Direction: "In", RemoteAddresses: "10.0.0.0/16", LocalPorts: "80", RuleType: "Switch", Priority: 1000}
	with := func(f func(*plan.ACL)) plan.ACL { a := base; f(&a); return a }
	host := plan.ACL{Id: "h", Protocols: "256", Action: "Allow", Direction: "In", RuleType: "Host"}
	for _, tc := range []struct {
		name       string
		sent, read []plan.ACL
		want       bool
	}{
		{"same", []plan.ACL{base}, []plan.ACL{base}, true},
		{"Id dropped", []plan.ACL{base}, []plan.ACL{with(func(a *plan.ACL) { a.Id = "" })}, true},
		{"other Id", []plan.ACL{base}, []plan.ACL{with(func(a *plan.ACL) { a.Id = "b" })}, false},
		{"256 read as empty", []plan.ACL{host}, []plan.ACL{{Id: "h", Action: "Allow", Direction: "In", RuleType: "Host"}}, true},
		{"empty read as 256", []plan.ACL{{Action: "Allow", Direction: "In"}}, []plan.ACL{{Protocols: "256", Action: "Allow", Direction: "In"}}, true},
		{"any spelled out", []plan.ACL{host}, []plan.ACL{{Id: "h", Protocols: "ANY", Action: "Allow", Direction: "In", RuleType: "Host"}}, true},
		{"priority 0 read as a default", []plan.ACL{host, base}, []plan.ACL{base, {Id: "h", Protocols: "256", Action: "Allow", Direction: "In", RuleType: "Host", Priority: 1000}}, true},
		{"priority changed", []plan.ACL{base}, []plan.ACL{with(func(a *plan.ACL) { a.Priority = 1001 })}, false},
		{"port changed", []plan.ACL{base}, []plan.ACL{with(func(a *plan.ACL) { a.LocalPorts = "81" })}, false},
		{"action changed", []plan.ACL{base}, []plan.ACL{with(func(a *plan.ACL) { a.Action = "Block" })}, false},
		{"one more", []plan.ACL{base}, []plan.ACL{base, host}, false},
		{"order", []plan.ACL{host, base}, []plan.ACL{base, host}, true},
		// Two rules alike but for the priority: the one with its own
		// priority must keep its match, the 0 one takes what is left.
		{"priorities paired right", []plan.ACL{with(func(a *plan.ACL) { a.Priority = 0; a.Id = "" }), with(func(a *plan.ACL) { a.Id = "" })},
			[]plan.ACL{with(func(a *plan.ACL) { a.Id = ""; a.Priority = 1000 }), with(func(a *plan.ACL) { a.Id = ""; a.Priority = 4096 })}, true},
	} {
		if got := hns.EquivalentACLs(tc.sent, tc.read); got != tc.want {
			t.Errorf("%s: EquivalentACLs = %t, want %t", tc.name, got, tc.want)
		}
	}
}

// skewed is an HNS that reads every pod ACL's LocalPorts back otherwise:
// an echo no known normalisation explains, and no write mends.
type skewed struct{ *hnsmem.HNS }

func (s skewed) Snapshot(ctx context.Context) (*hns.State, error) {
	st, err := s.HNS.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	for i := range st.Endpoints {
		for j := range st.Endpoints[i].ACLs {
			if a := &st.Endpoints[i].ACLs[j]; a.LocalPorts == "" && a.RuleType == "Switch" {
				a.LocalPorts = "1-65535"
				a.Protocols = "6"
			}
		}
	}
	return st, nil
}

// TestLoopBreaker: an ACL list whose read-back differs after a write is
// written once more; after the second write it is reported as a
// mismatch (object, field, sent, read) and not written again, until the
// plan changes.
func TestLoopBreaker(t *testing.T) {
	h := hnsmem.New()
	seed(t, h)
	c := skewed{h}
	w := overlayWant(4096)
	echo := hns.NewEcho()
	writes := func() int {
		have, err := c.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w.Echo = echo
		ops := hns.Diff(have, w)
		n := 0
		for _, op := range ops {
			if err := h.Apply(ctx, op); err != nil {
				t.Fatal(err)
			}
			if op.Kind == hns.KindACL {
				n++
			}
		}
		now, _ := c.Snapshot(ctx)
		echo.Record(ops, now)
		addPods(t, h, w)
		return n
	}
	writes() // the network; then the CNI's pods appear
	pods := len(w.PodACLs)
	if n := writes(); n != pods {
		t.Fatalf("first ACL pass: %d writes, want %d", n, pods)
	}
	if len(echo.Mismatches()) != 0 {
		t.Fatalf("a mismatch after one write: %v", echo.Mismatches())
	}
	if n := writes(); n != pods {
		t.Fatalf("second pass: %d writes, want %d (one more try)", n, pods)
	}
	ms := echo.Mismatches()
	if len(ms) != pods || ms[0].Field != "ACLs" || ms[0].Sent == "" || ms[0].Read == "" {
		t.Fatalf("mismatches %v, want one on the ACLs of each of %d pods", ms, pods)
	}
	for range 3 {
		if n := writes(); n != 0 {
			t.Fatalf("written again after the mismatch: %d", n)
		}
	}
	// The baseline survives a restart (its JSON form).
	b, err := json.Marshal(echo)
	if err != nil {
		t.Fatal(err)
	}
	echo = hns.NewEcho()
	if err := json.Unmarshal(b, echo); err != nil {
		t.Fatal(err)
	}
	if n := writes(); n != 0 || len(echo.Mismatches()) != pods {
		t.Fatalf("after a restart: %d writes, mismatches %v", n, echo.Mismatches())
	}
	// The plan changes: written again (twice, then reported again).
	for ip, acls := range w.PodACLs {
		w.PodACLs[ip] = append(acls[:len(acls):len(acls)], plan.ACL{Id: "new", Protocols: "17", Action: "Allow", Direction: "Out", RuleType: "Switch", Priority: 3000})
		break
	}
	if n := writes(); n != 1 {
		t.Fatalf("after a plan change: %d writes, want 1", n)
	}
}

// TestDuplicateHostEndpoints: of several endpoints named like the host
// endpoint, the one at the plan's address is kept and the others are
// deleted by ID, in one pass; the next pass makes no call.
func TestDuplicateHostEndpoints(t *testing.T) {
	h := hnsmem.New(hnsmem.WithQuirks(hnsmem.QuirkDuplicateEndpointNames))
	seed(t, h)
	w := overlayWant(4096)
	echo := hns.NewEcho()
	convergeEcho(t, h, w, echo)
	p := w.Network.Subnets[0].Prefix
	// Calico made two more Calico_ep, one at another address.
	for _, ip := range []netip.Addr{pod(p, 20), pod(p, 21)} {
		if err := h.AddRemoteEndpoint("Calico", w.HostEndpoint.Name, netip.PrefixFrom(ip, p.Bits()), "", nil); err != nil {
			t.Fatal(err)
		}
	}
	ops, _ := echoPass(t, h, w, echo)
	deletes := 0
	for _, op := range ops {
		if op.Kind == hns.KindEndpoint && op.Action == hns.Delete && op.ID != "" {
			deletes++
		} else {
			t.Errorf("unexpected op %s", op)
		}
	}
	if deletes != 2 {
		t.Fatalf("%d deletes of duplicates, want 2: %v", deletes, ops)
	}
	held := h.Held()
	var left []hns.Endpoint
	for _, e := range held.Endpoints {
		if e.Name == w.HostEndpoint.Name {
			left = append(left, e)
		}
	}
	if len(left) != 1 || left[0].IP != w.HostEndpoint.IP {
		t.Fatalf("host endpoints left: %v", left)
	}
	if ops, calls := echoPass(t, h, w, echo); len(ops) != 0 || calls != 0 {
		t.Fatalf("next pass: %v (%d calls)", ops, calls)
	}
}
