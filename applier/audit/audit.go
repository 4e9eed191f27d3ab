// Package audit checks a node's HNS for what operators of Windows nodes
// meet most and cannot see without a remote desktop: addresses two
// endpoints hold (a stale endpoint whose address a new pod got,
// Azure/AKS#5653), pod endpoints whose pod is gone (a CNI DEL that never
// came, calico#9142), endpoints HNS itself reports failed, the agent's
// network bound to the wrong adapter or to one that is gone
// (calico#11840), networks and endpoints no plan names (a killed CNI ADD,
// azure-container-networking#4540), and kube-proxy's load balancers.
//
// Of is a pure function of one HNS snapshot, the plan, the pods and the
// host's adapters: the agent runs it on the snapshot each reconcile pass
// already reads (no HNS call of its own), and `hnsplan-agent audit` runs
// it once. It only reports; Cleanup decides which orphan endpoints an
// opt-in clean-up may remove.
package audit

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/hnsplan/hnsplan/applier/hns"
)

// Kinds of finding. The first five are problems (the audit command exits
// 1 on any); foreign objects are reported and never touched.
const (
	KindDuplicateIP     = "duplicate-ip"
	KindOrphan          = "orphan-endpoint"
	KindEndpointState   = "endpoint-state"
	KindAdapterWrong    = "adapter-wrong"
	KindAdapterMissing  = "adapter-missing"
	KindForeignNetwork  = "foreign-network"
	KindForeignEndpoint = "foreign-endpoint"
)

// Kinds lists every kind, problems first, in the order reports show them.
var Kinds = []string{KindDuplicateIP, KindOrphan, KindEndpointState, KindAdapterWrong, KindAdapterMissing, KindForeignNetwork, KindForeignEndpoint}

// IsProblem says whether findings of kind are problems.
func IsProblem(kind string) bool { return kind != KindForeignNetwork && kind != KindForeignEndpoint }

// MaxItems bounds the items a report lists per kind; Count says how many
// there are in all.
const MaxItems = 20

// MaxSummary bounds Summary (the Node annotation), in bytes.
const MaxSummary = 1024

// Pod is a pod whose address explains a pod endpoint.
type Pod struct {
	Name string // namespace/name
	Node string // "" when unknown (a plan's pods are its node's)
	IP   netip.Addr
}

// Input is what an audit reads.
type Input struct {
	Node string
	// Have is the HNS snapshot.
	Have *hns.State
	// Want is the plan's (hns.WantFromPlan): the agent's network and host
	// endpoint, or, for a policy-only plan, the networks it matches.
	// nil: no plan; every network is foreign and nothing is an orphan.
	Want *hns.Want
	// Plan is the plan's digest, for the report.
	Plan string
	// Pods are the pods whose addresses explain endpoints; PodsFrom says
	// where they come from: "cluster" (the agent's synced caches, every
	// node's pods) or "plan" (the plan's endpoints, this node's, as the
	// inventory had them at compile time).
	Pods     []Pod
	PodsFrom string
	// Adapters are the host's network adapters by name; AdaptersKnown is
	// false where they cannot be listed (off Windows, the in-memory HNS).
	Adapters      []string
	AdaptersKnown bool
	// Seen is when each orphan endpoint (by Key) was first seen orphaned:
	// its age. Now is the audit's time.
	Seen map[string]time.Time
	Now  time.Time
}

// Item is one finding.
type Item struct {
	Network  string     `json:"network,omitempty"`
	Endpoint string     `json:"endpoint,omitempty"`
	ID       string     `json:"id,omitempty"`
	IP       netip.Addr `json:"ip,omitzero"`
	// Since is when an orphan was first seen orphaned (the agent's record
	// in its state directory; HNS keeps no creation time).
	Since  time.Time `json:"since,omitzero"`
	Detail string    `json:"detail"`
}

// Finding is the findings of one kind: how many, and the first MaxItems.
type Finding struct {
	Kind    string `json:"kind"`
	Problem bool   `json:"problem"`
	Count   int    `json:"count"`
	Items   []Item `json:"items"`
}

// Report is an audit's outcome.
type Report struct {
	Node     string    `json:"node"`
	Plan     string    `json:"plan,omitempty"`
	At       time.Time `json:"at"`
	PodsFrom string    `json:"podsFrom"`
	// Problems counts the findings of the problem kinds.
	Problems int       `json:"problems"`
	Findings []Finding `json:"findings"`
	// LoadBalancers is how many load balancers kube-proxy holds in HNS.
	// The agent does not watch Services, so it is not compared with them.
	LoadBalancers int `json:"loadBalancers"`
	// NotChecked says what the audit could not check, and why.
	NotChecked []string `json:"notChecked,omitempty"`

	// Orphans are every orphan endpoint (not only the first MaxItems),
	// for Cleanup and the first-seen record.
	Orphans []Orphan `json:"-"`
}

// Orphan is a pod endpoint whose address is no pod's on its node.
type Orphan struct {
	Key      string // network/name: the first-seen record's key
	Endpoint *hns.Endpoint
	Since    time.Time
}

// Key is an endpoint's key in the first-seen record: HNS objects are
// keyed by name, within their network.
func Key(e *hns.Endpoint) string { return e.Network + "/" + e.Name }

// Of audits in. It reads nothing but in, and changes nothing.
func Of(in Input) *Report {
	r := &Report{Node: in.Node, Plan: in.Plan, At: in.Now, PodsFrom: in.PodsFrom}
	have := in.Have
	if have == nil {
		have = &hns.State{}
	}
	found := map[string][]Item{}
	add := func(kind string, it Item) { found[kind] = append(found[kind], it) }
	named := func(network string) bool {
		w := in.Want
		switch {
		case w == nil:
			return false
		case w.Foreign != nil:
			return w.Foreign.Match(network)
		}
		return network == w.Network.Name
	}

	// Addresses two endpoints of a network hold, local or remote.
	type netAddr struct {
		network string
		addr    netip.Addr
	}
	// Counted first, listed second: a node's thousands of remote
	// endpoints make no list of their own.
	count := make(map[netAddr]int, len(have.Endpoints))
	for i := range have.Endpoints {
		if e := &have.Endpoints[i]; e.IP.IsValid() {
			count[netAddr{e.Network, e.IP.Addr()}]++
		}
	}
	holders := map[netAddr][]*hns.Endpoint{}
	for i := range have.Endpoints {
		e := &have.Endpoints[i]
		if k := (netAddr{e.Network, e.IP.Addr()}); e.IP.IsValid() && count[k] > 1 {
			holders[k] = append(holders[k], e)
		}
	}
	for k, eps := range holders {
		var names []string
		for _, e := range eps {
			where := "local"
			if e.Remote {
				where = "remote"
			}
			names = append(names, e.Name+" ("+where+")")
		}
		slices.Sort(names)
		add(KindDuplicateIP, Item{Network: k.network, IP: k.addr,
			Detail: fmt.Sprintf("%s is held by %d endpoints: %s; the one no sandbox uses is stale", k.addr, len(eps), strings.Join(names, ", "))})
	}

	// Pod endpoints whose address is no pod's on this node.
	if in.Want != nil {
		pods := map[netip.Addr]string{}
		for _, p := range in.Pods {
			if p.IP.IsValid() && (p.Node == "" || p.Node == in.Node) {
				pods[p.IP] = p.Name
			}
		}
		for _, e := range hns.PodEndpoints(have, in.Want) {
			if !e.IP.IsValid() || pods[e.IP.Addr()] != "" || (in.Want.Foreign == nil && isHostEndpoint(e, in.Want)) {
				continue
			}
			o := Orphan{Key: Key(e), Endpoint: e, Since: in.Now}
			if t, ok := in.Seen[o.Key]; ok && !t.After(in.Now) {
				o.Since = t
			}
			r.Orphans = append(r.Orphans, o)
			add(KindOrphan, Item{Network: e.Network, Endpoint: e.Name, ID: e.ID, IP: e.IP.Addr(), Since: o.Since,
				Detail: fmt.Sprintf("no pod of node %s has %s (pods from the %s); orphaned for %s", in.Node, e.IP.Addr(), in.PodsFrom, age(in.Now.Sub(o.Since)))})
		}
		slices.SortFunc(r.Orphans, func(a, b Orphan) int { return strings.Compare(a.Key, b.Key) })
	}

	// What HNS says of its endpoints, where it says it.
	told := 0
	for i := range have.Endpoints {
		e := &have.Endpoints[i]
		if e.Health == nil {
			continue
		}
		told++
		if why, bad := e.Health.Bad(); bad {
			add(KindEndpointState, Item{Network: e.Network, Endpoint: e.Name, ID: e.ID, IP: e.IP.Addr(), Detail: "HNS reports " + why})
		}
	}
	if told == 0 && len(have.Endpoints) > 0 {
		r.NotChecked = append(r.NotChecked, KindEndpointState+": HNS tells no endpoint's state here (only its v1 documents carry State and Health; the v2 API the agent reads does not)")
	}

	// The agent's network and its adapter.
	if w := in.Want; w != nil && w.Foreign == nil {
		if n := have.Network(w.Network.Name); n != nil {
			switch {
			case w.Network.AdapterName != "" && !strings.EqualFold(n.AdapterName, w.Network.AdapterName):
				add(KindAdapterWrong, Item{Network: n.Name, Detail: fmt.Sprintf("bound to adapter %q, the plan says %q", orNone(n.AdapterName), w.Network.AdapterName)})
			case n.AdapterName != "" && in.AdaptersKnown && !slices.ContainsFunc(in.Adapters, func(a string) bool { return strings.EqualFold(a, n.AdapterName) }):
				add(KindAdapterMissing, Item{Network: n.Name, Detail: fmt.Sprintf("bound to adapter %q, which the host no longer has (it has %s)", n.AdapterName, list(in.Adapters))})
			case n.AdapterName != "" && !in.AdaptersKnown:
				r.NotChecked = append(r.NotChecked, KindAdapterMissing+": the host's adapters cannot be listed here (only the host's HNS on Windows)")
			}
		}
	}

	// What no plan names.
	for i := range have.Networks {
		n := &have.Networks[i]
		if !named(n.Name) {
			add(KindForeignNetwork, Item{Network: n.Name, ID: n.ID, Detail: fmt.Sprintf("%s network no plan names: reported, never touched", n.Type)})
		}
	}
	for i := range have.Endpoints {
		e := &have.Endpoints[i]
		if !named(e.Network) {
			add(KindForeignEndpoint, Item{Network: e.Network, Endpoint: e.Name, ID: e.ID, IP: e.IP.Addr(), Detail: "on a network no plan names: reported, never touched"})
		}
	}
	r.LoadBalancers = len(have.LoadBalancers)

	for _, kind := range Kinds {
		items := found[kind]
		slices.SortFunc(items, compareItems)
		f := Finding{Kind: kind, Problem: IsProblem(kind), Count: len(items), Items: items[:min(len(items), MaxItems)]}
		if f.Items == nil {
			f.Items = []Item{}
		}
		if f.Problem {
			r.Problems += f.Count
		}
		r.Findings = append(r.Findings, f)
	}
	return r
}

func isHostEndpoint(e *hns.Endpoint, w *hns.Want) bool {
	return e.Name == w.HostEndpoint.Name || (e.HostAttached && w.HostEndpoint.HostAttached)
}

func compareItems(a, b Item) int {
	return cmp.Or(strings.Compare(a.Network, b.Network), a.IP.Compare(b.IP), strings.Compare(a.Endpoint, b.Endpoint), strings.Compare(a.ID, b.ID))
}

// Finding returns the findings of kind.
func (r *Report) Finding(kind string) Finding {
	for _, f := range r.Findings {
		if f.Kind == kind {
			return f
		}
	}
	return Finding{Kind: kind, Problem: IsProblem(kind)}
}

// Summary is the report in one line of at most MaxSummary bytes, for the
// Node annotation hnsplan.io/audit: the counts of each kind found and the
// first item of each problem kind. It holds no time, so it changes only
// when what was found changes.
func (r *Report) Summary() string {
	var parts []string
	for _, f := range r.Findings {
		if f.Count == 0 {
			continue
		}
		s := fmt.Sprintf("%s %d", f.Kind, f.Count)
		if f.Problem && len(f.Items) > 0 {
			s += " (" + f.Items[0].short() + ")"
		}
		parts = append(parts, s)
	}
	head := "clean"
	if r.Problems > 0 {
		head = fmt.Sprintf("%d problems", r.Problems)
	}
	s := head
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, "; ")
	}
	if len(s) > MaxSummary {
		const more = "… (hnsplan-agent audit lists all)"
		cut := MaxSummary - len(more)
		for cut > 0 && !utf8Start(s[cut]) {
			cut--
		}
		s = s[:cut] + more
	}
	return s
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// short names an item in a few words.
func (it Item) short() string {
	switch {
	case it.Endpoint != "" && it.IP.IsValid():
		return it.Endpoint + " " + it.IP.String()
	case it.Endpoint != "":
		return it.Endpoint
	case it.IP.IsValid():
		return it.Network + " " + it.IP.String()
	}
	return it.Network
}

// ProblemKey identifies the problems found, for telling a new set from
// the one reported already: the same problems give the same key.
func (r *Report) ProblemKey() string {
	var b strings.Builder
	for _, f := range r.Findings {
		if !f.Problem || f.Count == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s=%d:", f.Kind, f.Count)
		for _, it := range f.Items {
			fmt.Fprintf(&b, "%s/%s/%s,", it.Network, it.Endpoint, it.IP)
		}
		b.WriteByte(';')
	}
	return b.String()
}

func age(d time.Duration) string {
	if d < time.Second {
		return "less than a second (first seen now)"
	}
	return d.Round(time.Second).String()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	if len(s) > 5 {
		return strings.Join(s[:5], ", ") + fmt.Sprintf(" and %d more", len(s)-5)
	}
	return strings.Join(s, ", ")
}
