//! Routes to the other nodes' pod CIDRs (cluster mode), in the main table with knid's own
//! protocol ([`RTPROT_KNID`]), so knid only ever removes routes it made: host-gw, `<pod CIDR>
//! via <InternalIP>`, for every other node with an InternalIP of the same family on a subnet
//! this node is directly connected to; VXLAN, `<pod CIDR> via <its VTEP address> dev vxlan.knid
//! onlink`, for the others when the backend allows it (`node::overlay` keeps the device, its
//! FDB and neighbours). A node reached neither way is reported, never routed through a
//! gateway knid cannot know.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use knid_netops::route::{Route, RouteScope, RTPROT_KNID};
use knid_netops::{Address, Rtnl};

use super::overlay::Vtep;
use crate::config::Backend;
use crate::error::{Error, Result};
pub use crate::model::{NodeRoute, OverlayPath, RouteBackend, RouteState};

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
    /// Its VXLAN endpoint, once it has published one (`Err`: what is wrong with it).
    pub vtep: Option<&'a std::result::Result<Vtep, String>>,
}

/// What the routes may use besides host-gw: the backend, this node's endpoint, and its
/// overlay device per family (`Err`: why there is none).
#[derive(Debug, Clone)]
pub struct Overlay {
    /// The configured backend.
    pub backend: Backend,
    /// This node's endpoint (VNI, port).
    pub vtep: Vtep,
    /// The IPv4 device (ifindex and name), or why it could not be set up.
    pub v4: std::result::Result<(u32, String), String>,
    /// The IPv6 device.
    pub v6: std::result::Result<(u32, String), String>,
}

impl Overlay {
    /// Only host-gw.
    pub fn host_gw() -> Overlay {
        Overlay {
            backend: Backend::HostGw,
            vtep: Vtep {
                vni: 0,
                port: 0,
                mac: [0; 6],
            },
            v4: Err(String::new()),
            v6: Err(String::new()),
        }
    }
}

/// The routes `peers` call for on this node, whose own pod CIDRs are `own` and whose
/// addresses (with their prefixes) are `local`: host-gw via the peer's InternalIP when one of
/// the same family is on a directly connected subnet, VXLAN when `overlay`'s backend says so,
/// else [`RouteState::Unreachable`] and why.
pub fn plan(
    peers: &[Peer<'_>],
    own: &[IpNet],
    local: &[IpNet],
    overlay: &Overlay,
) -> Vec<NodeRoute> {
    let mut out = Vec::new();
    for peer in peers {
        for dst in peer.pod_cidrs {
            let mut route = NodeRoute {
                node: peer.name.to_owned(),
                dst: *dst,
                via: None,
                state: RouteState::Installed,
                message: String::new(),
                backend: RouteBackend::HostGw,
                overlay: None,
            };
            plan_one(peer, dst, own, local, overlay, &mut route);
            out.push(route);
        }
    }
    out.sort_by(|a, b| (&a.node, a.dst).cmp(&(&b.node, b.dst)));
    out
}

fn plan_one(
    peer: &Peer<'_>,
    dst: &IpNet,
    own: &[IpNet],
    local: &[IpNet],
    overlay: &Overlay,
    route: &mut NodeRoute,
) {
    let v6 = dst.addr().is_ipv6();
    let mut fail = |state: RouteState, message: String| {
        route.state = state;
        route.message = message;
    };
    if let Some(own) = own.iter().find(|o| o.contains(dst) || dst.contains(*o)) {
        return fail(
            RouteState::Failed,
            format!("overlaps this node's pod CIDR {own}"),
        );
    }
    let same_family: Vec<IpAddr> = peer
        .internal_ips
        .iter()
        .copied()
        .filter(|ip| ip.is_ipv6() == v6)
        .collect();
    let Some(&first) = same_family.first() else {
        return fail(
            RouteState::Unreachable,
            format!(
                "the node has no {} InternalIP",
                if v6 { "IPv6" } else { "IPv4" }
            ),
        );
    };
    let connected = same_family.iter().copied().find(|ip| {
        local.iter().any(|net| {
            net.contains(ip) && net.addr() != *ip && net.prefix_len() < net.max_prefix_len()
        })
    });
    match (overlay.backend, connected) {
        (Backend::HostGw | Backend::Auto, Some(ip)) => route.via = Some(ip),
        (Backend::HostGw, None) => fail(
            RouteState::Unreachable,
            format!(
                "InternalIP {first} is not on a subnet this node is directly connected to \
                 (backend host-gw needs the nodes on one L2; backend auto or vxlan reaches it \
                 through the overlay)"
            ),
        ),
        (Backend::Auto | Backend::Vxlan, _) => {
            route.backend = RouteBackend::Vxlan;
            let device = if v6 { &overlay.v6 } else { &overlay.v4 };
            let (_, device) = match device {
                Ok(d) => d,
                Err(why) => {
                    return fail(
                        RouteState::Failed,
                        format!("the overlay device of this node: {why}"),
                    )
                }
            };
            let vtep = match peer.vtep {
                None => {
                    return fail(
                        RouteState::AwaitingVtep,
                        format!(
                            "not on a subnet this node is directly connected to, and its Node \
                             has no {} annotation yet (knid publishes it once it runs there)",
                            super::overlay::vtep::ANNOTATION
                        ),
                    )
                }
                Some(Err(why)) => return fail(RouteState::Failed, why.clone()),
                Some(Ok(vtep)) => vtep,
            };
            if (vtep.vni, vtep.port) != (overlay.vtep.vni, overlay.vtep.port) {
                return fail(
                    RouteState::Failed,
                    format!(
                        "its VXLAN endpoint is VNI {} port {}, this node's VNI {} port {}: every \
                         node of the cluster needs the same cluster.vxlan_vni and vxlan_port",
                        vtep.vni, vtep.port, overlay.vtep.vni, overlay.vtep.port
                    ),
                );
            }
            route.via = Some(super::overlay::vtep::address(dst));
            route.overlay = Some(OverlayPath {
                device: device.clone(),
                mac: vtep.mac,
                underlay: first,
                fdb: false,
                neighbour: false,
            });
        }
    }
}

/// The addresses of the calling thread's netns, with their prefixes and links: what "directly
/// connected" is judged against, and where the overlay leaves from.
pub fn local_addresses(rtnl: &mut Rtnl) -> Result<Vec<Address>> {
    rtnl.addresses(None)
        .map_err(|e| Error::kernel("list the node's addresses", e))
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
/// [`RouteState::Failed`]; so does one the kernel refuses. `devices` are the overlay devices'
/// ifindexes by name (VXLAN routes go out of them, `onlink`).
pub fn apply(
    rtnl: &mut Rtnl,
    routes: &mut [NodeRoute],
    devices: &BTreeMap<String, u32>,
) -> Result<Applied> {
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
        let oif = entry
            .overlay
            .as_ref()
            .and_then(|o| devices.get(&o.device).copied());
        if let Some(protocol) = foreign.get(&entry.dst) {
            entry.state = RouteState::Failed;
            entry.message = format!(
                "another route to {} (protocol {protocol}) is in the main table; knid leaves it alone",
                entry.dst
            );
            continue;
        }
        match present.remove(&entry.dst) {
            Some(route) if route.gateway == Some(via) && (oif.is_none() || route.oif == oif) => {
                continue
            }
            _ => {}
        }
        let route = Route {
            dst: entry.dst,
            gateway: Some(via),
            oif,
            table: MAIN,
            mtu: None,
            scope: RouteScope::Universe,
            protocol: RTPROT_KNID,
            metric: None,
            onlink: oif.is_some(),
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
