//go:build windows

package hnswin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/Microsoft/hcsshim"
	"github.com/Microsoft/hcsshim/hcn"

	"github.com/hnsplan/hnsplan/applier/hns"
)

// Client is the hns.Client of this host's HNS, through the hcn (v2) API,
// and, for ACL updates in ACLFormV1, the v1 API. It holds no HNS state:
// every call reads what it needs, so a Client survives HNS restarts and
// changes made by others.
type Client struct {
	features hns.Features
	opts     options
}

var _ hns.Client = (*Client)(nil)

// New returns a Client set up by opts (WithACLForm), or an error if an
// option is invalid, or this host's HNS has no v2 API (before Windows
// Server 2019) or cannot be queried.
func New(opts ...Option) (*Client, error) {
	o, err := newOptions(opts...)
	if err != nil {
		return nil, err
	}
	if err := hcn.V2ApiSupported(); err != nil {
		return nil, fmt.Errorf("hnswin: HNS v2 API: %w", err)
	}
	sf, err := hcn.GetCachedSupportedFeatures()
	if err != nil {
		return nil, fmt.Errorf("hnswin: HNS features: %w", err)
	}
	g, err := hcn.GetGlobals()
	if err != nil {
		return nil, fmt.Errorf("hnswin: HNS version: %w", err)
	}
	return &Client{opts: o, features: hns.Features{
		V2API:       sf.Api.V2,
		RemoteRoute: sf.RemoteSubnet,
		VxlanPort:   sf.VxlanPort,
		ACLRuleID:   sf.Acl.AclRuleId,
		Version:     fmt.Sprintf("%d.%d", g.Version.Major, g.Version.Minor),
	}}, nil
}

// ACLForm is the form in which c writes ACL lists (WithACLForm).
func (c *Client) ACLForm() ACLForm { return c.opts.aclForm }

// Features reports what this host's HNS supports, as queried by New.
func (c *Client) Features(ctx context.Context) (hns.Features, error) {
	if err := ctx.Err(); err != nil {
		return hns.Features{}, err
	}
	return c.features, nil
}

// Endpoints reads HNS's endpoints alone (and the networks, for their
// names): what a policy-only agent polls for endpoints a CNI made, at a
// fraction of a Snapshot's cost on a node with many load balancers. Host
// attachment is not read.
func (c *Client) Endpoints(ctx context.Context) ([]hns.Endpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	nets, err := hcn.ListNetworks()
	if err != nil {
		return nil, fmt.Errorf("hnswin: endpoints: %w", listError("hcn.ListNetworks", err))
	}
	eps, err := hcn.ListEndpoints()
	if err != nil {
		return nil, fmt.Errorf("hnswin: endpoints: %w", listError("hcn.ListEndpoints", err))
	}
	byID := make(map[string]*hns.Network, len(nets))
	ns := make([]hns.Network, 0, len(nets))
	for i := range nets {
		n, err := fromNetwork(&nets[i], c.features.VxlanPort)
		if err != nil {
			return nil, fmt.Errorf("hnswin: endpoints: %w", err)
		}
		ns = append(ns, n)
	}
	for i := range ns {
		byID[strings.ToLower(ns[i].ID)] = &ns[i]
	}
	out := make([]hns.Endpoint, 0, len(eps))
	for i := range eps {
		e, err := fromEndpoint(&eps[i], byID, map[string]bool{})
		if err != nil {
			return nil, fmt.Errorf("hnswin: endpoints: %w", err)
		}
		out = append(out, e)
	}
	return out, nil
}

// Snapshot reads every network, endpoint and load balancer of HNS.
func (c *Client) Snapshot(ctx context.Context) (*hns.State, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	nets, err := hcn.ListNetworks()
	if err != nil {
		return nil, fmt.Errorf("hnswin: snapshot: %w", listError("hcn.ListNetworks", err))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	eps, err := hcn.ListEndpoints()
	if err != nil {
		return nil, fmt.Errorf("hnswin: snapshot: %w", listError("hcn.ListEndpoints", err))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	nss, err := hcn.ListNamespaces()
	if err != nil {
		return nil, fmt.Errorf("hnswin: snapshot: %w", listError("hcn.ListNamespaces", err))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lbs, err := hcn.ListLoadBalancers()
	if err != nil {
		return nil, fmt.Errorf("hnswin: snapshot: %w", listError("hcn.ListLoadBalancers", err))
	}

	st := &hns.State{}
	byID := make(map[string]*hns.Network, len(nets))
	for i := range nets {
		n, err := fromNetwork(&nets[i], c.features.VxlanPort)
		if err != nil {
			return nil, fmt.Errorf("hnswin: snapshot: %w", err)
		}
		st.Networks = append(st.Networks, n)
	}
	for i := range st.Networks {
		byID[strings.ToLower(st.Networks[i].ID)] = &st.Networks[i]
	}
	hostNS, attached, err := hostDefaultNamespaces(nss)
	if err != nil {
		return nil, fmt.Errorf("hnswin: snapshot: %w", err)
	}
	for i := range eps {
		if hostNS[strings.ToLower(eps[i].HostComputeNamespace)] {
			attached[strings.ToLower(eps[i].Id)] = true
		}
		e, err := fromEndpoint(&eps[i], byID, attached)
		if err != nil {
			return nil, fmt.Errorf("hnswin: snapshot: %w", err)
		}
		st.Endpoints = append(st.Endpoints, e)
	}
	for i := range lbs {
		st.LoadBalancers = append(st.LoadBalancers, fromLoadBalancer(&lbs[i]))
	}
	st.Canonical()
	return st, nil
}

// Apply performs op. An op whose effect is already there does nothing:
// creating what exists, deleting what is gone.
func (c *Client) Apply(ctx context.Context, op hns.Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var err error
	switch op.Kind {
	case hns.KindNetwork:
		err = c.applyNetwork(ctx, op)
	case hns.KindRoute:
		err = c.applyRoute(op)
	case hns.KindRoutes:
		err = c.applyRoutes(op)
	case hns.KindNetPolicies:
		err = c.applyNetPolicies(op)
	case hns.KindEndpoint:
		err = c.applyEndpoint(ctx, op)
	case hns.KindACL:
		err = c.applyACLs(op)
	default:
		err = fmt.Errorf("unknown op kind %q", op.Kind)
	}
	if err != nil {
		return fmt.Errorf("hnswin: %s: %w", opName(op), err)
	}
	return nil
}

// --- networks ---

func (c *Client) applyNetwork(ctx context.Context, op hns.Op) error {
	switch op.Action {
	case hns.Create:
		if _, err := getNetwork(op.Name); err == nil {
			return nil // there already
		} else if !hns.IsNotFound(err) {
			return err
		}
		return c.createNetwork(op)
	case hns.Replace:
		// HNS refuses to delete a network that still has endpoints
		// (ENTITY_HAS_REFERENCES); the applier drains it first. A rename
		// (From) deletes the network under its old name.
		if err := deleteNetwork(cmp.Or(op.From, op.Name)); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return c.createNetwork(op)
	case hns.Delete:
		return deleteNetwork(op.Name)
	}
	return errUnsupportedOp(op)
}

func (c *Client) createNetwork(op hns.Op) error {
	if op.NetworkSpec == nil {
		return errors.New("no network spec")
	}
	spec := *op.NetworkSpec
	if spec.Name == "" {
		spec.Name = op.Name
	}
	n, err := toNetwork(&spec, c.features.VxlanPort)
	if err != nil {
		return err
	}
	_, err = n.Create()
	return hnsError("HostComputeNetwork.Create", 0, err)
}

func getNetwork(name string) (*hcn.HostComputeNetwork, error) {
	n, err := hcn.GetNetworkByName(name)
	return n, hnsError("hcn.GetNetworkByName", hns.CodeNetworkNotFound, err)
}

// deleteNetwork deletes the network named name; one that is not there is
// deleted.
func deleteNetwork(name string) error {
	n, err := getNetwork(name)
	if hns.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if err := hnsError("HostComputeNetwork.Delete", hns.CodeNetworkNotFound, n.Delete()); err != nil && !hns.IsNotFound(err) {
		return err
	}
	return nil
}

// modifyNetworkPolicies adds or removes network policies in one request.
func modifyNetworkPolicies(n *hcn.HostComputeNetwork, rt hcn.RequestType, ps []hcn.NetworkPolicy) error {
	if len(ps) == 0 {
		return nil
	}
	settings, err := json.Marshal(hcn.PolicyNetworkRequest{Policies: ps})
	if err != nil {
		return err
	}
	err = n.ModifyNetworkSettings(&hcn.ModifyNetworkSettingRequest{
		ResourceType: hcn.NetworkResourceTypePolicy,
		RequestType:  rt,
		Settings:     settings,
	})
	return hnsError("HostComputeNetwork.ModifyNetworkSettings", hns.CodeNetworkNotFound, err)
}

// applyNetPolicies brings a network's VxlanPort, HostRoute and
// NetAdapterName policies to the spec's: the policies to drop are removed
// exactly as read back, then the missing ones are added.
func (c *Client) applyNetPolicies(op hns.Op) error {
	if op.Action != hns.Update {
		return errUnsupportedOp(op)
	}
	if op.NetworkSpec == nil {
		return errors.New("no network spec")
	}
	n, err := getNetwork(op.Name)
	if err != nil {
		return err
	}
	add, remove, err := netPolicyDelta(fromNetPolicies(n.Policies), op.NetworkSpec, c.features.VxlanPort)
	if err != nil {
		return err
	}
	if err := modifyNetworkPolicies(n, hcn.RequestTypeRemove, toNetPolicies(remove)); err != nil {
		return err
	}
	return modifyNetworkPolicies(n, hcn.RequestTypeAdd, toNetPolicies(add))
}

// --- routes ---

// applyRoute adds or removes one RemoteSubnetRoute policy (applyRoutes
// many). A route is
// removed by sending back the policy exactly as HNS holds it.
func (c *Client) applyRoute(op hns.Op) error {
	n, err := getNetwork(op.Network)
	if err != nil {
		if op.Action == hns.Delete && hns.IsNotFound(err) {
			return nil // gone with its network
		}
		return err
	}
	have := fromNetPolicies(n.Policies)
	switch op.Action {
	case hns.Create:
		if op.RouteSpec == nil {
			return errors.New("no route spec")
		}
		found, err := findRoutes(have, *op.RouteSpec, false)
		if err != nil || len(found) > 0 {
			return err // there already
		}
		p, err := routePolicy(op.RouteSpec)
		if err != nil {
			return err
		}
		return modifyNetworkPolicies(n, hcn.RequestTypeAdd, []hcn.NetworkPolicy{p})
	case hns.Delete:
		r, byPrefix := hns.RemoteRoute{}, true
		if op.RouteSpec != nil {
			r, byPrefix = *op.RouteSpec, false
		} else if r.Prefix, err = netip.ParsePrefix(op.Name); err != nil {
			return fmt.Errorf("no route spec, and the name is not a prefix: %w", err)
		}
		found, err := findRoutes(have, r, byPrefix)
		if err != nil {
			return err
		}
		return modifyNetworkPolicies(n, hcn.RequestTypeRemove, toNetPolicies(found))
	}
	return errUnsupportedOp(op)
}

// applyRoutes adds or removes many RemoteSubnetRoute policies in one
// ModifyNetworkSettings request: hcn's PolicyNetworkRequest carries a
// list (what AddPolicy and RemovePolicy send, with RequestType Add or
// Remove). Routes already as wanted are left out of the request (see
// routeBatch); a removal sends the policies exactly as read.
func (c *Client) applyRoutes(op hns.Op) error {
	if op.Action != hns.Create && op.Action != hns.Delete {
		return errUnsupportedOp(op)
	}
	n, err := getNetwork(op.Network)
	if err != nil {
		if op.Action == hns.Delete && hns.IsNotFound(err) {
			return nil // gone with their network
		}
		return err
	}
	add, drop, err := routeBatch(fromNetPolicies(n.Policies), op.Routes, op.Action == hns.Delete)
	if err != nil {
		return err
	}
	if op.Action == hns.Delete {
		return modifyNetworkPolicies(n, hcn.RequestTypeRemove, toNetPolicies(drop))
	}
	ps := make([]hcn.NetworkPolicy, len(add))
	for i := range add {
		if ps[i], err = routePolicy(&add[i]); err != nil {
			return err
		}
	}
	return modifyNetworkPolicies(n, hcn.RequestTypeAdd, ps)
}

// --- endpoints ---

func (c *Client) applyEndpoint(ctx context.Context, op hns.Op) error {
	switch op.Action {
	case hns.Create, hns.Replace:
		if op.EndpointSpec == nil {
			return errors.New("no endpoint spec")
		}
		if op.Action == hns.Replace {
			if err := deleteEndpoint(op.Name); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		return c.createEndpoint(op)
	case hns.Update:
		if op.EndpointSpec == nil {
			return errors.New("no endpoint spec")
		}
		ep, err := opEndpoint(op)
		if err != nil {
			return err
		}
		policies, err := endpointPolicies(op.EndpointSpec.Policies, op.EndpointSpec.ACLs)
		if err != nil {
			return err
		}
		if err := setEndpointPolicies(ep, policies); err != nil {
			return err
		}
		if op.EndpointSpec.HostAttached {
			return attachToHost(ep)
		}
		return nil
	case hns.Delete:
		if op.ID != "" { // one of several of that name: by its ID only
			ep, err := hcn.GetEndpointByID(op.ID)
			if err = hnsError("hcn.GetEndpointByID", hns.CodeEndpointNotFound, err); hns.IsNotFound(err) {
				return nil // gone already
			}
			if err != nil {
				return err
			}
			return deleteThisEndpoint(ep)
		}
		return deleteEndpoint(op.Name)
	}
	return errUnsupportedOp(op)
}

// opEndpoint is the endpoint an op acts on: the one of its ID when it
// gives one (HNS does not keep endpoint names unique), else by name.
func opEndpoint(op hns.Op) (*hcn.HostComputeEndpoint, error) {
	if op.ID == "" {
		return findEndpoint(op.Name, network(op))
	}
	ep, err := hcn.GetEndpointByID(op.ID)
	if err != nil {
		return nil, hnsError("hcn.GetEndpointByID", hns.CodeEndpointNotFound, err)
	}
	if ep.Name != op.Name {
		return nil, &hns.Error{Call: "hcn.GetEndpointByID", Code: hns.CodeEndpointNotFound,
			Msg: fmt.Sprintf("endpoint %s is %q now, not %q", op.ID, ep.Name, op.Name)}
	}
	return ep, nil
}

// network is the network an endpoint op is about.
func network(op hns.Op) string {
	if op.Network == "" && op.EndpointSpec != nil {
		return op.EndpointSpec.Network
	}
	return op.Network
}

func (c *Client) createEndpoint(op hns.Op) error {
	spec := *op.EndpointSpec
	if spec.Name == "" {
		spec.Name = op.Name
	}
	if ep, err := findEndpoint(spec.Name, network(op)); err == nil {
		// There already (a retried create).
		if spec.HostAttached {
			return attachToHost(ep)
		}
		return nil
	} else if !hns.IsNotFound(err) {
		return err
	}
	n, err := getNetwork(network(op))
	if err != nil {
		return err
	}
	e, err := toEndpoint(&spec)
	if err != nil {
		return err
	}
	var created *hcn.HostComputeEndpoint
	if spec.Remote {
		created, err = n.CreateRemoteEndpoint(e)
	} else {
		created, err = n.CreateEndpoint(e)
	}
	if err != nil {
		return hnsError("HostComputeNetwork.CreateEndpoint", hns.CodeNetworkNotFound, err)
	}
	if spec.HostAttached {
		return attachToHost(created)
	}
	return nil
}

// findEndpoint returns the endpoint named name, on the network named
// network if that is not "". An endpoint of that name on another network
// is not found.
func findEndpoint(name, network string) (*hcn.HostComputeEndpoint, error) {
	ep, err := hcn.GetEndpointByName(name)
	if err != nil {
		return nil, hnsError("hcn.GetEndpointByName", hns.CodeEndpointNotFound, err)
	}
	if network == "" {
		return ep, nil
	}
	n, err := getNetwork(network)
	if err != nil {
		return nil, err
	}
	if !strings.EqualFold(ep.HostComputeNetwork, n.Id) {
		return nil, &hns.Error{Call: "hcn.GetEndpointByName", Code: hns.CodeEndpointNotFound,
			Msg: fmt.Sprintf("endpoint %q is not on network %q", name, network)}
	}
	return ep, nil
}

// deleteEndpoint detaches the endpoint named name from its namespaces and
// deletes it; one that is not there is deleted.
func deleteEndpoint(name string) error {
	ep, err := findEndpoint(name, "")
	if hns.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	return deleteThisEndpoint(ep)
}

// deleteThisEndpoint detaches ep from its namespaces and deletes it.
func deleteThisEndpoint(ep *hcn.HostComputeEndpoint) error {
	nss, err := namespacesOf(ep)
	if err != nil {
		return err
	}
	for _, ns := range nss {
		if err := hcn.RemoveNamespaceEndpoint(ns, ep.Id); err != nil && !isNotFound(err) {
			return hnsError("hcn.RemoveNamespaceEndpoint", 0, err)
		}
	}
	if err := hnsError("HostComputeEndpoint.Delete", hns.CodeEndpointNotFound, ep.Delete()); err != nil && !hns.IsNotFound(err) {
		return err
	}
	return nil
}

// namespacesOf lists the namespaces ep is in: the one it names and any
// whose resources list it.
func namespacesOf(ep *hcn.HostComputeEndpoint) ([]string, error) {
	var out []string
	if ep.HostComputeNamespace != "" {
		out = append(out, ep.HostComputeNamespace)
	}
	nss, err := hcn.ListNamespaces()
	if err != nil {
		return nil, listError("hcn.ListNamespaces", err)
	}
	for i := range nss {
		ids, err := namespaceEndpoints(&nss[i])
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			if strings.EqualFold(id, ep.Id) && !strings.EqualFold(nss[i].Id, ep.HostComputeNamespace) {
				out = append(out, nss[i].Id)
			}
		}
	}
	return out, nil
}

// attachToHost attaches an endpoint to the host, the v2 form of HNS v1's
// HostAttach(1) (flannel host-gw's cbr0_ep): it adds the endpoint to the
// HostDefault namespace, which stands for the host's default network
// compartment, as hcsshim's ncproxy does for AttachToHost. If HNS lists
// no HostDefault namespace, one is created (it is the default
// compartment, not a new one) and left in place.
func attachToHost(ep *hcn.HostComputeEndpoint) error {
	ns, err := hostDefaultNamespace()
	if err != nil {
		return err
	}
	if strings.EqualFold(ep.HostComputeNamespace, ns) {
		return nil
	}
	err = hnsError("hcn.AddNamespaceEndpoint", hns.CodeEndpointNotFound, hcn.AddNamespaceEndpoint(ns, ep.Id))
	switch hns.Code(err) {
	case codeEndpointAlreadyAttached, codeEndpointNamespaceExists:
		return nil // a retried attach
	}
	return err
}

func hostDefaultNamespace() (string, error) {
	nss, err := hcn.ListNamespaces()
	if err != nil {
		return "", listError("hcn.ListNamespaces", err)
	}
	for _, ns := range nss {
		if ns.Type == hcn.NamespaceTypeHostDefault {
			return ns.Id, nil
		}
	}
	ns, err := hcn.NewNamespace(hcn.NamespaceTypeHostDefault).Create()
	if err != nil {
		return "", hnsError("HostComputeNamespace.Create", 0, err)
	}
	return ns.Id, nil
}

// --- ACLs ---

// applyACLs sets an endpoint's ACL list to op.ACLs and keeps its other
// policies as HNS holds them at the call (see hns.Op.ACLs): HNS's update
// replaces the endpoint's whole policy list, so the endpoint is read
// here, by ID when the op gives one, and its non-ACL policies are sent
// back exactly as read, followed by the ACLs, in the client's ACLForm.
// What is sent is decided by the portable aclUpdateV2 and aclUpdateV1.
// Another writer changing the endpoint between the read and the update
// (one HNS round trip) is not guarded against: HNS offers no
// compare-and-set.
func (c *Client) applyACLs(op hns.Op) error {
	if op.Action != hns.Update {
		return errUnsupportedOp(op)
	}
	if c.opts.aclForm == ACLFormV1 {
		return applyACLsV1(op)
	}
	return applyACLsV2(op)
}

// applyACLsV2 reads the endpoint through hcn and sends its new policy
// list in one ModifyEndpointSettings request (Policy, Update): the
// request hcn's ApplyPolicy builds, with the list given as raw JSON so
// that each kept policy is the object hcn read (its Type and its
// Settings as HNS returned them). hcn marshals the request, which
// compacts the whitespace of every policy and escapes <, > and & in its
// strings (encoding/json's treatment of raw JSON): the same JSON values,
// not always the same bytes. hcn's EndpointPolicy holds only Type and
// Settings, so a field of another name at a policy's top level (a flat
// v1 policy) cannot be kept through v2: hcnReadLoss refuses the update
// where that shows, and ACLFormV1 keeps such policies.
func applyACLsV2(op hns.Op) error {
	ep, err := opEndpoint(op)
	if err != nil {
		return err
	}
	if err := hcnReadLoss(fromEndpointPolicies(ep.Policies)); err != nil {
		return fmt.Errorf("endpoint %s: %w", ep.Id, err)
	}
	read := make([]json.RawMessage, len(ep.Policies))
	for i := range ep.Policies {
		if read[i], err = json.Marshal(&ep.Policies[i]); err != nil {
			return fmt.Errorf("endpoint %s: policy %d as read: %w", ep.Id, i, err)
		}
	}
	ps, err := aclUpdateV2(read, op.ACLs)
	if err != nil {
		return fmt.Errorf("endpoint %s: %w", ep.Id, err)
	}
	settings, err := v2PolicyRequest(ps)
	if err != nil {
		return fmt.Errorf("endpoint %s: %w", ep.Id, err)
	}
	err = hcn.ModifyEndpointSettings(ep.Id, &hcn.ModifyEndpointSettingRequest{
		ResourceType: hcn.EndpointResourceTypePolicy,
		RequestType:  hcn.RequestTypeUpdate,
		Settings:     settings,
	})
	return hnsError("hcn.ModifyEndpointSettings", hns.CodeEndpointNotFound, err)
}

// applyACLsV1 reads the endpoint through HNS v1 (hcsshim keeps each of
// its Policies as the raw bytes of HNS's reply) and POSTs its new policy
// list to /endpoints/<id>: the HNS v1 call of hcsshim's
// HNSEndpoint.Update, under the ApplyACLPolicy that Calico Felix uses.
// The body is built here (v1UpdateBody), not by Update, whose
// json.Marshal would compact the kept policies and drop an empty list:
// the kept policies reach HNS byte for byte as HNS returned them.
func applyACLsV1(op hns.Op) error {
	ep, err := v1Endpoint(op)
	if err != nil {
		return err
	}
	ps, err := aclUpdateV1(ep.Policies, op.ACLs)
	if err != nil {
		return fmt.Errorf("endpoint %s: %w", ep.Id, err)
	}
	body, err := v1UpdateBody(ep.Id, ps)
	if err != nil {
		return fmt.Errorf("endpoint %s: %w", ep.Id, err)
	}
	_, err = hcsshim.HNSEndpointRequest("POST", ep.Id, string(body))
	return v1Error("HNS v1 POST /endpoints/"+ep.Id, hns.CodeEndpointNotFound, err)
}

// v1Endpoint is the endpoint an op acts on, read through HNS v1: the one
// of its ID when it gives one, else the one opEndpoint finds by name (on
// the op's network), read again by its ID. An endpoint that is no longer
// named as the op says is not found, as in opEndpoint.
func v1Endpoint(op hns.Op) (*hcsshim.HNSEndpoint, error) {
	id := op.ID
	if id == "" {
		ep, err := opEndpoint(op)
		if err != nil {
			return nil, err
		}
		id = ep.Id
	}
	ep, err := hcsshim.GetHNSEndpointByID(id)
	if err != nil {
		if hcsshim.IsNotExist(err) {
			return nil, &hns.Error{Call: "hcsshim.GetHNSEndpointByID", Code: hns.CodeEndpointNotFound, Msg: err.Error()}
		}
		return nil, v1Error("hcsshim.GetHNSEndpointByID", hns.CodeEndpointNotFound, err)
	}
	if ep.Name != op.Name {
		return nil, &hns.Error{Call: "hcsshim.GetHNSEndpointByID", Code: hns.CodeEndpointNotFound,
			Msg: fmt.Sprintf("endpoint %s is %q now, not %q", id, ep.Name, op.Name)}
	}
	return ep, nil
}

// setEndpointPolicies replaces an endpoint's policy list (RequestType
// Update). An empty list is sent as "Policies":[] (hcn's
// PolicyEndpointRequest would leave it out).
func setEndpointPolicies(ep *hcn.HostComputeEndpoint, ps []rawPolicy) error {
	if len(ps) > 0 {
		err := ep.ApplyPolicy(hcn.RequestTypeUpdate, hcn.PolicyEndpointRequest{Policies: toEndpointPolicies(ps)})
		return hnsError("HostComputeEndpoint.ApplyPolicy", hns.CodeEndpointNotFound, err)
	}
	err := hcn.ModifyEndpointSettings(ep.Id, &hcn.ModifyEndpointSettingRequest{
		ResourceType: hcn.EndpointResourceTypePolicy,
		RequestType:  hcn.RequestTypeUpdate,
		Settings:     json.RawMessage(`{"Policies":[]}`),
	})
	return hnsError("hcn.ModifyEndpointSettings", hns.CodeEndpointNotFound, err)
}

// Capture reads every network, endpoint, load balancer and namespace of
// HNS as HNS wrote them (hcn's documents, unchanged), for
// `hnsplan-agent capture`: bug reports and new fixtures. DecodeCapture
// reads it as Snapshot would.
func (c *Client) Capture(ctx context.Context) (*Capture, error) {
	out := &Capture{Format: CaptureFormat, Source: "hnswin", Features: c.features,
		Networks: []json.RawMessage{}, Endpoints: []json.RawMessage{}, LoadBalancers: []json.RawMessage{}}
	add := func(list *[]json.RawMessage, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		*list = append(*list, b)
		return nil
	}
	nets, err := hcn.ListNetworks()
	if err != nil {
		return nil, fmt.Errorf("hnswin: capture: %w", listError("hcn.ListNetworks", err))
	}
	for i := range nets {
		if err := add(&out.Networks, &nets[i]); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	eps, err := hcn.ListEndpoints()
	if err != nil {
		return nil, fmt.Errorf("hnswin: capture: %w", listError("hcn.ListEndpoints", err))
	}
	for i := range eps {
		if err := add(&out.Endpoints, &eps[i]); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lbs, err := hcn.ListLoadBalancers()
	if err != nil {
		return nil, fmt.Errorf("hnswin: capture: %w", listError("hcn.ListLoadBalancers", err))
	}
	for i := range lbs {
		if err := add(&out.LoadBalancers, &lbs[i]); err != nil {
			return nil, err
		}
	}
	nss, err := hcn.ListNamespaces()
	if err != nil {
		return nil, fmt.Errorf("hnswin: capture: %w", listError("hcn.ListNamespaces", err))
	}
	for i := range nss {
		if err := add(&out.Namespaces, &nss[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}
