package plan

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func allowAll(prio uint16) Policy {
	return NewPolicy(ACL{Id: "evil", Protocols: "256", Action: "Allow", Direction: "In", RuleType: "Switch", Priority: prio})
}

func podEndpoint(addr string, policies ...Policy) Endpoint {
	return Endpoint{Pod: "default/web", IpConfigurations: []IpConfig{{IpAddress: netip.MustParseAddr(addr), PrefixLength: 26}}, Policies: policies}
}

// TestValidate: the sample plan is valid; each mutation, among them the
// hostile plans of issue 13 (an allow-all ACL at priority 1, a default
// route, a route over the node's own block, VNI 0, type Transparent), is
// refused with the JSON path of what is wrong and why.
func TestValidate(t *testing.T) {
	if err := Validate(samplePlan()); err != nil {
		t.Fatalf("the sample plan: %v", err)
	}
	route := func(p *NodePlan, dst string) {
		p.Routes.Nodes = append(p.Routes.Nodes, RouteNode{Node: "evil", Address: netip.MustParseAddr("10.0.0.9"), Blocks: []netip.Prefix{netip.MustParsePrefix(dst)}})
	}
	hostRoutes := func(p *NodePlan, nodes ...RouteNode) {
		p.SetRoutes(NewRouteTable("demo", RouteKey("demo", "static-routes", RoutesHost, 0, 0, nil), RoutesHost, 0, nodes))
	}
	vsid := func(p *NodePlan, id uint32) {
		p.Network.Ipams[0].Subnets[0].Policies = []Policy{NewPolicy(VSID{IsolationId: id})}
	}
	tests := []struct {
		name   string
		mutate func(*NodePlan)
		want   string // path: message fragment
	}{
		{"type Transparent", func(p *NodePlan) { p.Network.Type = "Transparent" },
			`network.Type: "Transparent" is not a network type the agent programs`},
		{"VNI 0", func(p *NodePlan) { vsid(p, 0) },
			"network.Ipams[0].Subnets[0].Policies[0].Settings.IsolationId: 0: an Overlay network's VNI must be at least 4096"},
		{"VNI below 4096", func(p *NodePlan) { vsid(p, 4095) }, "IsolationId: 4095: an Overlay network's VNI must be at least 4096"},
		{"VNI over 24 bits", func(p *NodePlan) { vsid(p, 1<<24) }, "IsolationId: 16777216 is more than 24 bits"},
		{"overlay subnet without VSID", func(p *NodePlan) { p.Network.Ipams[0].Subnets[0].Policies = nil },
			"network.Ipams[0].Subnets[0].Policies: an Overlay subnet needs a VSID policy"},
		{"no subnet", func(p *NodePlan) { p.Network.Ipams = nil }, "network.Ipams: no subnet"},
		{"unknown build regression action", func(p *NodePlan) { p.Rollout = &Rollout{BuildRegression: "wait"} },
			`rollout.buildRegression: "wait": want "hold" or "proceed"`},
		{"subnet with host bits", func(p *NodePlan) {
			p.Network.Ipams[0].Subnets[0].IpAddressPrefix = netip.MustParsePrefix("192.168.0.7/26")
		},
			"IpAddressPrefix: 192.168.0.7/26 has host bits set"},
		{"VXLAN port 0", func(p *NodePlan) { p.Network.Policies[0] = NewPolicy(VxlanPort{}) }, "network.Policies[0].Settings.Port: 0 is not a UDP port"},
		{"VXLAN port on L2Bridge", func(p *NodePlan) {
			p.Network.Type = "L2Bridge"
			p.SetRoutes(nil)
		}, "network.Policies[0]: a VxlanPort policy on a network of type \"L2Bridge\""},
		{"empty network name", func(p *NodePlan) { p.Network.Name = "" }, "network.Name: empty"},
		{"network name with a slash", func(p *NodePlan) { p.Network.Name = "a/b" }, `network.Name: "a/b": must start with a letter or digit`},
		{"host endpoint outside the subnet", func(p *NodePlan) { p.HostEndpoint.IpConfigurations[0].IpAddress = netip.MustParseAddr("10.1.0.2") },
			"hostEndpoint.IpConfigurations[0].IpAddress: 10.1.0.2 is outside the network's subnets [192.168.0.0/26]"},
		{"host endpoint with another length", func(p *NodePlan) { p.HostEndpoint.IpConfigurations[0].PrefixLength = 24 },
			"hostEndpoint.IpConfigurations[0].PrefixLength: 24, but the subnet 192.168.0.0/26 is a /26"},
		{"host endpoint without address", func(p *NodePlan) { p.HostEndpoint.IpConfigurations = nil }, "hostEndpoint.IpConfigurations: no address"},
		{"host endpoint without name", func(p *NodePlan) { p.HostEndpoint.Name = "" }, "hostEndpoint.Name: empty"},
		{"default route", func(p *NodePlan) { route(p, "0.0.0.0/0") }, ".nodes[evil].blocks[0]: 0.0.0.0/0 is a default route"},
		{"IPv6 default route", func(p *NodePlan) { route(p, "::/0") }, ".nodes[evil].blocks[0]: ::/0 is a default route"},
		{"route over the node's own block", func(p *NodePlan) { route(p, "192.168.0.0/26") },
			".nodes[evil].blocks[0]: 192.168.0.0/26 overlaps the node's own block 192.168.0.0/26"},
		{"route covering the node's block", func(p *NodePlan) { route(p, "192.168.0.0/16") }, "192.168.0.0/16 overlaps the node's own block"},
		{"host route over the node's block", func(p *NodePlan) {
			p.Network.Type, p.Network.Policies = "L2Bridge", nil
			p.Network.Ipams[0].Subnets[0].Policies = nil
			hostRoutes(p, RouteNode{Node: "x", Address: netip.MustParseAddr("10.0.0.9"), Blocks: []netip.Prefix{netip.MustParsePrefix("192.168.0.32/27")}})
		}, ".nodes[x].blocks[0]: 192.168.0.32/27 overlaps the node's own block"},
		{"route twice", func(p *NodePlan) { route(p, "192.168.0.64/26") }, ".nodes[evil].blocks[0]: 192.168.0.64/26 is routed twice (also to node win-2)"},
		{"route VNI 0", func(p *NodePlan) { p.Routes.IsolationId = 0 }, ".isolationId: 0: an Overlay network's VNI"},
		{"route VNI not the network's", func(p *NodePlan) { p.Routes.IsolationId = 5000 }, ".isolationId: VNI 5000, the plan's network has 4096: the plan and its route table disagree"},
		{"route bad MAC", func(p *NodePlan) { p.Routes.Nodes[0].TunnelMAC = "zz" }, `.nodes[win-2].tunnelMAC: "zz" is not a MAC address`},
		{"route table of an unknown type", func(p *NodePlan) { p.Routes.Type = "Teleport" }, `.type: "Teleport": want RemoteSubnet or Host`},
		{"RemoteSubnet routes on L2Bridge", func(p *NodePlan) {
			p.Network.Type, p.Network.Policies = "L2Bridge", nil
		}, `.type: RemoteSubnet routes need an Overlay network, the plan's is "L2Bridge"`},
		{"route table not assembled", func(p *NodePlan) { p.Routes = nil },
			"routeTable: route table routes-"},
		{"assembled with another route table", func(p *NodePlan) {
			other := *p.Routes
			other.Key = RouteKey("demo", "calico-vxlan", RoutesRemoteSubnet, 4097, 4789, nil)
			p.Routes = &other
		}, "is not assembled with the plan"},
		{"program not assembled", func(p *NodePlan) {
			p.ProgramChunks = []PartRef{{Name: "program-0123456789ab", Digest: "sha256:00"}}
		}, "programChunks: the policy program (1 chunks) is not assembled with the plan"},
		{"allow-all ACL at priority 1", func(p *NodePlan) { p.Endpoints = []Endpoint{podEndpoint("192.168.0.10", allowAll(1))} },
			"endpoints[0].Policies[0].Settings.Priority: 1: a Switch ACL's priority must be between 900 and 65000"},
		{"ACL protocol 300", func(p *NodePlan) {
			a := allowAll(1000)
			a.Settings = ACL{Protocols: "300", Action: "Allow", Direction: "In", RuleType: "Switch", Priority: 1000}
			p.Endpoints = []Endpoint{podEndpoint("192.168.0.10", a)}
		}, `endpoints[0].Policies[0].Settings.Protocols: "300": want 256 (any) or protocol numbers 0..255`},
		{"ACL action", func(p *NodePlan) {
			p.Endpoints = []Endpoint{podEndpoint("192.168.0.10", NewPolicy(ACL{Protocols: "6", Action: "Maybe", Direction: "In", RuleType: "Switch", Priority: 1000}))}
		}, `endpoints[0].Policies[0].Settings.Action: "Maybe": want Allow or Block`},
		{"ACL port range backwards", func(p *NodePlan) {
			p.Endpoints = []Endpoint{podEndpoint("192.168.0.10", NewPolicy(ACL{Protocols: "6", Action: "Allow", Direction: "In", RuleType: "Switch", Priority: 1000, LocalPorts: "80,90-85"}))}
		}, `endpoints[0].Policies[0].Settings.LocalPorts: "90-85" is not a port`},
		{"ACL bad address", func(p *NodePlan) {
			p.Endpoints = []Endpoint{podEndpoint("192.168.0.10", NewPolicy(ACL{Protocols: "6", Action: "Allow", Direction: "In", RuleType: "Switch", Priority: 1000, RemoteAddresses: "10.0.0.0/8,x\x1b[31m"}))}
		}, `endpoints[0].Policies[0].Settings.RemoteAddresses: "x\x1b[31m" is neither an address nor a prefix`},
		{"Host ACL above 0", func(p *NodePlan) {
			p.Endpoints = []Endpoint{podEndpoint("192.168.0.10", NewPolicy(ACL{Protocols: "256", Action: "Allow", Direction: "In", RuleType: "Host", Priority: 5}))}
		}, "endpoints[0].Policies[0].Settings.Priority: 5: a Host ACL (the host path) has priority 0"},
		{"two ACLs at one priority", func(p *NodePlan) {
			p.Endpoints = []Endpoint{podEndpoint("192.168.0.10", allowAll(1000), NewPolicy(ACL{Protocols: "6", Action: "Block", Direction: "In", RuleType: "Switch", Priority: 1000}))}
		}, "endpoints[0].Policies[1].Settings.Priority: 1000 is also the priority of endpoints[0].Policies[0]"},
		{"pod endpoint outside the subnet", func(p *NodePlan) { p.Endpoints = []Endpoint{podEndpoint("10.9.9.9")} },
			"endpoints[0].IpConfigurations[0].IpAddress: 10.9.9.9 is outside the network's subnets [192.168.0.0/26]"},
		{"two pod endpoints on one address", func(p *NodePlan) { p.Endpoints = []Endpoint{podEndpoint("192.168.0.10"), podEndpoint("192.168.0.10")} },
			"endpoints[1].IpConfigurations[0].IpAddress: 192.168.0.10 is also the address of endpoints[0]"},
		{"too many route table entries", func(p *NodePlan) {
			p.Routes.Nodes = make([]RouteNode, MaxRoutes+1)
		}, ".nodes: 65537 entries, more than the 65536 a plan may hold"},
		{"too many routes", func(p *NodePlan) {
			p.Routes.Nodes[0].Blocks = make([]netip.Prefix, MaxRoutes+1)
			for i := range p.Routes.Nodes[0].Blocks {
				p.Routes.Nodes[0].Blocks[i] = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
			}
		}, "more than 65536 routes"},
		{"too many endpoints", func(p *NodePlan) { p.Endpoints = make([]Endpoint, MaxEndpoints+1) }, "endpoints: 4097 entries"},
		{"long node name in a route", func(p *NodePlan) { p.Routes.Nodes[0].Node = strings.Repeat("a", MaxNameLen+1) },
			"...].node: 257 bytes long, more than 256"},
		{"replacement", func(p *NodePlan) { p.Replacement = "yolo" }, `replacement: "yolo": want "drain" or "manual"`},
		{"program: bad tier action", func(p *NodePlan) { p.Program = &Program{Tiers: []Tier{{Name: "t", DefaultAction: "Allow"}}} },
			`program.tiers[0].defaultAction: "Allow": want Deny or Pass`},
		{"program: rule protocol", func(p *NodePlan) {
			p.Program = &Program{Tiers: []Tier{{Name: "t", DefaultAction: "Deny", Policies: []NetworkPolicy{{ID: "knp.a.b", Selector: "all()",
				IngressRules: []PolicyRule{{ID: "r", Action: "Allow", Protocol: 999}}}}}}}
		}, "program.tiers[0].policies[0].ingressRules[0].protocol: 999 is not a protocol number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := samplePlan()
			tt.mutate(p)
			err := Validate(p)
			if err == nil {
				t.Fatalf("Validate accepted it; want %q", tt.want)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %T %v is not a *ValidationError wrapping ErrInvalid", err, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error:\n  %v\nwant it to say:\n  %s", err, tt.want)
			}
			if len(ve.Problems) > maxProblems {
				t.Errorf("%d problems listed, at most %d", len(ve.Problems), maxProblems)
			}
		})
	}
}

// TestValidateBoundsProblems: a plan wrong everywhere gets a short error.
func TestValidateBoundsProblems(t *testing.T) {
	p := samplePlan()
	for range 50 {
		p.Endpoints = append(p.Endpoints, podEndpoint("10.9.9.9"))
	}
	err := Validate(p)
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != maxProblems || ve.Omitted < 40 {
		t.Fatalf("want %d problems and the rest counted, got %v", maxProblems, err)
	}
	if !strings.HasSuffix(err.Error(), "more") {
		t.Errorf("error does not say more were omitted: %v", err)
	}
}

// policyOnlyPlan is a valid policy-only plan: Azure CNI's network, one
// pod with a VNet address and an ACL.
func policyOnlyPlan() *NodePlan {
	return &NodePlan{FormatVersion: FormatVersion, Kind: Kind, Node: "aks-win-1", Cluster: "aks", Networking: "cloud-provider",
		PolicyOnly: &PolicyOnly{Owner: "azure-cni", Networks: []string{"azure.*"}, NodeAddress: netip.MustParseAddr("10.224.0.33")}, Routing: "cloud-provider",
		Endpoints: []Endpoint{{Pod: "default/web", IpConfigurations: []IpConfig{{IpAddress: netip.MustParseAddr("10.224.0.40"), PrefixLength: 32}},
			Policies: []Policy{allowAll(1000)}}}}
}

// TestValidatePolicyOnly: a policy-only plan creates nothing and finds
// its endpoints by pod address; each mutation is refused with its path.
func TestValidatePolicyOnly(t *testing.T) {
	if err := Validate(policyOnlyPlan()); err != nil {
		t.Fatalf("the policy-only plan: %v", err)
	}
	for _, tt := range []struct {
		name   string
		mutate func(*NodePlan)
		want   string
	}{
		{"a network to create", func(p *NodePlan) { p.Network = samplePlan().Network }, "network: a policy-only plan creates no network: the network is azure-cni's"},
		{"a host endpoint", func(p *NodePlan) { p.HostEndpoint = samplePlan().HostEndpoint }, "hostEndpoint: a policy-only plan creates no host endpoint"},
		{"a pod template", func(p *NodePlan) { p.PodEndpoint = samplePlan().PodEndpoint }, "podEndpoint: a policy-only plan has no pod endpoint template"},
		{"a route table", func(p *NodePlan) {
			s := samplePlan()
			p.RouteTable, p.Routes = s.RouteTable, s.Routes
		}, "routeTable: a policy-only plan programs no routes"},
		{"no network pattern", func(p *NodePlan) { p.PolicyOnly.Networks = nil }, "policyOnly.networks: no network pattern"},
		{"a bad pattern", func(p *NodePlan) { p.PolicyOnly.Networks = []string{"azure(["} }, `policyOnly.networks[0]: network pattern "azure([" is not an RE2 regular expression`},
		{"an empty pattern", func(p *NodePlan) { p.PolicyOnly.Networks = []string{""} }, "policyOnly.networks[0]: an empty network pattern"},
		{"too many patterns", func(p *NodePlan) { p.PolicyOnly.Networks = make([]string, MaxNetworkPatterns+1) }, "policyOnly.networks: 17 entries"},
		{"no owner", func(p *NodePlan) { p.PolicyOnly.Owner = "" }, "policyOnly.owner: empty"},
		{"no node address", func(p *NodePlan) { p.PolicyOnly.NodeAddress = netip.Addr{} }, "policyOnly.nodeAddress: missing"},
		{"a CNI policy on an endpoint", func(p *NodePlan) {
			p.Endpoints[0].Policies = append(p.Endpoints[0].Policies, NewPolicy(OutBoundNAT{}))
		}, "endpoints[0].Policies[1]: a OutBoundNAT policy: a policy-only plan programs the ACLs of azure-cni's endpoints only"},
		{"an endpoint without its pod", func(p *NodePlan) { p.Endpoints[0].Pod = "" }, "endpoints[0].Pod: empty"},
		{"a prefix length past the address", func(p *NodePlan) { p.Endpoints[0].IpConfigurations[0].PrefixLength = 33 }, "PrefixLength: 33 is not a prefix length of 10.224.0.40"},
		{"an allow-all at priority 1", func(p *NodePlan) { p.Endpoints[0].Policies = []Policy{allowAll(1)} }, "a Switch ACL's priority must be between 900 and 65000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := policyOnlyPlan()
			tt.mutate(p)
			err := Validate(p)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate: %v\nwant it to say: %s", err, tt.want)
			}
		})
	}
}

// TestNetworkMatcher: a pattern matches a whole network name.
func TestNetworkMatcher(t *testing.T) {
	m, err := NewNetworkMatcher([]string{"azure.*", `flannel\.[0-9]+`, "cbr0"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{
		"azure": true, "azure-vlan1-172-28-1-0_24": true, "my-azure": false, "flannel.4096": true, "flannel.4096x": false,
		"cbr0": true, "cbr01": false, "Calico": false, "": false,
	} {
		if got := m.Match(name); got != want {
			t.Errorf("Match(%q) = %v, want %v", name, got, want)
		}
	}
	var none *NetworkMatcher
	if none.Match("azure") {
		t.Error("a nil matcher matched")
	}
	if _, err := NewNetworkMatcher([]string{"a)"}); err == nil {
		t.Error("an unbalanced pattern compiled")
	}
}
