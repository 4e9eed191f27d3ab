// Package workload generates deterministic cluster workloads for the
// policy renderer's benchmarks and savings tests, and for measuring the
// CLI on them (`go run ./internal/synth/gen -workload big`): namespaces,
// pods with realistic labels and named container ports, and a mix of
// Kubernetes NetworkPolicies, Calico NetworkPolicies and
// GlobalNetworkPolicies in two tiers.
package workload

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/intent"
)

// Config sizes a generated workload.
type Config struct {
	Seed        uint64
	Namespaces  int // including kube-system, monitoring and ingress-nginx
	Pods        int
	PodsPerNode int
	K8sPolicies int // networking.k8s.io/v1 NetworkPolicies
	CalicoNPs   int // projectcalico.org/v3 NetworkPolicies
	GlobalNPs   int // projectcalico.org/v3 GlobalNetworkPolicies
}

// Big is the policy benchmark's cluster: 2,000 policies over 30,000 pods
// in 300 namespaces, 110 pods a node.
var Big = Config{Seed: 20260901, Namespaces: 300, Pods: 30_000, PodsPerNode: 110,
	K8sPolicies: 1700, CalicoNPs: 280, GlobalNPs: 20}

// Small is the savings tests' cluster: 1,000 endpoints, policies at the
// same density per namespace.
var Small = Config{Seed: 20260902, Namespaces: 10, Pods: 1000, PodsPerNode: 110,
	K8sPolicies: 57, CalicoNPs: 9, GlobalNPs: 8}

// A Workload is a generated cluster: its pods (with addresses), its
// namespaces' labels, its policies, and the pods of its first node.
type Workload struct {
	Pods       []*acl.Pod
	Namespaces map[string]map[string]string
	Manifests  intent.Manifests
	// Node holds the pods of one node (the first PodsPerNode of the
	// shuffled inventory), in pod order.
	Node      []*acl.Pod
	HostAddrs []netip.Addr
}

// appKind is a kind of application: its labels and container ports.
type appKind struct {
	name   string
	tier   string // web, api, backend, data
	role   string // "webserver", "client" or none
	ports  []acl.NamedPort
	weight int
}

const tcp, udp = 6, 17

var appCatalog = []appKind{
	{"frontend", "web", "webserver", []acl.NamedPort{np("http", tcp, 8080), np("https", tcp, 8443), np("metrics", tcp, 9090)}, 2},
	{"web", "web", "webserver", []acl.NamedPort{np("http", tcp, 80), np("metrics", tcp, 9113)}, 1},
	{"api", "api", "", []acl.NamedPort{np("http", tcp, 8000), np("grpc", tcp, 50051), np("metrics", tcp, 9090)}, 3},
	{"auth", "api", "", []acl.NamedPort{np("http", tcp, 8000), np("metrics", tcp, 9090)}, 1},
	{"worker", "backend", "client", []acl.NamedPort{np("metrics", tcp, 9090)}, 2},
	{"batch", "backend", "client", []acl.NamedPort{np("metrics", tcp, 9100)}, 1},
	{"postgres", "data", "", []acl.NamedPort{np("postgres", tcp, 5432), np("metrics", tcp, 9187)}, 1},
	{"redis", "data", "", []acl.NamedPort{np("redis", tcp, 6379), np("metrics", tcp, 9121)}, 1},
	{"kafka", "data", "", []acl.NamedPort{np("kafka", tcp, 9092), np("metrics", tcp, 9308)}, 1},
	{"search", "data", "", []acl.NamedPort{np("http", tcp, 9200), np("transport", tcp, 9300)}, 1},
}

var (
	teams = []string{"payments", "checkout", "catalog", "search", "identity", "ads", "mobile", "data", "ml", "growth",
		"billing", "support", "logistics", "pricing", "reviews", "media", "messaging", "risk", "infra", "web"}
	envs = []string{"prod", "prod", "prod", "staging", "staging", "dev"}
)

func np(name string, proto int, port uint16) acl.NamedPort {
	return acl.NamedPort{Name: name, Protocol: proto, Port: port}
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// Generate builds the workload cfg describes; the same cfg gives
// the same workload.
func Generate(cfg Config) *Workload {
	r := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	w := &Workload{Namespaces: map[string]map[string]string{}}

	// Namespaces: three platform ones, then team namespaces.
	type nsInfo struct {
		name, team, env string
		apps            []appKind
	}
	var nss []nsInfo
	nss = append(nss,
		nsInfo{name: "kube-system", team: "platform", env: "prod"},
		nsInfo{name: "monitoring", team: "platform", env: "prod"},
		nsInfo{name: "ingress-nginx", team: "platform", env: "prod"})
	totalWeight := 0
	for _, a := range appCatalog {
		totalWeight += a.weight
	}
	weightedApp := func() appKind {
		n := r.IntN(totalWeight)
		for _, a := range appCatalog {
			if n < a.weight {
				return a
			}
			n -= a.weight
		}
		panic("unreachable")
	}
	for i := len(nss); i < cfg.Namespaces; i++ {
		team := teams[i%len(teams)]
		ns := nsInfo{name: fmt.Sprintf("%s-%03d", team, i), team: team, env: pick(r, envs)}
		for n := 3 + r.IntN(5); len(ns.apps) < n; {
			a := weightedApp()
			if !slices.ContainsFunc(ns.apps, func(b appKind) bool { return b.name == a.name }) {
				ns.apps = append(ns.apps, a)
			}
		}
		nss = append(nss, ns)
	}
	for _, ns := range nss {
		w.Namespaces[ns.name] = map[string]string{"team": ns.team, "env": ns.env}
	}

	// Pods: a few platform pods, the rest spread over the team namespaces.
	platform := []struct {
		ns     string
		labels map[string]string
		ports  []acl.NamedPort
		count  int
	}{
		{"kube-system", map[string]string{"k8s-app": "kube-dns", "app": "coredns", "tier": "platform", "team": "platform"},
			[]acl.NamedPort{np("dns", udp, 53), np("dns-tcp", tcp, 53), np("metrics", tcp, 9153)}, max(2, cfg.Pods/1500)},
		{"monitoring", map[string]string{"app": "prometheus", "tier": "platform", "team": "platform"},
			[]acl.NamedPort{np("web", tcp, 9090)}, 2},
		{"ingress-nginx", map[string]string{"app": "ingress-nginx", "tier": "platform", "team": "platform", "role": "client"},
			[]acl.NamedPort{np("http", tcp, 80), np("https", tcp, 443), np("metrics", tcp, 10254)}, max(2, cfg.Pods/3000)},
	}
	for _, p := range platform {
		for k := 0; k < p.count; k++ {
			w.Pods = append(w.Pods, &acl.Pod{Namespace: p.ns, Name: fmt.Sprintf("%s-%d", p.labels["app"], k),
				Labels: p.labels, ServiceAccount: p.labels["app"], Ports: p.ports})
		}
	}
	for i := len(w.Pods); i < cfg.Pods; i++ {
		ns := nss[3+r.IntN(len(nss)-3)]
		a := ns.apps[r.IntN(len(ns.apps))]
		labels := map[string]string{"app": a.name, "tier": a.tier, "team": ns.team, "version": pick(r, []string{"v1", "v1", "v2"})}
		if a.role != "" {
			labels["role"] = a.role
		}
		w.Pods = append(w.Pods, &acl.Pod{Namespace: ns.name, Name: fmt.Sprintf("%s-%05d", a.name, i),
			Labels: labels, ServiceAccount: a.name, Ports: a.ports})
	}
	// Nodes: a shuffle, podsPerNode to a node, a /24 block each.
	perm := r.Perm(len(w.Pods))
	for k, i := range perm {
		node, slot := k/cfg.PodsPerNode, k%cfg.PodsPerNode
		base := netip.MustParseAddr("10.128.0.0").As4()
		v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(node)<<8 | uint32(slot+2)
		w.Pods[i].IP = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
		if node == 0 {
			w.Node = append(w.Node, w.Pods[i])
		}
	}
	w.HostAddrs = []netip.Addr{netip.MustParseAddr("10.240.0.10")}

	// Policies.
	m := &w.Manifests
	tierOrder, pass := 100.0, "Pass"
	m.Tiers = []intent.Tier{{ObjectMeta: metav1.ObjectMeta{Name: "security"},
		Spec: intent.TierSpec{Order: &tierOrder, DefaultAction: pass}}}
	for k := 0; k < cfg.K8sPolicies; k++ {
		ns := nss[k%len(nss)]
		m.NetworkPolicies = append(m.NetworkPolicies, k8sPolicy(r, k, k < len(nss), ns.name, ns.team, ns.apps))
	}
	for k := 0; k < cfg.CalicoNPs; k++ {
		ns := nss[3+k%(len(nss)-3)]
		m.CalicoPolicies = append(m.CalicoPolicies, calicoPolicy(r, k, ns.name, ns.team, ns.apps))
	}
	for k := 0; k < cfg.GlobalNPs; k++ {
		m.CalicoPolicies = append(m.CalicoPolicies, globalPolicy(k))
	}
	return w
}

func ptr[T any](v T) *T { return &v }

func labelSel(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func portNum(proto corev1.Protocol, n int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: ptr(proto), Port: ptr(intstr.FromInt32(n))}
}

func portName(proto corev1.Protocol, name string) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: ptr(proto), Port: ptr(intstr.FromString(name))}
}

// k8sPolicy is the k-th Kubernetes NetworkPolicy, in namespace ns; the
// first of each namespace is a default deny.
func k8sPolicy(r *rand.Rand, k int, first bool, ns, team string, apps []appKind) intent.NetworkPolicy {
	np := networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns}}
	spec := &np.Spec
	app := func() string {
		if len(apps) == 0 {
			return "coredns"
		}
		return apps[r.IntN(len(apps))].name
	}
	in, eg := networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress
	var name string
	switch t := r.IntN(12); {
	case first || t == 0: // every namespace gets a default deny first
		name = "default-deny"
		spec.PolicyTypes = []networkingv1.PolicyType{in}
		if r.IntN(5) < 2 {
			spec.PolicyTypes = append(spec.PolicyTypes, eg)
		}
	case t == 1 || t == 2: // app to app in the namespace, numeric and named ports
		name = "allow-app"
		spec.PodSelector = *labelSel("app", app())
		ports := []networkingv1.NetworkPolicyPort{portName(corev1.ProtocolTCP, "http")}
		if r.IntN(2) == 0 {
			ports = append(ports, portNum(corev1.ProtocolTCP, 8443), portNum(corev1.ProtocolTCP, 50051))
		}
		spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: labelSel("app", app())}, {PodSelector: labelSel("tier", "web")}},
			Ports: ports}}
	case t == 3: // monitoring scrapes everything
		name = "allow-monitoring"
		spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: labelSel("kubernetes.io/metadata.name", "monitoring"), PodSelector: labelSel("app", "prometheus")}},
			Ports: []networkingv1.NetworkPolicyPort{portName(corev1.ProtocolTCP, "metrics")}}}
	case t == 4: // the ingress controller reaches the web tier
		name = "allow-ingress"
		spec.PodSelector = *labelSel("tier", "web")
		spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: labelSel("kubernetes.io/metadata.name", "ingress-nginx")}},
			Ports: []networkingv1.NetworkPolicyPort{portNum(corev1.ProtocolTCP, 80), portNum(corev1.ProtocolTCP, 8080),
				portNum(corev1.ProtocolTCP, 8443)}}}
	case t == 5: // DNS
		name = "allow-dns"
		spec.PolicyTypes = []networkingv1.PolicyType{eg}
		spec.Egress = []networkingv1.NetworkPolicyEgressRule{{
			To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: labelSel("kubernetes.io/metadata.name", "kube-system"),
				PodSelector: labelSel("k8s-app", "kube-dns")}},
			Ports: []networkingv1.NetworkPolicyPort{portNum(corev1.ProtocolUDP, 53), portNum(corev1.ProtocolTCP, 53)}}}
	case t == 6: // the internet, not the private ranges
		name = "allow-internet"
		spec.PolicyTypes = []networkingv1.PolicyType{eg}
		spec.PodSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "api"}}}}
		spec.Egress = []networkingv1.NetworkPolicyEgressRule{{
			To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0",
				Except: []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.169.254/32"}}}},
			Ports: []networkingv1.NetworkPolicyPort{portNum(corev1.ProtocolTCP, 443), portNum(corev1.ProtocolTCP, 80)}}}
	case t == 7: // partners' networks
		name = "allow-partners"
		spec.PodSelector = *labelSel("tier", "api")
		p := portNum(corev1.ProtocolTCP, 8000)
		p.EndPort = ptr(int32(8010))
		spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: "203.0.113.0/24", Except: []string{"203.0.113.128/25"}}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "198.51.100.0/24"}}},
			Ports: []networkingv1.NetworkPolicyPort{p, portNum(corev1.ProtocolTCP, 443)}}}
	case t == 8: // the api tier reaches its data stores by port name
		name = "allow-data"
		spec.PolicyTypes = []networkingv1.PolicyType{eg}
		spec.PodSelector = *labelSel("tier", "api")
		spec.Egress = []networkingv1.NetworkPolicyEgressRule{{
			To: []networkingv1.NetworkPolicyPeer{{PodSelector: labelSel("tier", "data")}},
			Ports: []networkingv1.NetworkPolicyPort{portName(corev1.ProtocolTCP, "postgres"), portName(corev1.ProtocolTCP, "redis"),
				portName(corev1.ProtocolTCP, "kafka")}}}
	case t == 9: // the team's other namespaces, outside dev
		name = "allow-team"
		spec.PodSelector = *labelSel("app", app())
		spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{team}},
				{Key: "env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"dev"}}}}}},
			Ports: []networkingv1.NetworkPolicyPort{portNum(corev1.ProtocolTCP, 8000), portNum(corev1.ProtocolTCP, 50051),
				portName(corev1.ProtocolTCP, "grpc")}}}
	case t == 10: // node ports
		name = "allow-nodeports"
		spec.PodSelector = *labelSel("app", app())
		p := portNum(corev1.ProtocolTCP, 30000)
		p.EndPort = ptr(int32(32767))
		spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{p, portNum(corev1.ProtocolUDP, 30053)}}}
	default: // the namespace itself
		name = "allow-same-namespace"
		spec.PodSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "role", Operator: metav1.LabelSelectorOpExists}}}
		spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}}}
	}
	np.Name = fmt.Sprintf("%s-%d", name, k)
	return intent.NetworkPolicy{NetworkPolicy: np}
}

// calicoPolicy is the k-th Calico NetworkPolicy, in namespace ns: in the
// security tier (with Pass rules) or the default one.
func calicoPolicy(r *rand.Rand, k int, ns, team string, apps []appKind) intent.CalicoPolicy {
	cp := intent.CalicoPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns}}
	cp.Kind = "NetworkPolicy"
	order := float64(100 + r.IntN(800))
	cp.Spec.Order = &order
	proto := func(n string) *intent.Protocol { return &intent.Protocol{Name: n} }
	port := func(lo, hi uint16) intent.Port { return intent.Port{Min: lo, Max: hi} }
	named := func(n string) intent.Port { return intent.Port{Name: n} }
	app := apps[r.IntN(len(apps))].name
	switch r.IntN(5) {
	case 0: // the team's own guard: deny a few things, pass the team's traffic on
		cp.Name = fmt.Sprintf("team-guard-%d", k)
		cp.Spec.Tier = "security"
		cp.Spec.Selector = "all()"
		cp.Spec.Types = []string{"Ingress", "Egress"}
		cp.Spec.Ingress = []intent.Rule{
			{Action: "Deny", Source: intent.EntityRule{Nets: []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")}}},
			{Action: "Pass", Source: intent.EntityRule{Selector: "all()", NamespaceSelector: fmt.Sprintf("team == %q", team)}},
			{Action: "Deny", Protocol: proto("TCP"), Source: intent.EntityRule{NotNets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
				Destination: intent.EntityRule{Ports: []intent.Port{port(22, 22), port(3389, 3389)}}},
		}
		cp.Spec.Egress = []intent.Rule{
			{Action: "Deny", Destination: intent.EntityRule{Nets: []netip.Prefix{netip.MustParsePrefix("169.254.169.254/32")}}},
			{Action: "Pass", Destination: intent.EntityRule{Nets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}},
		}
	case 1: // an app's ingress, admin ports excepted
		cp.Name = fmt.Sprintf("app-ingress-%d", k)
		cp.Spec.Selector = fmt.Sprintf("app == %q", app)
		cp.Spec.Ingress = []intent.Rule{
			{Action: "Allow", Protocol: proto("TCP"), Source: intent.EntityRule{Selector: `tier == "web" || tier == "api"`},
				Destination: intent.EntityRule{Ports: []intent.Port{named("http"), port(8443, 8443)}}},
			{Action: "Allow", Protocol: proto("TCP"), Source: intent.EntityRule{Selector: "all()", NamespaceSelector: fmt.Sprintf("team == %q", team)},
				Destination: intent.EntityRule{NotPorts: []intent.Port{port(22, 22), port(3389, 3389), port(9090, 9100)}}},
		}
	case 2: // egress: the internet on 443, and the cache by name
		cp.Name = fmt.Sprintf("app-egress-%d", k)
		cp.Spec.Selector = fmt.Sprintf("app == %q", app)
		cp.Spec.Types = []string{"Egress"}
		cp.Spec.Egress = []intent.Rule{
			{Action: "Allow", Protocol: proto("TCP"), Destination: intent.EntityRule{
				NotNets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("169.254.0.0/16")},
				Ports:   []intent.Port{port(443, 443)}}},
			{Action: "Allow", Protocol: proto("TCP"), Destination: intent.EntityRule{Selector: `app == "redis"`, Ports: []intent.Port{named("redis")}}},
			{Action: "Allow", Protocol: proto("UDP"), Destination: intent.EntityRule{Selector: `k8s-app == "kube-dns"`,
				NamespaceSelector: `projectcalico.org/name == "kube-system"`, Ports: []intent.Port{port(53, 53)}}},
		}
	case 3: // the data tier: its clients only, and TCP only
		cp.Name = fmt.Sprintf("data-%d", k)
		cp.Spec.Selector = `tier == "data"`
		cp.Spec.Ingress = []intent.Rule{
			{Action: "Deny", NotProtocol: proto("TCP")},
			{Action: "Allow", Protocol: proto("TCP"), Source: intent.EntityRule{Selector: `tier == "api" || tier == "backend"`},
				Destination: intent.EntityRule{Ports: []intent.Port{named("postgres"), named("redis"), port(9092, 9092)}}},
		}
	default: // the security tier's view of one app
		cp.Name = fmt.Sprintf("app-guard-%d", k)
		cp.Spec.Tier = "security"
		cp.Spec.Selector = fmt.Sprintf("app == %q && version == \"v2\"", app)
		cp.Spec.Ingress = []intent.Rule{
			{Action: "Deny", Protocol: proto("TCP"), Source: intent.EntityRule{NotSelector: "has(team)"}},
			{Action: "Pass", Protocol: proto("TCP"), Destination: intent.EntityRule{Ports: []intent.Port{port(1, 1023)}}},
		}
	}
	return cp
}

// globalPolicy is the k-th GlobalNetworkPolicy.
func globalPolicy(k int) intent.CalicoPolicy {
	cp := intent.CalicoPolicy{Global: true}
	cp.Kind = "GlobalNetworkPolicy"
	order := float64(10 + k)
	cp.Spec.Order = &order
	proto := func(n string) *intent.Protocol { return &intent.Protocol{Name: n} }
	switch k {
	case 0:
		cp.Name = "quarantine"
		cp.Spec.Tier = "security"
		cp.Spec.Selector = `quarantine == "true"`
		cp.Spec.Types = []string{"Ingress", "Egress"}
		cp.Spec.Ingress = []intent.Rule{{Action: "Deny"}}
		cp.Spec.Egress = []intent.Rule{{Action: "Deny"}}
	case 1:
		cp.Name = "deny-metadata"
		cp.Spec.Tier = "security"
		cp.Spec.Selector = "all()"
		cp.Spec.Types = []string{"Egress"}
		cp.Spec.Egress = []intent.Rule{{Action: "Deny", Destination: intent.EntityRule{Nets: []netip.Prefix{netip.MustParsePrefix("169.254.169.254/32")}}}}
	case 2:
		cp.Name = "block-admin-ports"
		cp.Spec.Tier = "security"
		cp.Spec.Selector = "all()"
		cp.Spec.Ingress = []intent.Rule{{Action: "Deny", Protocol: proto("TCP"),
			Source:      intent.EntityRule{NotNets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
			Destination: intent.EntityRule{Ports: []intent.Port{{Min: 22, Max: 22}, {Min: 3389, Max: 3389}, {Min: 5985, Max: 5986}}}}}
	case 3:
		cp.Name = "platform-pass"
		cp.Spec.Tier = "security"
		cp.Spec.Selector = "all()"
		cp.Spec.NamespaceSelector = `team == "platform"`
		cp.Spec.Types = []string{"Ingress", "Egress"}
		cp.Spec.Ingress = []intent.Rule{{Action: "Pass"}}
		cp.Spec.Egress = []intent.Rule{{Action: "Pass"}}
	case 4:
		cp.Name = "allow-monitoring"
		cp.Spec.Selector = "has(app)"
		cp.Spec.Ingress = []intent.Rule{{Action: "Allow", Protocol: proto("TCP"),
			Source:      intent.EntityRule{Selector: `app == "prometheus"`, NamespaceSelector: `team == "platform"`},
			Destination: intent.EntityRule{Ports: []intent.Port{{Name: "metrics"}}}}}
	case 5:
		cp.Name = "default-deny"
		order = 5000
		cp.Spec.Selector = `projectcalico.org/namespace not in {"kube-system", "monitoring"}`
		cp.Spec.Types = []string{"Ingress", "Egress"}
	default:
		team := teams[(k-6)%len(teams)]
		cp.Name = "team-" + team
		cp.Spec.Selector = "all()"
		cp.Spec.NamespaceSelector = fmt.Sprintf("team == %q", team)
		cp.Spec.Ingress = []intent.Rule{{Action: "Allow", Source: intent.EntityRule{Selector: fmt.Sprintf("team == %q", team)}}}
		cp.Spec.Egress = []intent.Rule{{Action: "Allow", Destination: intent.EntityRule{Selector: fmt.Sprintf("team == %q", team)}}}
	}
	return cp
}
