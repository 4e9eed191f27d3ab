// Package hnsmem is an in-memory Host Networking Service: an hns.Client
// for tests, dry runs and the demo, which runs on any OS.
//
// It is a model of HNS, not a stub (style-anchors.md §1, tailscale: "Our
// fake must model HNS"): it validates what HNS validates, refuses what HNS
// refuses with the HRESULT HNS returns, adds the policies HNS adds by
// itself, and forgets what a reboot forgets. Every behaviour names, in a
// comment, the research note and section it models (the project's notes
// hcsshim-hns.md and calico-windows.md, kept outside the repository). Where the
// research could not say what HNS does, the behaviour is an option or a
// documented assumption.
//
// The model works on hns.State, the agent's own view of HNS objects, so a
// test can compare Snapshot with what Diff wants, and String renders the
// whole state as sorted text for golden tests (the tailscale fake OS shape,
// style-anchors.md §1).
//
// Each Apply is one mutating call: it is numbered, recorded (Calls) and
// counted (MutatingCalls) whether it succeeds, is a no-op, fails, or is
// failed on purpose (FailCall, FailNext). Apply is atomic: it works on a
// copy of the state and keeps the copy only if everything succeeded (and,
// with Open, was saved), so a failed call never leaves half-made objects;
// the one exception is a batch of routes under QuirkRouteBatchPartial.
//
// Objects made by others (the CNI's pod endpoints, kube-proxy's remote
// endpoints and load balancers, the "nat" network) are seeded with
// AddNetwork, AddPodEndpoint, AddRemoteEndpoint and AddLoadBalancer; they
// are not recorded as calls, since they are not the agent's.
package hnsmem

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

var _ hns.Client = (*HNS)(nil)

// HRESULTs the model returns that package hns does not name, from
// virtualization/api/hcn/Reference/HCNHResult.md (hcsshim-hns.md §3,
// "Errors").
const (
	CodeInvalidNetwork        = 0x803B000A // INVALID_NETWORK
	CodeInvalidEndpoint       = 0x803B000C // INVALID_ENDPOINT
	CodeInvalidPolicyType     = 0x803B000E // INVALID_POLICY_TYPE
	CodeRequestUnsupported    = 0x803B0015 // REQUEST_UNSUPPORTED
	CodeInvalidIP             = 0x803B001E // INVALID_IP
	CodeAddrInvalidOrReserved = 0x803B002F // ADDR_INVALID_OR_RESERVED
)

const (
	defaultManagementAddress = "10.0.0.4"
	defaultVersion           = "15.4"

	// The first group of an ID says what the object is.
	idKindNetwork      uint32 = 1
	idKindEndpoint     uint32 = 2
	idKindLoadBalancer uint32 = 3
)

// HNS is an in-memory Host Networking Service. It is safe for concurrent
// use. The zero HNS is not usable: call New or Open.
type HNS struct {
	mu  sync.Mutex
	cfg config

	st  hns.State // canonical (State.Canonical) after every change
	seq uint64    // the ID counter: IDs and generated MACs derive from it

	calls    []Call
	mutating int // mutating calls since the last ResetCalls
	total    int // mutating calls ever: FailCall counts from it
	failAt   map[int]error
	failKind map[hns.Kind]error

	path string // "" unless Open
}

// Call is one call to HNS, as recorded.
type Call struct {
	// Method is the hcn function the call stands for: hcnCreateNetwork,
	// hcnDeleteNetwork, hcnModifyNetwork, hcnCreateEndpoint,
	// hcnDeleteEndpoint, hcnModifyEndpoint; a replace is
	// "hcnDeleteNetwork+hcnCreateNetwork" (one Apply, two HNS calls). Reads
	// are hcnEnumerateNetworks, hcnEnumerateEndpoints,
	// hcnEnumerateLoadBalancers (Snapshot) and "GET /globals/version"
	// (Features).
	Method string
	// Object is the name of the network or endpoint the call acts on.
	Object string
	// Request is what a modify call asks, e.g. "Add RemoteSubnetRoute
	// 10.244.2.0/24"; "" for creates, deletes and reads.
	Request string
	Err     error
}

func (c Call) String() string {
	s := c.Method
	if c.Object != "" {
		s += " " + c.Object
	}
	if c.Request != "" {
		s += ": " + c.Request
	}
	if c.Err != nil {
		s += " -> " + c.Err.Error()
	}
	return s
}

func (c Call) mutating() bool {
	switch c.Method {
	case "hcnEnumerateNetworks", "hcnEnumerateEndpoints", "hcnEnumerateLoadBalancers", methodGlobals:
		return false
	}
	return true
}

const methodGlobals = "GET /globals/version"

// An Option configures an HNS.
type Option func(*config)

type config struct {
	mgmt         netip.Addr
	refuseDelete bool
	latency      time.Duration
	features     hns.Features
	quirks       quirkSet
}

func defaults() config {
	return config{
		mgmt:         netip.MustParseAddr(defaultManagementAddress),
		refuseDelete: true,
		features:     hns.Features{V2API: true, RemoteRoute: true, VxlanPort: true, ACLRuleID: true, Version: defaultVersion},
	}
}

// ManagementAddress sets the host's management address, which HNS puts in
// the ProviderAddress policy it adds to every new Overlay network
// (hcsshim-hns.md §3 "Immutability": flannel reads back ProviderAddress,
// the management IP). The default is 10.0.0.4.
func ManagementAddress(a netip.Addr) Option { return func(c *config) { c.mgmt = a } }

// RefuseDeleteWithEndpoints says whether deleting (or replacing) a network
// that still has endpoints fails with ENTITY_HAS_REFERENCES (true, the
// default) or deletes the endpoints with it (false). What real HNS does is
// unverified: hcsshim-hns.md §3 "Deleting a network that still has
// endpoints" found no public log; 0x803B002C is the documented candidate,
// and flannel deletes networks without deleting endpoints first.
func RefuseDeleteWithEndpoints(refuse bool) Option {
	return func(c *config) { c.refuseDelete = refuse }
}

// AllowDeleteWithEndpoints is RefuseDeleteWithEndpoints(false): deleting
// or replacing a network deletes its endpoints with it.
func AllowDeleteWithEndpoints() Option { return RefuseDeleteWithEndpoints(false) }

// Latency makes every call (reads too) take d, honouring the context: a
// call whose context ends first returns ctx.Err() and changes nothing.
func Latency(d time.Duration) Option { return func(c *config) { c.latency = d } }

// WithFeatures sets what Features reports, and what the model accepts:
// without V2API every hcn call fails with REQUEST_UNSUPPORTED, without
// RemoteRoute a RemoteSubnetRoute policy and without VxlanPort a VxlanPort
// policy fail with INVALID_POLICY_TYPE (hcsshim-hns.md §3 "Feature
// checks": V2ApiSupported and RemoteSubnetSupported ≥9.2,
// VxlanPortSupported 10.3). The default is every feature, version "15.4"
// (WS2025, §3 "Observed versions"). ACLRuleID is only reported: §3 ties
// it to HNS ≥7.2 and nothing says what older HNS does with an Id.
func WithFeatures(f hns.Features) Option { return func(c *config) { c.features = f } }

// New returns an empty in-memory HNS that keeps its state in memory only.
func New(opts ...Option) *HNS {
	m := &HNS{cfg: defaults()}
	for _, o := range opts {
		o(&m.cfg)
	}
	return m
}

// Features reports the configured features. It is a read: recorded as
// "GET /globals/version" (how hcsshim learns the version, hcsshim-hns.md
// §3 "Feature checks"), not counted as mutating.
func (m *HNS) Features(ctx context.Context) (hns.Features, error) {
	err := wait(ctx, m.latency())
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, Call{Method: methodGlobals, Err: err})
	if err != nil {
		return hns.Features{}, err
	}
	return m.cfg.features, nil
}

// Snapshot returns a deep copy of every object, in canonical order
// (State.Canonical): callers may change it freely. It is a read, recorded
// as the three enumerations hcsshim makes (ListNetworks, ListEndpoints,
// ListLoadBalancers; hcsshim-hns.md §3 "Lifecycle API").
func (m *HNS) Snapshot(ctx context.Context) (*hns.State, error) {
	err := m.enumerate(ctx, "hcnEnumerateNetworks", "hcnEnumerateEndpoints", "hcnEnumerateLoadBalancers")
	defer m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	s := cloneState(&m.st)
	m.cfg.quirks.readBack(s)
	s.Canonical()
	return s, nil
}

// Endpoints returns a deep copy of every endpoint, as Snapshot reads them
// (quirks applied): the reads hnswin's Endpoints makes, recorded as
// hcnEnumerateNetworks and hcnEnumerateEndpoints.
func (m *HNS) Endpoints(ctx context.Context) ([]hns.Endpoint, error) {
	err := m.enumerate(ctx, "hcnEnumerateNetworks", "hcnEnumerateEndpoints")
	defer m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	s := cloneState(&hns.State{Networks: m.st.Networks, Endpoints: m.st.Endpoints})
	m.cfg.quirks.readBack(s)
	return s.Endpoints, nil
}

// enumerate is the start of a read: HNS's latency, then the enumerations
// methods, recorded (the first failing, without the v2 API). It returns
// with m.mu held; the caller unlocks.
func (m *HNS) enumerate(ctx context.Context, methods ...string) error {
	err := wait(ctx, m.latency())
	m.mu.Lock()
	if err == nil && !m.cfg.features.V2API {
		err = unsupported(methods[0])
	}
	if err != nil {
		m.calls = append(m.calls, Call{Method: methods[0], Err: err})
		return err
	}
	for _, meth := range methods {
		m.calls = append(m.calls, Call{Method: meth})
	}
	return nil
}

// Held returns a deep copy of what the model holds, before any read-side
// quirk (WithQuirks): the truth a test compares Snapshot's reading with.
// It is not a call HNS has, so it is not recorded.
func (m *HNS) Held() *hns.State {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := cloneState(&m.st)
	s.Canonical()
	return s
}

// Apply performs op as HNS would, atomically: either all of it happens or
// nothing does. An op whose effect is already there is a no-op (the
// hns.Client contract: "Calling it again after a failure is safe").
func (m *HNS) Apply(ctx context.Context, op hns.Op) error {
	method, object, request := describeCall(op)

	m.mu.Lock()
	m.mutating++
	m.total++
	injected, ok := m.failAt[m.total]
	delete(m.failAt, m.total)
	if !ok {
		injected, ok = m.failKind[op.Kind]
		delete(m.failKind, op.Kind)
	}
	lat := m.cfg.latency
	m.mu.Unlock()

	// Latency first: a caller that gives up leaves HNS as it was.
	err := wait(ctx, lat)
	if err == nil && ok {
		err = withCall(injected, method)
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case op.Kind == hns.KindRoutes && m.cfg.quirks.has(QuirkRouteBatchPartial) && m.cfg.features.V2API:
		err = m.partialBatch(op, err)
	case err == nil:
		err = m.transact(func(t *txn) error {
			if !t.cfg.features.V2API {
				return unsupported(method)
			}
			return t.apply(op)
		})
	}
	m.calls = append(m.calls, Call{Method: method, Object: object, Request: request, Err: err})
	return err
}

// partialBatch applies a batched route op under QuirkRouteBatchPartial:
// a batch that fails keeps the routes applied before the failure. A route
// HNS refuses fails the batch there; an injected failure (injected, not
// nil) lands the first k routes, k = the call's number modulo (routes+1),
// so that a test meets batches that landed in none, some and all of
// their routes and still failed. The caller holds m.mu.
func (m *HNS) partialBatch(op hns.Op, injected error) error {
	n := len(op.Routes)
	if injected != nil {
		n = m.total % (len(op.Routes) + 1)
	}
	var done int
	err := m.transact(func(t *txn) error {
		var err error
		done, err = t.applyRoutes(op, n)
		return err
	})
	if err == nil {
		return injected
	}
	if done > 0 { // keep what landed before the refused route
		if serr := m.transact(func(t *txn) error { _, err := t.applyRoutes(op, done); return err }); serr != nil {
			return serr
		}
	}
	return err
}

// transact runs f on a copy of the state and keeps the copy if f and the
// save (with Open) succeed. The caller holds m.mu.
func (m *HNS) transact(f func(*txn) error) error {
	t := &txn{st: copyState(&m.st, true), seq: m.seq, cfg: &m.cfg}
	if err := f(t); err != nil {
		return err
	}
	t.st.Canonical()
	if m.path != "" {
		if err := save(m.path, t.st, t.seq); err != nil {
			return err
		}
	}
	m.st, m.seq = *t.st, t.seq
	return nil
}

// FailCall makes the n-th mutating call from now (1-based: 1 is the next
// Apply) fail with err before it changes anything. An *hns.Error without a
// Call gets the failing call's method. Pass a Transient error to test
// retries.
func (m *HNS) FailCall(n int, err error) {
	if n < 1 {
		panic("hnsmem: FailCall: n must be ≥ 1")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failAt == nil {
		m.failAt = map[int]error{}
	}
	m.failAt[m.total+n] = err
}

// FailNext makes the next Apply of an op of kind fail with err before it
// changes anything (unless a FailCall claims that call first).
func (m *HNS) FailNext(kind hns.Kind, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failKind == nil {
		m.failKind = map[hns.Kind]error{}
	}
	m.failKind[kind] = err
}

// Calls returns the calls recorded since the last ResetCalls, in the
// order they finished.
func (m *HNS) Calls() []Call {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.calls)
}

// MutatingCalls is the number of Apply calls since the last ResetCalls,
// whatever their outcome.
func (m *HNS) MutatingCalls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mutating
}

// ResetCalls forgets the recorded calls. Pending FailCall failures keep
// their place: they count from when FailCall was called.
func (m *HNS) ResetCalls() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls, m.mutating = nil, 0
}

// Reboot models a host reboot: networks created NonPersistent (hcn Flags 8
// EnableNonPersistent, hcsshim-hns.md §2 network table; flannel creates
// its network so, §4 "flannel VXLAN") vanish, and their endpoints with
// them (an endpoint cannot outlive its network). Nothing else is cleared:
// persistent networks keep their policies and routes, and endpoints on
// them and load balancers stay, since the research says nothing of what
// HNS forgets of them (calico-windows.md §3 only reports Calico's own
// boot-time clean-up, done by node-service.ps1, not by HNS). Recorded
// calls and pending failures stay too.
func (m *HNS) Reboot() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.transact(func(t *txn) error {
		t.st.Networks = slices.DeleteFunc(t.st.Networks, func(n hns.Network) bool { return n.NonPersistent })
		t.st.Endpoints = slices.DeleteFunc(t.st.Endpoints, func(e hns.Endpoint) bool { return t.st.Network(e.Network) == nil })
		return nil
	})
}

// AddNetwork seeds a network made by someone else (the "nat" network,
// another agent's). It is validated like a create and gets an ID; an
// Overlay network without a ProviderAddress or DR MAC gets HNS's (see
// Apply); a name conflict is NETWORK_ALREADY_EXISTS. Not recorded.
func (m *HNS) AddNetwork(n hns.Network) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.transact(func(t *txn) error { return t.createNetwork("hcnCreateNetwork", &n, true) })
}

// Seed adds everything s holds, as others made it: its networks, then its
// endpoints (each with its policies, ACLs, MAC, flags and attachment),
// then its load balancers. s is what a snapshot of a real node reads (a
// capture, `hnsplan-agent capture`): HNS's IDs are not kept (the model
// gives its own), names and everything else are. Each object is
// validated like a create, but for the address: two endpoints of a
// network that share one (a stale endpoint a CNI failed to delete, whose
// address a new pod got: Azure/AKS#5653) are what a real node may hold,
// and are kept. The first object refused stops the seeding, with what was
// added before it kept. An endpoint's Attached and Health (a v1
// document's State) are kept. Not recorded.
func (m *HNS) Seed(s *hns.State) error {
	for i := range s.Networks {
		n := s.Networks[i]
		n.ID = ""
		if err := m.AddNetwork(n); err != nil {
			return fmt.Errorf("seeding network %q: %w", n.Name, err)
		}
	}
	for i := range s.Endpoints {
		e := s.Endpoints[i]
		e.ID = ""
		if err := m.seedEndpoint(e); err != nil {
			return fmt.Errorf("seeding endpoint %q: %w", e.Name, err)
		}
	}
	for _, lb := range s.LoadBalancers {
		if err := m.AddLoadBalancer(lb.ID, lb.VIP); err != nil {
			return fmt.Errorf("seeding load balancer %s: %w", lb.ID, err)
		}
	}
	return nil
}

// AddPodEndpoint seeds a pod endpoint as the CNI creates it (hcsshim-hns.md
// §4: the plugins create endpoints on an existing network, with
// ProviderAddress, OutBoundNAT, SDNRoute and ACL policies). ACL policies
// among policies become the endpoint's ACLs. An empty mac lets HNS choose.
// Validated like a create; not recorded.
func (m *HNS) AddPodEndpoint(network, name string, ip netip.Prefix, mac string, policies []plan.Policy) error {
	return m.addEndpoint(hns.Endpoint{Name: name, Network: network, IP: ip, MAC: mac, Policies: policies})
}

// AddRemoteEndpoint seeds a remote endpoint as kube-proxy creates it for a
// pod on another node (Flags RemoteEndpoint, usually a ProviderAddress
// policy; hcsshim-hns.md §4 "kube-proxy winkernel"). Its IP need not be in
// the network's subnets. Not recorded.
func (m *HNS) AddRemoteEndpoint(network, name string, ip netip.Prefix, mac string, policies []plan.Policy) error {
	return m.addEndpoint(hns.Endpoint{Name: name, Network: network, IP: ip, MAC: mac, Remote: true, Policies: policies})
}

func (m *HNS) seedEndpoint(e hns.Endpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.transact(func(t *txn) error {
		t.seeding = true
		return t.createEndpoint("hcnCreateEndpoint", &e)
	})
}

func (m *HNS) addEndpoint(e hns.Endpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.transact(func(t *txn) error { return t.createEndpoint("hcnCreateEndpoint", &e) })
}

// RemoveEndpoint deletes an endpoint as its owner would (the CNI's DEL,
// kube-proxy's clean-up). An absent endpoint is ENDPOINT_NOT_FOUND. Not
// recorded.
func (m *HNS) RemoveEndpoint(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.transact(func(t *txn) error {
		if t.st.Endpoint(name) == nil {
			return herr("hcnDeleteEndpoint", hns.CodeEndpointNotFound, "endpoint %q not found", name)
		}
		t.deleteEndpoint(name)
		return nil
	})
}

// AddLoadBalancer seeds one of kube-proxy's load balancers (hcsshim-hns.md
// §4 "kube-proxy winkernel"). An empty id gets a generated one. Not
// recorded.
func (m *HNS) AddLoadBalancer(id string, vip netip.Addr) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.transact(func(t *txn) error {
		if id == "" {
			id = t.newID(idKindLoadBalancer)
		}
		for _, lb := range t.st.LoadBalancers {
			if lb.ID == id {
				return fmt.Errorf("hnsmem: a load balancer with ID %s already exists", id)
			}
		}
		t.st.LoadBalancers = append(t.st.LoadBalancers, hns.LoadBalancer{ID: id, VIP: vip})
		return nil
	})
}

func (m *HNS) latency() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cfg.latency
}

// wait lets d pass unless ctx ends first.
func wait(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// withCall fills in the Call of an injected *hns.Error that has none.
func withCall(err error, method string) error {
	var e *hns.Error
	if errors.As(err, &e) && e.Call == "" && err == error(e) {
		c := *e
		c.Call = method
		return &c
	}
	if err == nil {
		return herr(method, 0x80004005, "injected failure") // E_FAIL
	}
	return err
}

func herr(call string, code uint32, format string, args ...any) *hns.Error {
	return &hns.Error{Call: call, Code: code, Msg: fmt.Sprintf(format, args...)}
}

// unsupported is what a host without the v2 API answers every hcn call
// (hcsshim-hns.md §3 "Feature checks": V2ApiSupported ≥9.2).
func unsupported(call string) error {
	return herr(call, CodeRequestUnsupported, "the HNS v2 API is not supported on this host")
}
