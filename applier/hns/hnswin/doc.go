// Package hnswin is the hns.Client that talks to the real Host Networking
// Service of a Windows node, through the HNS v2 (hcn) API of
// github.com/Microsoft/hcsshim, and, for ACL updates in ACLFormV1, its HNS
// v1 API (hcsshim's HNSEndpoint). It is the only package of the module
// that imports hcsshim, and no hcsshim type leaves it: Snapshot
// translates hcn networks, endpoints and load balancers into the hns
// model, and Apply translates each hns.Op back into hcn (or v1) calls.
//
// Everything that needs hcsshim's calls lives in *_windows.go files; on
// other systems the package holds only its portable helpers (the ACL
// wire formats, v2 with the Id field hcsshim's AclPolicySetting lacks and
// v1's flat one, what an ACL update sends, the policy codecs, MAC
// formatting, the HRESULT classification), which are tested on Linux.
// The hcn calls themselves are covered by integration tests that need an
// elevated Windows host with the Containers feature:
//
//	go test -tags integration -run Integration ./applier/hns/hnswin/
//
// # Translation
//
// A network's identity (type, subnets, gateways, VSID) is set when it is
// created; its VxlanPort, HostRoute and NetAdapterName policies are
// created with it and changed in place with ModifyNetworkSettings; its
// RemoteSubnetRoute policies are added and removed one by one (KindRoute)
// or many in one ModifyNetworkSettings request (KindRoutes, the
// applier's batches), a removal sending back the exact policies read
// from HNS. The ProviderAddress and
// DrMacAddress policies HNS adds to an Overlay network are read into
// Network.ProviderAddress and Network.DRMAC and never written.
//
// An endpoint's ACL policies (Type "ACL" in any case, in v2's or v1's
// form) are read with their Id into Endpoint.ACLs and its other policies
// into Endpoint.Policies, typed where plan knows the type and the typed
// form loses nothing, plan.Raw otherwise.
//
// An ACL update (KindACL) sets the endpoint's ACL list to Op.ACLs and
// keeps its other policies as HNS holds them at the call: HNS's update
// replaces an endpoint's whole policy list, so the client reads the
// endpoint then (by the op's ID when it has one: HNS does not keep names
// unique) and sends back each of its non-ACL policies as the very JSON
// it read, not decoded into plan's types and encoded again, so that the
// policies of an endpoint another CNI created (Azure CNI's OutBoundNAT
// and SDNRoute, the VPC CNI's two SDNRoutes, flannel's PA, an L2Driver,
// fields and forms hnsplan does not know) survive as they were; the ACLs
// follow, after every kept policy. Every ACL read is dropped: the op's
// list is the whole list. What is sent is decided by portable functions
// (aclUpdateV2, aclUpdateV1, in aclwrite.go), tested on every endpoint
// document of testdata/real, which must reach HNS with its non-ACL
// policies unchanged.
//
// A host endpoint (Endpoint.HostAttached) is attached to the host by
// adding it to the HostDefault namespace (the host's default
// compartment), the v2 form of HNS v1's HostAttach(1).
//
// # Writing ACLs
//
// The client writes an endpoint's ACL list in one of two forms
// (WithACLForm; hnsplan-agent's --hns windows and windows-v1):
//
//   - ACLFormV2, the default, reads the endpoint through hcn and sends
//     its list in one ModifyEndpointSettings request (Policy, Update):
//     the call Azure NPM makes when it removes ACLs, with the other
//     policies first, as NPM sends them. hcn holds a policy as its Type
//     and its Settings (raw JSON), which reach HNS as read, compacted by
//     hcn's json.Marshal; a field outside Settings (a flat v1 policy, if
//     HNS's v2 view ever returned one) would be lost, so an update that
//     shows such a loss (hcnReadLoss) is refused.
//   - ACLFormV1 reads the endpoint through HNS v1 (GET /endpoints/<id>,
//     whose policies hcsshim keeps as raw bytes) and POSTs
//     {"ID":…,"Policies":[…]} to /endpoints/<id>: the call under
//     hcsshim's HNSEndpoint.ApplyACLPolicy, which Calico Felix makes on
//     the same endpoints (Azure CNI's on AKS, vpc-bridge's on EKS). The
//     kept policies reach HNS byte for byte as HNS returned them; the
//     ACLs are in v1's flat form (hcsshim's ACLPolicy, with the Id).
//
// Both exist because neither is known to be right for every endpoint.
// Whether HNS's v2 update keeps, exactly, the policies of an endpoint
// created through v1 (Azure CNI with dockershim, Calico's, flannel's
// win-overlay with apiVersion 1) is unverified on a real host: v2 may
// read them in another form than v1 wrote them. The v1 form is what
// Felix uses on such endpoints. Two differences from Felix are unverified
// too. Felix sends only its ACLs (that HNS v1 then keeps the other
// policies is inferred from the CNI's NAT and routes working under
// Felix, not documented), where ACLFormV1 sends the non-ACL policies back
// as read, as the v2 form must: whether HNS v1 takes them as unchanged or
// adds them again is not known. And ACLFormV1 sends an empty list as
// "Policies":[] where hcsshim would leave it out. The integration test
// TestIntegrationOverlay/ACL-on-v1-endpoint checks both forms on a
// v1-created endpoint; run it on a host before relying on either for
// endpoints another CNI created.
//
// # Errors
//
// Failed hcn calls come back as *hns.Error carrying the HRESULT, so that
// hns.IsNotFound and hns.IsTransient work; deleting what is already gone
// succeeds. HNS v1's errors carry a code only when the call itself
// failed; v1Error reads it, and HNS's "Element not found" refusal, from
// their text. hcn calls do not take a context: Apply and Snapshot check
// ctx between calls, not during one.
package hnswin
