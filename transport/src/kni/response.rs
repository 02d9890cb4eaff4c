//! Core results → KNI responses. `ipconfigs` holds the pod-side interfaces only, keyed by their
//! name, with plain addresses in `ip` (what the KNI kubelet parses); everything the beta proto
//! has no field for travels in extradata under the keys below, empty values left out.

use std::collections::HashMap;

use knid_core::{Family, InterfaceResult, MacAddr, NetnsInfo, NetworkInfo, Sandbox};

use crate::pb::kni;

/// CreateNetwork response key: the netns inode.
pub const NETNS_INODE: &str = "netns_inode";
/// CreateNetwork response key: `true` when this call created the netns, `false` for a repeat.
pub const CREATED: &str = "created";
/// AttachInterface/QueryPodNetwork response key: the sandbox's netns path.
pub const NETNS: &str = "netns";
/// AttachInterface/QueryPodNetwork response key: knid's state of the sandbox (`attached`, ...).
pub const SANDBOX_STATE: &str = "sandbox_state";
/// IPConfig key: the addresses as CIDRs, comma-separated, in the order of `ip`.
pub const PREFIXES: &str = "prefixes";
/// IPConfig key: the gateways, comma-separated, IPv4 first.
pub const GATEWAYS: &str = "gateways";
/// IPConfig key: the routes, comma-separated, each `<dst> via <gateway>` or `<dst> dev <ifname>`.
pub const ROUTES: &str = "routes";
/// IPConfig key: the interface MTU.
pub const MTU: &str = "mtu";
/// IPConfig key: the knid network of the interface.
pub const NETWORK: &str = "network";
/// IPConfig key (and Network key): the interface kind (the network's kind).
pub const KIND: &str = "kind";
/// IPConfig key: the host side of the interface (veth host end, parent device).
pub const HOST_IFNAME: &str = "host_ifname";
/// Network key: the subnets as CIDRs, comma-separated.
pub const SUBNETS: &str = "subnets";
/// Network key: free IPv4 addresses of the pool (only when it has IPv4).
pub const FREE_IPV4: &str = "free_ipv4";
/// Network key: free IPv6 addresses of the pool (only when it has IPv6).
pub const FREE_IPV6: &str = "free_ipv6";
/// Network key: free ports of a bridge network's bridge (a Linux bridge takes 1023).
pub const FREE_BRIDGE_PORTS: &str = "free_bridge_ports";
/// Network key: `true` when it has room for another pod, `false` when a family of its pool is
/// exhausted or its bridge has no free port (the network stays `ready`: its pods run on; only
/// new attaches are refused).
pub const SCHEDULABLE: &str = "schedulable";
/// Network key: why it is not ready (`NodeNetworkBroken`, `PluginNotAvailable`).
pub const REASON: &str = "reason";
/// Network key: what is wrong, when not ready.
pub const MESSAGE: &str = "message";
/// QueryNodeNetworks response key: whether the node is ready (knid.v1 Status).
pub const READY: &str = "ready";

/// Encodes the CreateNetwork response.
pub fn create_network(netns: &NetnsInfo) -> kni::CreateNetworkResponse {
    let mut out = kni::CreateNetworkResponse::new();
    out.netns_path = netns.path.to_string_lossy().into_owned();
    out.extradata = [
        (NETNS_INODE, netns.inode.to_string()),
        (CREATED, netns.created.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    out
}

/// Encodes the AttachInterface response.
pub fn attach_interface(s: &Sandbox) -> kni::AttachInterfaceResponse {
    let mut out = kni::AttachInterfaceResponse::new();
    out.ipconfigs = ipconfigs(s);
    out.extradata = sandbox_extradata(s);
    out
}

/// Encodes the QueryPodNetwork response: the same content as AttachInterface's.
pub fn query_pod_network(s: &Sandbox) -> kni::QueryPodNetworkResponse {
    let mut out = kni::QueryPodNetworkResponse::new();
    out.ipconfigs = ipconfigs(s);
    out.extradata = sandbox_extradata(s);
    out
}

/// Encodes the QueryNodeNetworks response; `ready` is the node's readiness.
pub fn query_node_networks(list: &[NetworkInfo], ready: bool) -> kni::QueryNodeNetworksResponse {
    let mut out = kni::QueryNodeNetworksResponse::new();
    out.networks = list.iter().map(network).collect();
    out.extradata = [(READY.to_owned(), ready.to_string())].into();
    out
}

fn sandbox_extradata(s: &Sandbox) -> HashMap<String, String> {
    extradata([
        (NETNS, s.netns_path.to_string_lossy().into_owned()),
        (SANDBOX_STATE, s.state().as_str().to_owned()),
    ])
}

fn ipconfigs(s: &Sandbox) -> HashMap<String, kni::IPConfig> {
    s.interfaces
        .iter()
        .map(|i| (i.name.to_string(), ipconfig(i)))
        .collect()
}

fn ipconfig(i: &InterfaceResult) -> kni::IPConfig {
    // IPv4 first: the KNI kubelet takes ip[0] as the pod IP. The sort is stable, so each
    // family keeps knid's order.
    let mut ips: Vec<_> = i.ips.iter().collect();
    ips.sort_by_key(|c| Family::of(&c.address.addr()));
    let mut out = kni::IPConfig::new();
    out.ip = ips.iter().map(|c| c.address.addr().to_string()).collect();
    if i.mac != MacAddr::UNKNOWN {
        out.mac = i.mac.to_string();
    }
    let routes = i.routes.iter().map(|r| match r.gateway {
        Some(gateway) => format!("{} via {gateway}", r.dst),
        None => format!("{} dev {}", r.dst, i.name),
    });
    out.extradata = extradata([
        (PREFIXES, join(ips.iter().map(|c| c.address))),
        (GATEWAYS, join(ips.iter().filter_map(|c| c.gateway))),
        (ROUTES, join(routes)),
        (
            MTU,
            if i.mtu == 0 {
                String::new()
            } else {
                i.mtu.to_string()
            },
        ),
        (NETWORK, i.network.clone()),
        (KIND, i.kind.as_str().to_owned()),
        (HOST_IFNAME, i.host_side_name().to_owned()),
    ]);
    out
}

fn network(n: &NetworkInfo) -> kni::Network {
    let mut out = kni::Network::new();
    out.name = n.name.clone();
    out.ready = n.ready;
    let free = |family: Family| {
        n.capacity
            .iter()
            .find(|c| c.family == family)
            .map(|c| c.free.to_string())
            .unwrap_or_default()
    };
    let (reason, message) = if n.ready {
        (String::new(), String::new())
    } else {
        (n.reason.clone(), n.message.clone())
    };
    out.extradata = extradata([
        (KIND, n.kind.clone()),
        (SUBNETS, join(n.subnets.iter())),
        (FREE_IPV4, free(Family::V4)),
        (FREE_IPV6, free(Family::V6)),
        (
            FREE_BRIDGE_PORTS,
            n.ports
                .as_ref()
                .map(|p| p.free.to_string())
                .unwrap_or_default(),
        ),
        (SCHEDULABLE, n.schedulable.to_string()),
        (REASON, reason),
        (MESSAGE, message),
    ]);
    out
}

/// The entries with a value, as an extradata map.
fn extradata<const N: usize>(entries: [(&str, String); N]) -> HashMap<String, String> {
    entries
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
}

fn join<T: ToString>(items: impl IntoIterator<Item = T>) -> String {
    items
        .into_iter()
        .map(|item| item.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests;
