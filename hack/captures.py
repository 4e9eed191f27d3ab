# Assembles the examples' HNS captures (hnsplan-capture/1): the networks and
# endpoints each CNI leaves on a node, in the v2 JSON hcn returns, shaped
# as applier/hns/hnswin/testdata/real/08, 09 and 10 are (their sources are
# in that folder's README).
import json, uuid, hashlib

def gid(*parts):
    return str(uuid.UUID(hashlib.sha256("/".join(parts).encode()).hexdigest()[:32]))

def hexid(*parts, n=8):
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:n]

def net(name, typ, prefix, gw, policies=None, flags=0, vsid=None):
    sub = {"IpAddressPrefix": prefix, "Routes": [{"NextHop": gw, "DestinationPrefix": "0.0.0.0/0"}]}
    if vsid:
        sub["Policies"] = [{"Type": "VSID", "Settings": {"IsolationId": vsid}}]
    d = {"ID": gid("net", name), "Name": name, "Type": typ, "Ipams": [{"Type": "Static", "Subnets": [sub]}]}
    if policies:
        d["Policies"] = policies
    if flags:
        d["Flags"] = flags
    d["SchemaVersion"] = {"Major": 2, "Minor": 0}
    return d

def ep(name, network, ip, plen, policies, mac, ns=None, flags=0, dns=None):
    d = {"ID": gid("ep", name), "Name": name, "HostComputeNetwork": gid("net", network)}
    if ns:
        d["HostComputeNamespace"] = gid("ns", ns)
    d["Policies"] = policies
    d["IpConfigurations"] = [{"IpAddress": ip, "PrefixLength": plen}]
    if dns:
        d["Dns"] = dns
    d["MacAddress"] = mac
    if flags:
        d["Flags"] = flags
    d["SchemaVersion"] = {"Major": 2, "Minor": 0}
    return d

def lb(name, vip, backends):
    return {"ID": gid("lb", name), "HostComputeEndpoints": [gid("ep", b) for b in backends], "FrontendVIPs": [vip],
            "PortMappings": [{"Protocol": 6, "InternalPort": 80, "ExternalPort": 80}], "SchemaVersion": {"Major": 2, "Minor": 0}}

def capture(networks, endpoints, lbs, note):
    return {"format": "hnsplan-capture/1", "source": "assembled: " + note,
            "features": {"V2API": True, "RemoteRoute": True, "VxlanPort": True, "ACLRuleID": True, "Version": "13.3"},
            "networks": networks, "endpoints": endpoints, "loadBalancers": lbs}

def write(path, c):
    with open(path, "w") as f:
        json.dump(c, f, indent=1)
        f.write("\n")

nat = net("nat", "NAT", "172.29.144.0/20", "172.29.144.1", flags=8)

# AKS, Azure CNI (not overlay): the conflist AgentBaker writes
# (Set-AzureCNIConfig): OutBoundNAT except the cluster and VNet CIDRs,
# ROUTE (SDNRoute in v2) to the service CIDR, and four ACLs without Id.
aks_acls = [
    {"Type": "ACL", "Settings": {"Protocols": "6", "Action": "Block", "Direction": "Out", "RemoteAddresses": "168.63.129.16/32", "RemotePorts": "80", "RuleType": "Switch", "Priority": 200}},
    {"Type": "ACL", "Settings": {"Protocols": "6", "Action": "Block", "Direction": "Out", "RemoteAddresses": "168.63.129.16/32", "RemotePorts": "32526", "RuleType": "Switch", "Priority": 200}},
    {"Type": "ACL", "Settings": {"Action": "Allow", "Direction": "In", "Priority": 65500}},
    {"Type": "ACL", "Settings": {"Action": "Allow", "Direction": "Out", "Priority": 65500}},
]
def aks_pod(sandbox, ip):
    pol = [{"Type": "OutBoundNAT", "Settings": {"Exceptions": ["10.224.0.0/16", "10.224.0.0/12"]}},
           {"Type": "SDNRoute", "Settings": {"DestinationPrefix": "10.0.0.0/16", "NeedEncap": True}}] + aks_acls
    o = [int(x) for x in ip.split(".")]
    return ep(hexid("aks", sandbox) + "-eth0", "azure", ip, 16, pol, "00-15-5D-%02X-%02X-%02X" % (0x2E, o[2], o[3]),
              ns=sandbox, dns={"Search": ["svc.cluster.local"], "ServerList": ["10.0.0.10", "168.63.129.16"]})
aks_eps = [aks_pod("storefront-7c9f4d8b5-2xkqp", "10.224.0.40"), aks_pod("orders-api-84d6c9f7b-vt5rj", "10.224.0.41")]
write("examples/inventory/aks-azure-cni-akswin000000.capture.json", capture(
    [net("azure", "L2Bridge", "10.224.0.0/16", "10.224.0.1", [{"Type": "NetAdapterName", "Settings": {"NetworkAdapterName": "Ethernet 2"}}]), nat],
    aks_eps,
    [lb("storefront", "10.0.113.20", [aks_eps[0]["Name"]]), lb("orders-api", "10.0.58.7", [aks_eps[1]["Name"]])],
    "the network and endpoints Azure CNI makes on an AKS Windows node (applier/hns/hnswin/testdata/real/08), the NAT network of the Containers feature, kube-proxy's load balancers"))

# EKS, the VPC CNI's vpc-bridge: network vpcbr<ENI MAC> on the ENI's subnet,
# endpoints cid-<namespace GUID> with OutBoundNAT except the VPC and service
# CIDRs, SDNRoute to the service CIDR and to the host's primary address.
def eks_pod(sandbox, ip):
    pol = [{"Type": "OutBoundNAT", "Settings": {"Exceptions": ["192.168.0.0/16", "10.100.0.0/16"]}},
           {"Type": "SDNRoute", "Settings": {"DestinationPrefix": "10.100.0.0/16", "NeedEncap": True}},
           {"Type": "SDNRoute", "Settings": {"DestinationPrefix": "192.168.96.45/32", "NeedEncap": True}}]
    o = [int(x) for x in ip.split(".")]
    return ep("cid-" + gid("ns", sandbox), "vpcbr0a1b2c3d4e5f", ip, 19, pol, "00-15-5D-%02X-%02X-%02X" % (0x8C, o[2], o[3]), ns=sandbox,
              dns={"Search": ["default.svc.cluster.local", "svc.cluster.local", "cluster.local"], "ServerList": ["10.100.0.10"]})
eks_eps = [eks_pod("claims-api-6b8d5f9c7-w2kzr", "192.168.101.17"), eks_pod("claims-worker-5f7c8d6b9-l9pqx", "192.168.101.23")]
write("examples/inventory/eks-vpc-cni-ip-192-168-96-45.capture.json", capture(
    [net("vpcbr0a1b2c3d4e5f", "L2Bridge", "192.168.96.0/19", "192.168.96.1", [{"Type": "NetAdapterName", "Settings": {"NetworkAdapterName": "Ethernet 3"}}]), nat],
    eks_eps,
    [lb("claims-api", "10.100.71.9", [eks_eps[0]["Name"]])],
    "the network and endpoints the VPC CNI's vpc-bridge makes on an EKS Windows node (applier/hns/hnswin/testdata/real/09), the NAT network of the Containers feature, kube-proxy's load balancer"))

# flannel VXLAN: flanneld's Overlay network flannel.4096 (VSID 4096, HNS's
# ProviderAddress and DR MAC), win-overlay/sdnoverlay endpoints
# <sandbox>_flannel.4096 with MAC 0E-2A-<ip hex>, PA, OutBoundNAT and
# ROUTE, and kube-proxy's remote endpoint for a pod on the Linux node.
def fl_pod(sandbox, ip):
    o = [int(x) for x in ip.split(".")]
    pol = [{"Type": "OutBoundNAT", "Settings": {"Exceptions": ["10.244.0.0/16", "10.96.0.0/12", "10.127.130.0/24"]}},
           {"Type": "SDNRoute", "Settings": {"DestinationPrefix": "10.96.0.0/12", "NeedEncap": True}},
           {"Type": "ProviderAddress", "Settings": {"ProviderAddress": "10.127.130.21"}}]
    return ep(hexid("fl", sandbox, n=64) + "_flannel.4096", "flannel.4096", ip, 24, pol, "0E-2A-%02X-%02X-%02X-%02X" % tuple(o), ns=sandbox,
              dns={"Search": ["svc.cluster.local"], "ServerList": ["10.96.0.10"]})
fl_eps = [fl_pod("reports-6d9c8b7f5-x4mzq", "10.244.1.10"), fl_pod("reports-6d9c8b7f5-p8k2j", "10.244.1.11")]
remote = ep("7f3c2a1e-remote", "flannel.4096", "10.244.0.5", 32,
            [{"Type": "ProviderAddress", "Settings": {"ProviderAddress": "10.127.130.10"}}], "02-11-0A-F4-00-05", flags=1)
flnet = net("flannel.4096", "Overlay", "10.244.1.0/24", "10.244.1.1",
            [{"Type": "NetAdapterName", "Settings": {"NetworkAdapterName": "Ethernet"}}, {"Type": "HostRoute", "Settings": {}},
             {"Type": "ProviderAddress", "Settings": {"ProviderAddress": "10.127.130.21"}},
             {"Type": "DrMacAddress", "Settings": {"Address": "00-15-5D-82-A1-0C"}},
             {"Type": "RemoteSubnetRoute", "Settings": {"DestinationPrefix": "10.244.0.0/24", "IsolationId": 4096, "ProviderAddress": "10.127.130.10", "DistributedRouterMacAddress": "66:bb:2c:4d:01:0a"}},
             {"Type": "RemoteSubnetRoute", "Settings": {"DestinationPrefix": "10.244.2.0/24", "IsolationId": 4096, "ProviderAddress": "10.127.130.22", "DistributedRouterMacAddress": "00-15-5D-82-A2-0C"}}],
            flags=8, vsid=4096)
write("examples/inventory/flannel-vxlan-win-1.capture.json", capture(
    [flnet, nat], fl_eps + [remote], [lb("reports", "10.96.140.12", [fl_eps[0]["Name"], fl_eps[1]["Name"]])],
    "the Overlay network flanneld makes and the endpoints win-overlay makes on a Windows node (applier/hns/hnswin/testdata/real/10, in the v2 form), kube-proxy's remote endpoint and load balancer"))
