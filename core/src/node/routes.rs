//! Routes to the other nodes' pod CIDRs (cluster mode, host-gw): for every other node with a
//! pod CIDR and an InternalIP of the same family on a subnet this node is directly connected
//! to, `<pod CIDR> via <InternalIP>` in the main table with knid's own protocol
//! ([`RTPROT_KNID`]), so knid only ever removes routes it made. A node that is not directly
//! reachable is reported, never routed through a gateway it cannot know.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use knid_netops::route::{Route, RouteScope, RTPROT_KNID};
use knid_netops::Rtnl;

use crate::error::{Error, Result};
pub use crate::model::{NodeRoute, RouteState};

/// The main routing table.
const MAIN: u32 = 254;

/// What a node's object says, as far as its routes go.
#[derive(Debug, Clone)]
pub struct Peer<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its pod CIDRs.
    pub pod_cidrs: &'a [IpNet],
    /// Its InternalIPs.
    pub internal_ips: &'a [IpAddr],
}

/// The routes `peers` call for on this node, whose own pod CIDRs are `own` and whose
/// addresses (with their prefixes) are `local`: each with its InternalIP when one of the same
/// family is on a directly connected subnet, else [`RouteState::Unreachable`] and why.
pub fn plan(peers: &[Peer<'_>], own: &[IpNet], local: &[IpNet]) -> Vec<NodeRoute> {
    let mut out = Vec::new();
    for peer in peers {
        for dst in peer.pod_cidrs {
            let v6 = dst.addr().is_ipv6();
            let same_family: Vec<IpAddr> = peer
                .internal_ips
                .iter()
                .copied()
                .filter(|ip| ip.is_ipv6() == v6)
                .collect();
            let connected = same_family.iter().copied().find(|ip| {
                local.iter().any(|net| {
                    net.contains(ip) && net.addr() != *ip && net.prefix_len() < net.max_prefix_len()
                })
            });
            let (via, state, message) =
                if let Some(own) = own.iter().find(|o| o.contains(dst) || dst.contains(*o)) {
                    (
                        None,
                        RouteState::Failed,
                        format!("overlaps this node's pod CIDR {own}"),
                    )
                } else {
                    match (connected, same_family.first()) {
                        (Some(ip), _) => (Some(ip), RouteState::Installed, String::new()),
                        (None, Some(ip)) => (
                            None,
                            RouteState::Unreachable,
                            format!(
                            "InternalIP {ip} is not on a subnet this node is directly connected \
                             to (routes to other nodes need the nodes on one L2)"
                        ),
                        ),
                        (None, None) => (
                            None,
                            RouteState::Unreachable,
                            format!(
                                "the node has no {} InternalIP",
                                if v6 { "IPv6" } else { "IPv4" }
                            ),
                        ),
                    }
                };
            out.push(NodeRoute {
                node: peer.name.to_owned(),
                dst: *dst,
                via,
                state,
                message,
            });
        }
    }
    out.sort_by(|a, b| (&a.node, a.dst).cmp(&(&b.node, b.dst)));
    out
}

/// The addresses of the calling thread's netns, with their prefixes: what "directly
/// connected" is judged against.
pub fn local_networks(rtnl: &mut Rtnl) -> Result<Vec<IpNet>> {
    Ok(rtnl
        .addresses(None)
        .map_err(|e| Error::kernel("list the node's addresses", e))?
        .into_iter()
        .map(|a| a.net)
        .collect())
}

/// What one pass over the kernel changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Routes added (or put back after someone deleted them).
    pub added: usize,
    /// knid's routes removed (their node went, or its CIDR or address changed).
    pub removed: usize,
}

/// The destinations of knid's routes to other nodes' pods in the kernel now.
pub fn destinations(rtnl: &mut Rtnl) -> Result<Vec<IpNet>> {
    let mut out = Vec::new();
    for v6 in [false, true] {
        let routes = rtnl
            .routes(v6)
            .map_err(|e| Error::kernel("list routes", e))?;
        out.extend(
            routes
                .into_iter()
                .filter(|r| r.protocol == RTPROT_KNID)
                .map(|r| r.dst),
        );
    }
    Ok(out)
}

/// Makes knid's routes in the main table (both families) exactly those of `routes` that are
/// [`RouteState::Installed`]: adds the missing, replaces the changed, removes knid's others.
/// A destination held by someone else's route is left alone and its entry turns
/// [`RouteState::Failed`]; so does one the kernel refuses.
pub fn apply(rtnl: &mut Rtnl, routes: &mut [NodeRoute]) -> Result<Applied> {
    let mut applied = Applied::default();
    let mut present: BTreeMap<IpNet, Route> = BTreeMap::new();
    let mut foreign: BTreeMap<IpNet, u8> = BTreeMap::new();
    for v6 in [false, true] {
        for route in rtnl
            .routes(v6)
            .map_err(|e| Error::kernel("list routes", e))?
        {
            if route.protocol == RTPROT_KNID {
                present.insert(route.dst, route);
            } else {
                foreign.insert(route.dst, route.protocol);
            }
        }
    }
    for entry in routes.iter_mut() {
        let Some(via) = entry.via.filter(|_| entry.state == RouteState::Installed) else {
            continue;
        };
        if let Some(protocol) = foreign.get(&entry.dst) {
            entry.state = RouteState::Failed;
            entry.message = format!(
                "another route to {} (protocol {protocol}) is in the main table; knid leaves it alone",
                entry.dst
            );
            continue;
        }
        match present.remove(&entry.dst) {
            Some(route) if route.gateway == Some(via) => continue,
            _ => {}
        }
        let route = Route {
            dst: entry.dst,
            gateway: Some(via),
            oif: None,
            table: MAIN,
            mtu: None,
            scope: RouteScope::Universe,
            protocol: RTPROT_KNID,
            metric: None,
            onlink: false,
        };
        match rtnl.add_route(&route) {
            Ok(()) => {
                applied.added += 1;
                log::info!(
                    "route to node {}'s pods {} via {via} added",
                    entry.node,
                    entry.dst
                );
            }
            Err(e) => {
                entry.state = RouteState::Failed;
                entry.message = format!("add route: {e}");
                log::warn!(
                    "route to node {}'s pods {} via {via}: {e}",
                    entry.node,
                    entry.dst
                );
            }
        }
    }
    for route in present.into_values() {
        match rtnl.delete_route(&route) {
            Ok(_) => {
                applied.removed += 1;
                log::info!(
                    "route to {} (no node of the cluster has it any more) removed",
                    route.dst
                );
            }
            Err(e) => log::warn!("remove route to {}: {e}", route.dst),
        }
    }
    Ok(applied)
}

#[cfg(test)]
mod tests;
