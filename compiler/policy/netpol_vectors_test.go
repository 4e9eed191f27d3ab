package policy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/ipam"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/policy"
	"github.com/hnsplan/hnsplan/compiler/reach"
	"github.com/hnsplan/hnsplan/compiler/sim"
)

// netpolVector is one step of testdata/oracles/k8s-netpol (see its README).
type netpolVector struct {
	ID          string                       `json:"id"`
	Description string                       `json:"description"`
	Namespaces  map[string]map[string]string `json:"namespaces"`
	ServerPorts []struct {
		Port     uint16 `json:"port"`
		Protocol string `json:"protocol"`
		Name     string `json:"name"`
	} `json:"serverPorts"`
	Pods []struct {
		Namespace string            `json:"namespace"`
		Name      string            `json:"name"`
		Labels    map[string]string `json:"labels"`
		IP        string            `json:"ip"`
	} `json:"pods"`
	Policies []json.RawMessage `json:"policies"`
	PodOrder []string          `json:"podOrder"`
	Expected []struct {
		Protocol string   `json:"protocol"`
		Port     uint16   `json:"port"`
		Combined []string `json:"combined"`
		Ingress  []string `json:"ingress"`
		Egress   []string `json:"egress"`
	} `json:"expected"`
}

// The vectors' pods live at 192.168.1.1-11, and their ipBlocks are
// 192.168.1.0/24, except 192.168.1.0/28, 0.0.0.0/0 and 0.0.0.0/31. Their
// pods go on one Windows node with the block 192.168.1.0/27, where .1 and
// .2 are reserved: every address, and every ipBlock of /28 or longer inside
// the /24, moves up by 16, which keeps each pod inside exactly the same
// ipBlocks as before.
func remapAddr(a netip.Addr) netip.Addr {
	if netip.MustParsePrefix("192.168.1.0/24").Contains(a) {
		b := a.As4()
		b[3] += 16
		return netip.AddrFrom4(b)
	}
	return a
}

func remapCIDR(s string) string {
	p := netip.MustParsePrefix(s)
	if p.Bits() >= 28 && netip.MustParsePrefix("192.168.1.0/24").Contains(p.Addr()) {
		return netip.PrefixFrom(remapAddr(p.Addr()), p.Bits()).String()
	}
	return s
}

var protocols = map[string]int{"TCP": 6, "UDP": 17, "SCTP": 132}

func loadNetpolVectors(t *testing.T) []netpolVector {
	t.Helper()
	f, err := os.Open("../../testdata/oracles/k8s-netpol/policy-assistant-generated.jsonl")
	if err != nil {
		t.Fatalf("oracle missing: %v", err)
	}
	defer f.Close()
	var out []netpolVector
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var v netpolVector
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNetworkPolicyTruthTables runs all 256 truth tables of policy-assistant
// (kubernetes-sigs/network-policy-api) through compile → render → simulate:
// every cell of every ingress, egress and combined matrix, for TCP, UDP
// and SCTP on ports 80 and 81, is decided by the compiled HNS ACL lists —
// once with every pod on a Windows node, once in a hybrid cluster where
// every third pod is on a Linux node and its side is decided from the
// program by reach.Linux (Calico's Linux semantics).
func TestNetworkPolicyTruthTables(t *testing.T) {
	vectors := loadNetpolVectors(t)
	if len(vectors) != 256 {
		t.Fatalf("%d vectors, want 256", len(vectors))
	}
	cells := 0
	for _, hybrid := range []bool{false, true} {
		for _, v := range vectors {
			name := v.ID
			if hybrid {
				name += "/hybrid"
			}
			t.Run(name, func(t *testing.T) { cells += runNetpolVector(t, v, hybrid) })
		}
	}
	t.Logf("%d vectors, all-Windows and hybrid, %d matrix cells asserted", len(vectors), cells)
	if cells < 2*256*6*72*3/2 {
		t.Errorf("only %d cells asserted", cells)
	}
}

func runNetpolVector(t *testing.T, v netpolVector, hybrid bool) int {
	var m intent.Manifests
	for _, raw := range v.Policies {
		var np networkingv1.NetworkPolicy
		if err := json.Unmarshal(raw, &np); err != nil {
			t.Fatal(err)
		}
		for i := range np.Spec.Ingress {
			remapPeers(np.Spec.Ingress[i].From)
		}
		for i := range np.Spec.Egress {
			remapPeers(np.Spec.Egress[i].To)
		}
		m.NetworkPolicies = append(m.NetworkPolicies, intent.NetworkPolicy{NetworkPolicy: np})
	}
	prog, findings := policy.Compile(&m, nil, func(string) diag.Severity { return diag.Info })
	for _, f := range findings {
		if f.Severity == diag.Error {
			t.Fatalf("compile: %s", f)
		}
	}
	var ports []acl.NamedPort
	for _, sp := range v.ServerPorts {
		ports = append(ports, acl.NamedPort{Name: sp.Name, Protocol: protocols[sp.Protocol], Port: sp.Port})
	}
	byKey := map[string]*acl.Pod{}
	var pods []*acl.Pod
	block := ipam.Block{Prefix: netip.MustParsePrefix("192.168.1.0/27")} // the Windows node's block
	for _, p := range v.Pods {
		pod := &acl.Pod{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels, IP: remapAddr(netip.MustParseAddr(p.IP)), Ports: ports}
		if !block.Prefix.Contains(pod.IP) || block.Reserved(pod.IP) {
			t.Fatalf("pod %s at %s is not a usable address of the node's block %s", pod.Key(), pod.IP, block.Prefix)
		}
		pods = append(pods, pod)
		byKey[pod.Key()] = pod
	}
	world := acl.NewWorld(pods, v.Namespaces, []netip.Addr{netip.MustParseAddr("10.240.0.21")})
	r := acl.NewRenderer(prog, world)
	lists := map[*acl.Pod]*sim.List{}
	onLinux := map[*acl.Pod]bool{}
	for i, p := range pods {
		if hybrid && i%3 == 2 {
			onLinux[p] = true
			continue
		}
		in, out, err := r.Render(p)
		if err != nil {
			t.Fatal(err)
		}
		l, err := sim.Compile(append(in, out...))
		if err != nil {
			t.Fatalf("%s: the rendered ACLs do not parse: %v", p.Key(), err)
		}
		lists[p] = l
	}
	linux := reach.NewLinux(prog, world)
	cells := 0
	var bad []string
	for _, e := range v.Expected {
		proto, ok := protocols[e.Protocol]
		if !ok {
			t.Fatalf("protocol %q", e.Protocol)
		}
		for i, from := range v.PodOrder {
			for j, to := range v.PodOrder {
				want := [3]byte{e.Ingress[i][j], e.Egress[i][j], e.Combined[i][j]}
				if want[2] == '#' || want[2] == 'N' || want[2] == 'P' {
					continue
				}
				src, dst := byKey[from], byKey[to]
				in := decideAt(t, lists, onLinux, linux, dst, "In", sim.Packet{Protocol: proto, Remote: src.IP, LocalPort: e.Port, RemotePort: 40000})
				out := decideAt(t, lists, onLinux, linux, src, "Out", sim.Packet{Protocol: proto, Remote: dst.IP, LocalPort: 40000, RemotePort: e.Port})
				got := [3]byte{mark(in.Allowed), mark(out.Allowed), mark(in.Allowed && out.Allowed)}
				for k, name := range []string{"ingress", "egress", "combined"} {
					cells++
					if got[k] != want[k] {
						bad = append(bad, fmt.Sprintf("%s %d/%s %s->%s: %s got %c want %c (in: %s, out: %s)",
							e.Protocol, e.Port, name, from, to, name, got[k], want[k], decided(in), decided(out)))
					}
				}
			}
		}
	}
	if len(bad) > 0 {
		if len(bad) > 8 {
			bad = append(bad[:8], fmt.Sprintf("… %d more", len(bad)-8))
		}
		t.Errorf("%s (%s):\n%s", v.ID, v.Description, strings.Join(bad, "\n"))
	}
	return cells
}

// decideAt decides p at ep: by its ACL list on Windows, from the program
// on Linux (the verdict then names the deciding rule as its ACL id).
func decideAt(t *testing.T, lists map[*acl.Pod]*sim.List, onLinux map[*acl.Pod]bool, linux *reach.Linux, ep *acl.Pod, dir string, p sim.Packet) sim.Verdict {
	if !onLinux[ep] {
		return lists[ep].Evaluate(dir, p)
	}
	d, err := linux.Evaluate(ep, dir, p)
	if err != nil {
		t.Fatal(err)
	}
	v := sim.Verdict{Allowed: d.Allowed, Default: d.Rule == nil}
	if d.Rule != nil {
		v.ACL = &plan.ACL{Id: "linux:" + d.Rule.ID}
	}
	return v
}

func remapPeers(peers []networkingv1.NetworkPolicyPeer) {
	for i := range peers {
		if b := peers[i].IPBlock; b != nil {
			b.CIDR = remapCIDR(b.CIDR)
			for k := range b.Except {
				b.Except[k] = remapCIDR(b.Except[k])
			}
		}
	}
}

func mark(allowed bool) byte {
	if allowed {
		return '.'
	}
	return 'X'
}

func decided(v sim.Verdict) string {
	if v.ACL == nil {
		return "no ACL"
	}
	return v.ACL.Id
}
