package hns

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// Record takes into the baseline the read-back (now, a snapshot taken
// after ops were applied) of every object ops wrote, and forgets the
// baseline of objects that are gone, or read back otherwise than their
// baseline says (someone changed them: Diff compared them with the plan
// directly). Call it after every pass, with no ops when the pass wrote
// nothing (now is then the pass's own snapshot). It reports whether the
// baseline changed (and must be saved).
//
// A read-back that echoes what was sent (EquivalentACLs, identity fields
// read back absent) confirms the write: if it is not byte for byte what
// was sent, it is kept, so that later passes compare HNS with it. One
// that does not echo it counts a write; at the second write of the same
// value, or at the first of a network's identity (writing that again is a
// replace), the object is reported as a Mismatch and, while HNS keeps
// reading it back so, not written again.
func (e *Echo) Record(ops []Op, now *State) (changed bool) {
	if e.Networks == nil {
		e.Networks = map[string]*NetworkEcho{}
	}
	if e.Endpoints == nil {
		e.Endpoints = map[string]*EndpointEcho{}
	}
	before := e.fingerprint()
	wroteNet := map[string]bool{}
	wroteEp := map[string]bool{}
	for i := range ops {
		op := &ops[i]
		switch {
		case op.Kind == KindNetwork && (op.Action == Create || op.Action == Replace) && op.NetworkSpec != nil:
			e.recordNetwork(op.NetworkSpec, now)
			wroteNet[op.Name] = true
		case op.Kind == KindNetPolicies && op.NetworkSpec != nil:
			e.recordNetwork(op.NetworkSpec, now)
			wroteNet[op.Name] = true
		case op.Kind == KindEndpoint && op.Action != Delete && op.EndpointSpec != nil:
			if read := findWritten(now, op, op.EndpointSpec.IP); read != nil {
				e.recordEndpoint(op.EndpointSpec, read, false)
				wroteEp[EndpointKey(read)] = true
			}
		case op.Kind == KindACL:
			if read := findWritten(now, op, netip.Prefix{}); read != nil {
				sent := Endpoint{Name: read.Name, Network: read.Network, ACLs: CanonicalACLs(op.ACLs)}
				e.recordEndpoint(&sent, read, true)
				wroteEp[EndpointKey(read)] = true
			}
		}
	}
	for name, r := range e.Networks {
		if wroteNet[name] {
			continue
		}
		if n := now.Network(name); n == nil || !sameNetworkForm(&r.Read, n) {
			delete(e.Networks, name)
		}
	}
	if len(e.Endpoints) > 0 {
		byKey := make(map[string]*Endpoint, len(now.Endpoints))
		for i := range now.Endpoints {
			byKey[EndpointKey(&now.Endpoints[i])] = &now.Endpoints[i]
		}
		for k, r := range e.Endpoints {
			if wroteEp[k] {
				continue
			}
			ep := byKey[k]
			switch {
			case ep == nil:
				delete(e.Endpoints, k)
			case r.Pod && !slices.Equal(CanonicalACLs(r.Read.ACLs), CanonicalACLs(ep.ACLs)):
				delete(e.Endpoints, k)
			case !r.Pod && !sameEndpointForm(&r.Read, ep):
				delete(e.Endpoints, k)
			}
		}
	}
	return e.fingerprint() != before
}

// findWritten is the endpoint an op wrote, as read back: the one with the
// op's ID, or of its name on its network (with ip, when names repeat).
func findWritten(now *State, op *Op, ip netip.Prefix) *Endpoint {
	var first *Endpoint
	for i := range now.Endpoints {
		e := &now.Endpoints[i]
		if op.ID != "" {
			if strings.EqualFold(e.ID, op.ID) {
				return e
			}
			continue
		}
		if e.Name != op.Name || op.Network != "" && e.Network != op.Network {
			continue
		}
		if first == nil {
			first = e
		}
		if ip == e.IP {
			return e
		}
	}
	return first
}

func (e *Echo) recordNetwork(spec *Network, now *State) {
	n := now.Network(spec.Name)
	if n == nil {
		delete(e.Networks, spec.Name)
		return
	}
	sent, read := netForm(spec), netForm(n)
	prev := e.Networks[spec.Name]
	ms, identity := networkEchoes(&sent, &read)
	if len(ms) == 0 {
		if sameNetworkForm(&sent, &read) {
			delete(e.Networks, spec.Name) // an exact echo needs no baseline
			return
		}
		e.Networks[spec.Name] = &NetworkEcho{Sent: sent, Read: read}
		return
	}
	r := &NetworkEcho{Sent: sent, Read: read, Echoed: Echoed{Writes: 1}}
	if prev != nil && prev.Writes > 0 && sameNetworkForm(&prev.Sent, &sent) {
		r.Writes = prev.Writes + 1
	}
	if r.Writes >= 2 || identity {
		r.Mismatch = ms
	}
	e.Networks[spec.Name] = r
}

func (e *Echo) recordEndpoint(spec, read *Endpoint, pod bool) {
	k := EndpointKey(read)
	sent := *spec
	sent.ID, sent.Name, sent.Network = read.ID, read.Name, read.Network
	sent.ACLs = CanonicalACLs(slices.Clone(sent.ACLs))
	got := *read
	got.ACLs = CanonicalACLs(slices.Clone(read.ACLs))
	if pod {
		sent.Policies, got.Policies = nil, nil
		got.IP, got.MAC, got.Remote, got.HostAttached = netip.Prefix{}, "", false, false
	}
	prev := e.Endpoints[k]
	ms := endpointEchoes(&sent, &got, pod)
	if len(ms) == 0 {
		exact := slices.Equal(sent.ACLs, got.ACLs)
		if !pod {
			exact = sameEndpointForm(&sent, &got)
		}
		if exact {
			delete(e.Endpoints, k)
			return
		}
		e.Endpoints[k] = &EndpointEcho{Name: read.Name, Sent: sent, Read: got, Pod: pod}
		return
	}
	r := &EndpointEcho{Name: read.Name, Sent: sent, Read: got, Pod: pod, Echoed: Echoed{Writes: 1}}
	if prev != nil && prev.Writes > 0 && prev.Pod == pod && slices.Equal(prev.Sent.ACLs, sent.ACLs) && (pod || sameEndpointForm(&prev.Sent, &sent)) {
		r.Writes = prev.Writes + 1
	}
	if r.Writes >= 2 {
		r.Mismatch = ms
	}
	e.Endpoints[k] = r
}

// fingerprint is a cheap summary of the baseline, to tell a change.
func (e *Echo) fingerprint() string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(e.Networks)) {
		r := e.Networks[k]
		b.WriteString(k)
		b.WriteString(r.Read.form())
		b.WriteString(r.Sent.form())
		writeEchoed(&b, r.Echoed)
	}
	for _, k := range slices.Sorted(maps.Keys(e.Endpoints)) {
		r := e.Endpoints[k]
		b.WriteString(k)
		for _, a := range r.Read.ACLs {
			b.WriteString(describeACL(a) + a.Id)
		}
		for _, a := range r.Sent.ACLs {
			b.WriteString(describeACL(a) + a.Id)
		}
		b.WriteString(r.Read.IP.String() + r.Read.MAC + r.Sent.IP.String() + r.Sent.MAC)
		b.WriteString(describePolicies(r.Read.Policies) + describePolicies(r.Sent.Policies))
		writeEchoed(&b, r.Echoed)
	}
	for _, r := range e.Replaces {
		b.WriteString(r.PlanDigest + r.Reason)
	}
	return b.String()
}

func writeEchoed(b *strings.Builder, e Echoed) {
	b.WriteByte(byte('0' + min(e.Writes, 9)))
	for _, m := range e.Mismatch {
		b.WriteString(m.String())
	}
}

// form is a network's identity and policies in one line.
func (n Network) form() string {
	var b strings.Builder
	b.WriteString(n.Name + " " + n.Type)
	for _, s := range n.Subnets {
		b.WriteString(" " + s.Prefix.String() + "@" + s.Gateway.String() + "#" + itoa(s.VNI))
	}
	b.WriteString(" port " + itoa(uint32(n.VXLANPort)))
	if n.HostRoute {
		b.WriteString(" hostroute")
	}
	if n.AdapterName != "" {
		b.WriteString(" adapter " + n.AdapterName)
	}
	return b.String()
}

func itoa(v uint32) string {
	if v == 0 {
		return "0"
	}
	var buf [10]byte
	i := len(buf)
	for v > 0 {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	return string(buf[i:])
}
