// Package hnswin is the hns.Client that talks to the real Host Networking
// Service of a Windows node, through the HNS v2 (hcn) API of
// github.com/Microsoft/hcsshim. It is the only package of the module that
// imports hcsshim, and no hcn type leaves it: Snapshot translates hcn
// networks, endpoints and load balancers into the hns model, and Apply
// translates each hns.Op back into hcn calls.
//
// Everything that needs hcn lives in *_windows.go files; on other systems
// the package holds only its portable helpers (the ACL wire format with
// the Id field hcsshim's AclPolicySetting lacks, the policy codecs, MAC
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
// An endpoint's ACL policies are read with their Id into Endpoint.ACLs and
// its other policies into Endpoint.Policies, typed where plan knows the
// type and the typed form loses nothing, plan.Raw otherwise, so that an
// ACL update, which replaces the endpoint's whole policy list, sends the
// other policies back unchanged.
//
// A host endpoint (Endpoint.HostAttached) is attached to the host by
// adding it to the HostDefault namespace (the host's default
// compartment), the v2 form of HNS v1's HostAttach(1).
//
// # Errors
//
// Failed hcn calls come back as *hns.Error carrying the HRESULT, so that
// hns.IsNotFound and hns.IsTransient work; deleting what is already gone
// succeeds. hcn calls do not take a context: Apply and Snapshot check ctx
// between calls, not during one.
package hnswin
