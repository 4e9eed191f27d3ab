package hnswin

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/applier/hns"
)

// CaptureFormat is the format of a Capture document.
const CaptureFormat = "hnsplan-capture/1"

// Capture is what `hnsplan-agent capture` writes: every HNS object as HNS
// writes it (its v2 JSON, unchanged when captured from the host's HNS),
// for bug reports and new test fixtures. DecodeCapture reads it back into
// the model through the same decoder as Snapshot.
type Capture struct {
	Format string `json:"format"`
	// Source is "hnswin" (the host's HNS: hcn's documents as they came) or
	// "hnsmem" (the in-memory HNS, rendered by EncodeState).
	Source        string            `json:"source"`
	Features      hns.Features      `json:"features"`
	Networks      []json.RawMessage `json:"networks"`
	Endpoints     []json.RawMessage `json:"endpoints"`
	LoadBalancers []json.RawMessage `json:"loadBalancers"`
	Namespaces    []json.RawMessage `json:"namespaces,omitempty"`
}

// wireNamespace is a namespace as HNS writes it.
type wireNamespace struct {
	ID        string `json:"ID"`
	Type      string
	Resources []struct {
		Type string
		Data json.RawMessage
	}
}

// DecodeCapture reads a Capture into the model, as Snapshot would have.
func DecodeCapture(b []byte) (*hns.State, error) {
	var c Capture
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	if c.Format != CaptureFormat {
		return nil, fmt.Errorf("capture: format %q, want %q", c.Format, CaptureFormat)
	}
	st := &hns.State{}
	for _, raw := range c.Networks {
		n, err := decodeNetwork(raw, c.Features.VxlanPort)
		if err != nil {
			return nil, fmt.Errorf("capture: %w", err)
		}
		st.Networks = append(st.Networks, n)
	}
	byID := make(map[string]*hns.Network, len(st.Networks))
	for i := range st.Networks {
		byID[strings.ToLower(st.Networks[i].ID)] = &st.Networks[i]
	}
	hostNS, attached := map[string]bool{}, map[string]bool{}
	for _, raw := range c.Namespaces {
		var ns wireNamespace
		if err := json.Unmarshal(raw, &ns); err != nil {
			return nil, fmt.Errorf("capture: namespace: %w", err)
		}
		if ns.Type != "HostDefault" {
			continue
		}
		hostNS[strings.ToLower(ns.ID)] = true
		for _, r := range ns.Resources {
			var e struct{ Id string }
			if r.Type == "Endpoint" && json.Unmarshal(r.Data, &e) == nil {
				attached[strings.ToLower(e.Id)] = true
			}
		}
	}
	for _, raw := range c.Endpoints {
		var head struct {
			ID                   string `json:"ID"`
			HostComputeNamespace string
		}
		if err := json.Unmarshal(raw, &head); err == nil && hostNS[strings.ToLower(head.HostComputeNamespace)] {
			attached[strings.ToLower(head.ID)] = true
		}
		e, err := decodeEndpoint(raw, byID, attached)
		if err != nil {
			return nil, fmt.Errorf("capture: %w", err)
		}
		st.Endpoints = append(st.Endpoints, e)
	}
	for _, raw := range c.LoadBalancers {
		lb, err := decodeLoadBalancer(raw)
		if err != nil {
			return nil, fmt.Errorf("capture: %w", err)
		}
		st.LoadBalancers = append(st.LoadBalancers, lb)
	}
	st.Canonical()
	return st, nil
}

// Documents HNS writes, for EncodeState (hcn's JSON field names).
type (
	encNetwork struct {
		ID            string      `json:"ID,omitempty"`
		Name          string      `json:"Name"`
		Type          string      `json:"Type"`
		Policies      []rawPolicy `json:"Policies,omitempty"`
		Ipams         []encIpam   `json:"Ipams,omitempty"`
		Flags         uint32      `json:"Flags,omitempty"`
		SchemaVersion struct{ Major, Minor int }
	}
	encIpam struct {
		Type    string      `json:"Type"`
		Subnets []encSubnet `json:"Subnets"`
	}
	encSubnet struct {
		IpAddressPrefix string      `json:"IpAddressPrefix"`
		Policies        []rawPolicy `json:"Policies,omitempty"`
		Routes          []encRoute  `json:"Routes,omitempty"`
	}
	encRoute struct {
		NextHop           string `json:"NextHop"`
		DestinationPrefix string `json:"DestinationPrefix"`
	}
	encEndpoint struct {
		ID                   string        `json:"ID,omitempty"`
		Name                 string        `json:"Name"`
		HostComputeNetwork   string        `json:"HostComputeNetwork,omitempty"`
		HostComputeNamespace string        `json:"HostComputeNamespace,omitempty"`
		Policies             []rawPolicy   `json:"Policies,omitempty"`
		IpConfigurations     []encIPConfig `json:"IpConfigurations,omitempty"`
		MacAddress           string        `json:"MacAddress,omitempty"`
		Flags                uint32        `json:"Flags,omitempty"`
		SchemaVersion        struct{ Major, Minor int }
		// v1's State and Health, only for a model state that holds them
		// (seeded from a v1 document): HNS's v2 documents carry neither.
		State  *uint16    `json:"State,omitempty"`
		Health *encHealth `json:"Health,omitempty"`
	}
	encHealth struct {
		LastErrorCode uint32 `json:"LastErrorCode"`
	}
	encIPConfig struct {
		IpAddress    string `json:"IpAddress"`
		PrefixLength uint8  `json:"PrefixLength"`
	}
)

// hostDefaultID is the ID EncodeState gives the host's default namespace,
// containerNamespaceID the one it names for an endpoint attached to a
// container's (a namespace it does not list, as a capture may not).
const (
	hostDefaultID        = "00000000-0000-0000-0000-00000000d0d0"
	containerNamespaceID = "00000000-0000-0000-0000-00000000c0c0"
)

// EncodeState renders a state of the model (the in-memory HNS's) as the
// documents HNS would write for it, v2: networks with their policies
// (those HNS adds included), endpoints with their policies and ACLs, the
// HostDefault namespace holding the host-attached endpoints, and load
// balancers.
func EncodeState(st *hns.State, f hns.Features, source string) (*Capture, error) {
	c := &Capture{Format: CaptureFormat, Source: source, Features: f,
		Networks: []json.RawMessage{}, Endpoints: []json.RawMessage{}, LoadBalancers: []json.RawMessage{}}
	idOf := map[string]string{}
	for i := range st.Networks {
		n := &st.Networks[i]
		w := encNetwork{ID: n.ID, Name: n.Name, Type: n.Type}
		w.SchemaVersion.Major = 2
		if w.ID == "" {
			w.ID = n.Name
		}
		idOf[n.Name] = w.ID
		if n.NonPersistent {
			w.Flags |= flagNonPersistent
		}
		ps, err := netPolicies(n, true)
		if err != nil {
			return nil, fmt.Errorf("network %q: %w", n.Name, err)
		}
		for _, r := range n.RemoteRoutes {
			b, err := json.Marshal(remoteRouteSettings{DestinationPrefix: r.Prefix.String(), IsolationId: r.VNI, ProviderAddress: r.ProviderAddress.String(), DistributedRouterMacAddress: r.DRMAC})
			if err != nil {
				return nil, err
			}
			ps = append(ps, rawPolicy{Type: "RemoteSubnetRoute", Settings: b})
		}
		if n.ProviderAddress.IsValid() {
			b, _ := json.Marshal(providerAddrSettings{ProviderAddress: n.ProviderAddress.String()})
			ps = append(ps, rawPolicy{Type: "ProviderAddress", Settings: b})
		}
		if n.DRMAC != "" {
			b, _ := json.Marshal(drMACSettings{Address: n.DRMAC})
			ps = append(ps, rawPolicy{Type: typeDrMacAddress, Settings: b})
		}
		w.Policies = ps
		var subs []encSubnet
		for _, s := range n.Subnets {
			es := encSubnet{IpAddressPrefix: s.Prefix.String()}
			if s.Gateway.IsValid() {
				es.Routes = []encRoute{{NextHop: s.Gateway.String(), DestinationPrefix: defaultRoute(s.Gateway)}}
			}
			if s.VNI != 0 {
				b, _ := json.Marshal(vsidSettings{IsolationId: s.VNI})
				es.Policies = []rawPolicy{{Type: "VSID", Settings: b}}
			}
			subs = append(subs, es)
		}
		if len(subs) > 0 {
			w.Ipams = []encIpam{{Type: "Static", Subnets: subs}}
		}
		b, err := json.Marshal(w)
		if err != nil {
			return nil, err
		}
		c.Networks = append(c.Networks, b)
	}
	var attached []string
	for i := range st.Endpoints {
		e := &st.Endpoints[i]
		w := encEndpoint{ID: e.ID, Name: e.Name, HostComputeNetwork: idOf[e.Network], MacAddress: e.MAC}
		w.SchemaVersion.Major = 2
		if e.Remote {
			w.Flags |= flagRemoteEndpoint
		}
		if e.IP.IsValid() {
			w.IpConfigurations = []encIPConfig{{IpAddress: e.IP.Addr().String(), PrefixLength: uint8(e.IP.Bits())}}
		}
		if e.HostAttached {
			w.HostComputeNamespace = hostDefaultID
			attached = append(attached, e.ID)
		} else if e.Attached {
			w.HostComputeNamespace = containerNamespaceID
		}
		if h := e.Health; h != nil {
			w.Health = &encHealth{LastErrorCode: h.LastErrorCode}
			if i := slices.Index(v1EndpointStates, h.State); i >= 0 {
				st := uint16(i)
				w.State = &st
			}
		}
		ps, err := endpointPolicies(e.Policies, e.ACLs)
		if err != nil {
			return nil, fmt.Errorf("endpoint %q: %w", e.Name, err)
		}
		w.Policies = ps
		b, err := json.Marshal(w)
		if err != nil {
			return nil, err
		}
		c.Endpoints = append(c.Endpoints, b)
	}
	if len(attached) > 0 {
		ns := map[string]any{"ID": hostDefaultID, "Type": "HostDefault"}
		var res []map[string]any
		for _, id := range attached {
			res = append(res, map[string]any{"Type": "Endpoint", "Data": map[string]string{"ID": id}})
		}
		ns["Resources"] = res
		b, err := json.Marshal(ns)
		if err != nil {
			return nil, err
		}
		c.Namespaces = append(c.Namespaces, b)
	}
	for _, lb := range st.LoadBalancers {
		w := wireLoadBalancer{ID: lb.ID}
		if lb.VIP.IsValid() {
			w.FrontendVIPs = []string{lb.VIP.String()}
		}
		b, err := json.Marshal(w)
		if err != nil {
			return nil, err
		}
		c.LoadBalancers = append(c.LoadBalancers, b)
	}
	return c, nil
}

// CaptureOf captures c: the host's HNS (a Client) as HNS wrote its
// documents, any other hns.Client (the in-memory HNS) rendered by
// EncodeState from a snapshot. `hnsplan-agent capture` and `diags` both
// call it.
func CaptureOf(ctx context.Context, c hns.Client) (*Capture, error) {
	if cp, ok := c.(interface {
		Capture(context.Context) (*Capture, error)
	}); ok {
		return cp.Capture(ctx)
	}
	features, err := c.Features(ctx)
	if err != nil {
		return nil, fmt.Errorf("read HNS: %w", err)
	}
	st, err := c.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("read HNS: %w", err)
	}
	return EncodeState(st, features, "hnsmem")
}
