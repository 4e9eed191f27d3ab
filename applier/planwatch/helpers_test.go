package planwatch_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// wait bounds every wait for an update. It is generous: it only limits how
// long a broken source hangs the test, it is never a timing assertion.
const wait = 30 * time.Second

// encode returns a valid plan file for node; gen makes plans of the same
// node differ (the pod block is 192.168.gen.0/26).
func encode(t testing.TB, node string, gen int) (data []byte, digest string) {
	t.Helper()
	block := netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 168, byte(gen), 0}), 26)
	p := &plan.NodePlan{
		FormatVersion: plan.FormatVersion + ".0", Kind: plan.Kind, Node: node,
		Cluster: "demo", Networking: "calico-vxlan",
		Network: plan.Network{Name: "Calico", Type: "Overlay", Immutable: []string{"Name", "Type"},
			Ipams: []plan.Ipam{{Type: "Static", Subnets: []plan.Subnet{{IpAddressPrefix: block,
				Policies: []plan.Policy{plan.NewPolicy(plan.VSID{IsolationId: 4096})}}}}}},
		HostEndpoint: plan.Endpoint{Name: "Calico_ep", IpConfigurations: []plan.IpConfig{{IpAddress: block.Addr().Next().Next(), PrefixLength: 26}}},
		PodEndpoint:  plan.PodEndpointTemplate{Gateway: block.Addr().Next()},
	}
	data, err := plan.Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	return data, p.Digest
}

// invalid returns a plan file for node that verifies (its digest holds)
// but that mutate has made invalid in meaning.
func invalid(t testing.TB, node string, mutate func(*plan.NodePlan)) []byte {
	t.Helper()
	data, _ := encode(t, node, 1)
	p, err := plan.Decode(data, node)
	if err != nil {
		t.Fatal(err)
	}
	mutate(p)
	if data, err = plan.Encode(p); err != nil {
		t.Fatal(err)
	}
	return data
}

// start runs src until the test ends and returns its updates. The
// channel is unbuffered, as a reconciler that reads one at a time would
// make it.
func start(t *testing.T, src planwatch.Source) <-chan planwatch.Update {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan planwatch.Update)
	errc := make(chan error, 1)
	go func() { errc <- src.Run(ctx, ch) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run returned %v, want context.Canceled", err)
			}
		case <-time.After(wait):
			t.Errorf("Run did not return within %v of its context's end", wait)
		}
	})
	return ch
}

// A want is the update a test expects next.
type want struct {
	digest string // a plan with this digest; or else
	err    error  // a rejection with errors.Is(Err, err)
	msg    string // the rejection's message contains this
	raw    []byte // if set, the update's Raw
	// settle lets waits for parts (plan.ErrPartMissing) that do not match
	// go by: a step that writes several objects, one after the other,
	// passes through their states. A plan delivered must still match.
	settle bool
}

func (w want) String() string {
	if w.digest != "" {
		return "plan " + w.digest
	}
	return fmt.Sprintf("rejection %v %q", w.err, w.msg)
}

// expect receives the next update and checks it against w.
func expect(t *testing.T, ch <-chan planwatch.Update, w want) planwatch.Update {
	t.Helper()
	return expectSkipping(t, ch, w, false)
}

// expectSkipping is expect, but with skip it lets rejections that do not
// match w go by: a file written in place may be read half-written.
func expectSkipping(t *testing.T, ch <-chan planwatch.Update, w want, skip bool) planwatch.Update {
	t.Helper()
	timeout := time.After(wait)
	for {
		var u planwatch.Update
		select {
		case u = <-ch:
		case <-timeout:
			t.Fatalf("no update within %v, want %v", wait, w)
		}
		if (u.Plan == nil) == (u.Err == nil) {
			t.Fatalf("update with Plan %v and Err %v: exactly one must be set", u.Plan != nil, u.Err)
		}
		if w.raw != nil && string(u.Raw) != string(w.raw) {
			t.Errorf("Raw = %.40q..., want %.40q...", u.Raw, w.raw)
		}
		if u.Plan != nil {
			if w.digest == "" || u.Plan.Digest != w.digest {
				t.Fatalf("got plan %s, want %v", u.Plan.Digest, w)
			}
			return u
		}
		var pe *planwatch.Error
		if !errors.As(u.Err, &pe) || pe.Source != u.Source {
			t.Errorf("Err %#v is not a *planwatch.Error for %s", u.Err, u.Source)
		}
		match := w.digest == "" && (w.err == nil || errors.Is(u.Err, w.err)) && strings.Contains(u.Err.Error(), w.msg)
		if match {
			return u
		}
		if !skip && !(w.settle && errors.Is(u.Err, plan.ErrPartMissing)) {
			t.Fatalf("got rejection %v, want %v", u.Err, w)
		}
		t.Logf("skipped: %v", u.Err)
	}
}

// expectQuiet checks that nothing is delivered for d. It cannot prove
// that nothing ever will be; d only needs to cover what would be sent by
// mistake (a resync, a debounce).
func expectQuiet(t *testing.T, ch <-chan planwatch.Update, d time.Duration) {
	t.Helper()
	select {
	case u := <-ch:
		if u.Plan != nil {
			t.Fatalf("got plan %s, want nothing", u.Plan.Digest)
		}
		t.Fatalf("got rejection %v, want nothing", u.Err)
	case <-time.After(d):
	}
}

// route is a RemoteSubnetRoute to node's block 192.168.<100+i>.0/26.
func route(node string, i int) plan.RemoteSubnetRoute {
	return plan.RemoteSubnetRoute{
		DestinationPrefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 168, byte(100 + i), 0}), 26),
		IsolationId:       4096, ProviderAddress: netip.AddrFrom4([4]byte{10, 0, 0, byte(100 + i)}),
		DistributedRouterMacAddress: "00-15-5D-7A-00-22", Node: node,
	}
}

// withParts is a plan and the parts it names, as compile writes them.
type withParts struct {
	data   []byte
	digest string
	parts  []plan.EncodedPart // shards and chunks, then heads
	table  *plan.RouteTable
}

// part returns the part called name, failing the test if there is none.
func (w withParts) part(t testing.TB, name string) plan.EncodedPart {
	t.Helper()
	for _, p := range w.parts {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no part %s", name)
	return plan.EncodedPart{}
}

// shards returns the route table's shards.
func (w withParts) shards() []plan.EncodedPart {
	var out []plan.EncodedPart
	for _, p := range w.parts {
		if p.Kind == plan.KindRouteShard {
			out = append(out, p)
		}
	}
	return out
}

// encodeRoutes returns the plan encode makes for node and gen, naming a
// route table that holds routes (RemoteSubnet, VNI 4096: its key is the
// same for any routes), with its parts. mutate, if set, changes the
// plan or its table before they are encoded.
func encodeRoutes(t testing.TB, node string, gen int, routes []plan.RemoteSubnetRoute, mutate func(*plan.NodePlan)) withParts {
	return encodeRoutesIn(t, "demo", node, gen, routes, mutate)
}

// encodeRoutesIn is encodeRoutes for a plan of cluster: parts are named
// after their content, the cluster's name included, so tests that share
// an apiserver use clusters of their own.
func encodeRoutesIn(t testing.TB, cluster, node string, gen int, routes []plan.RemoteSubnetRoute, mutate func(*plan.NodePlan)) withParts {
	t.Helper()
	data, _ := encode(t, node, gen)
	p, err := plan.Decode(data, node)
	if err != nil {
		t.Fatal(err)
	}
	p.Cluster = cluster
	p.SetRoutes(plan.RemoteSubnetTable(p.Cluster, routes))
	if mutate != nil {
		mutate(p)
	}
	parts, err := plan.EncodeParts([]*plan.NodePlan{p})
	if err != nil {
		t.Fatal(err)
	}
	// Heads last, as compile orders them: a reader of the whole list
	// meets every shard before the head that names it.
	head := func(p plan.EncodedPart) int {
		if p.Kind == plan.KindRouteTable {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(parts, func(a, b plan.EncodedPart) int { return cmp.Compare(head(a), head(b)) })
	if data, err = plan.Encode(p); err != nil {
		t.Fatal(err)
	}
	return withParts{data: data, digest: p.Digest, parts: parts, table: p.Routes}
}
