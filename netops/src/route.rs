//! Unicast routes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use netlink_packet_core::{NLM_F_CREATE, NLM_F_REPLACE};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteMetric,
    RouteProtocol, RouteScope as NlScope, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use crate::error::Result;
use crate::rtnl::Rtnl;

/// The main routing table.
const RT_TABLE_MAIN: u32 = 254;
/// Routes knid adds carry this protocol (RTPROT_STATIC), as `ip route add` does.
pub const RTPROT_STATIC: u8 = 4;
/// knid's own route protocol, on the routes to other nodes' pod CIDRs it owns (cluster mode):
/// what tells them from anyone else's routes (`ip route show proto 107`). Unassigned in
/// iproute2's rt_protos and by the routing daemons (bird 12, zebra 11, Calico's bird 80).
pub const RTPROT_KNID: u8 = 107;

/// How far a route's destination is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteScope {
    /// Via a gateway (RT_SCOPE_UNIVERSE).
    Universe,
    /// Directly on the link (RT_SCOPE_LINK).
    Link,
    /// A local address (RT_SCOPE_HOST).
    Host,
}

/// A unicast route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Destination; `0.0.0.0/0` or `::/0` for a default route.
    pub dst: IpNet,
    /// Next-hop gateway.
    pub gateway: Option<IpAddr>,
    /// Output interface index.
    pub oif: Option<u32>,
    /// Routing table (254 = main); tables above 255 go in RTA_TABLE.
    pub table: u32,
    /// Path MTU (RTA_METRICS / RTAX_MTU).
    pub mtu: Option<u32>,
    /// Scope.
    pub scope: RouteScope,
    /// Origin (RTPROT_*); knid uses RTPROT_STATIC (4).
    pub protocol: u8,
    /// Priority (RTA_PRIORITY). The kernel gives IPv6 routes 1024 when none is set.
    pub metric: Option<u32>,
    /// The gateway is on the link (RTNH_F_ONLINK): the kernel does not look for a route to it.
    /// An IPv6 prefix route appears only once the link is ready (carrier seen by the kernel's
    /// linkwatch, asynchronously after the link is set up), so a route via a gateway in the
    /// link's own prefix, added right after, can fail with EHOSTUNREACH without this.
    pub onlink: bool,
}

impl Route {
    /// A static default route via `gateway` out of `oif`, in the main table.
    pub fn default_via(gateway: IpAddr, oif: u32) -> Route {
        // The Default of each family's net is its /0.
        let dst = match gateway {
            IpAddr::V4(_) => IpNet::V4(Ipv4Net::default()),
            IpAddr::V6(_) => IpNet::V6(Ipv6Net::default()),
        };
        Route {
            dst,
            gateway: Some(gateway),
            oif: Some(oif),
            table: RT_TABLE_MAIN,
            mtu: None,
            scope: RouteScope::Universe,
            protocol: RTPROT_STATIC,
            metric: None,
            onlink: false,
        }
    }
}

impl Rtnl {
    /// Adds a route, replacing one with the same destination, table and metric (idempotent).
    pub fn add_route(&mut self, route: &Route) -> Result<()> {
        let msg = RouteNetlinkMessage::NewRoute(add_message(route));
        self.ack(msg, NLM_F_CREATE | NLM_F_REPLACE, "add route", &route.dst)
    }

    /// Deletes a route. `Ok(false)` when there was none (ESRCH) or its link is gone.
    pub fn delete_route(&mut self, route: &Route) -> Result<bool> {
        let msg = RouteNetlinkMessage::DelRoute(delete_message(route));
        match self.ack(msg, 0, "delete route", &route.dst) {
            Ok(()) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The unicast routes of the main table for one family (`true` for IPv6).
    pub fn routes(&mut self, ipv6: bool) -> Result<Vec<Route>> {
        let msg = RouteNetlinkMessage::GetRoute(dump_message(ipv6));
        let target = if ipv6 {
            "of the ipv6 main table"
        } else {
            "of the ipv4 main table"
        };
        Ok(self
            .dump(msg, "dump routes", &target)?
            .iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewRoute(r) => parse_route(r),
                _ => None,
            })
            .filter(|r| r.table == RT_TABLE_MAIN)
            .collect())
    }
}

fn family(net: &IpNet) -> AddressFamily {
    match net {
        IpNet::V4(_) => AddressFamily::Inet,
        IpNet::V6(_) => AddressFamily::Inet6,
    }
}

fn route_address(ip: IpAddr) -> RouteAddress {
    match ip {
        IpAddr::V4(v4) => RouteAddress::Inet(v4),
        IpAddr::V6(v6) => RouteAddress::Inet6(v6),
    }
}

/// The fields that identify a route, shared by add and delete.
fn base_message(route: &Route) -> RouteMessage {
    let mut msg = RouteMessage::default();
    msg.header.address_family = family(&route.dst);
    msg.header.destination_prefix_length = route.dst.prefix_len();
    msg.header.protocol = RouteProtocol::from(route.protocol);
    msg.header.kind = RouteType::Unicast;
    // The header's table is a u8: bigger ids go in RTA_TABLE with RT_TABLE_UNSPEC here.
    match u8::try_from(route.table) {
        Ok(t) => msg.header.table = t,
        Err(_) => {
            msg.header.table = RouteHeader::RT_TABLE_UNSPEC;
            msg.attributes.push(RouteAttribute::Table(route.table));
        }
    }
    // A default route has no RTA_DST, as iproute2 sends it.
    if route.dst.prefix_len() > 0 {
        msg.attributes
            .push(RouteAttribute::Destination(route_address(
                route.dst.network(),
            )));
    }
    if let Some(gw) = route.gateway {
        msg.attributes
            .push(RouteAttribute::Gateway(route_address(gw)));
    }
    if let Some(oif) = route.oif {
        msg.attributes.push(RouteAttribute::Oif(oif));
    }
    if let Some(metric) = route.metric {
        msg.attributes.push(RouteAttribute::Priority(metric));
    }
    msg
}

pub(crate) fn add_message(route: &Route) -> RouteMessage {
    let mut msg = base_message(route);
    msg.header.scope = match route.scope {
        RouteScope::Universe => NlScope::Universe,
        RouteScope::Link => NlScope::Link,
        RouteScope::Host => NlScope::Host,
    };
    if let Some(mtu) = route.mtu {
        msg.attributes
            .push(RouteAttribute::Metrics(vec![RouteMetric::Mtu(mtu)]));
    }
    if route.onlink {
        msg.header.flags |= RouteFlags::Onlink;
    }
    msg
}

/// RT_SCOPE_NOWHERE matches a route of any scope, as `ip route del` does.
pub(crate) fn delete_message(route: &Route) -> RouteMessage {
    let mut msg = base_message(route);
    msg.header.scope = NlScope::NoWhere;
    msg
}

/// A dump of the main table. Strict checking filters on the header's table, and would filter
/// on protocol, type and scope too, so those stay zero.
pub(crate) fn dump_message(ipv6: bool) -> RouteMessage {
    let mut msg = RouteMessage::default();
    msg.header.address_family = if ipv6 {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    msg.header.table = RouteHeader::RT_TABLE_MAIN;
    msg.header.protocol = RouteProtocol::Unspec;
    msg.header.kind = RouteType::Unspec;
    msg
}

fn ip_of(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

pub(crate) fn parse_route(msg: &RouteMessage) -> Option<Route> {
    let h = &msg.header;
    if h.kind != RouteType::Unicast {
        return None;
    }
    let scope = match h.scope {
        NlScope::Universe => RouteScope::Universe,
        NlScope::Link => RouteScope::Link,
        NlScope::Host => RouteScope::Host,
        _ => return None,
    };
    let unspecified: IpAddr = match h.address_family {
        AddressFamily::Inet => Ipv4Addr::UNSPECIFIED.into(),
        AddressFamily::Inet6 => Ipv6Addr::UNSPECIFIED.into(),
        _ => return None,
    };
    let mut route = Route {
        dst: IpNet::new(unspecified, 0).ok()?,
        gateway: None,
        oif: None,
        table: u32::from(h.table),
        mtu: None,
        scope,
        protocol: u8::from(h.protocol),
        metric: None,
        onlink: h.flags.contains(RouteFlags::Onlink),
    };
    let mut dst = unspecified;
    for attr in &msg.attributes {
        match attr {
            RouteAttribute::Destination(a) => dst = ip_of(a)?,
            RouteAttribute::Gateway(a) => route.gateway = ip_of(a),
            RouteAttribute::Oif(i) => route.oif = Some(*i),
            RouteAttribute::Table(t) => route.table = *t,
            RouteAttribute::Priority(p) => route.metric = Some(*p),
            RouteAttribute::Metrics(ms) => {
                route.mtu = ms.iter().find_map(|m| match m {
                    RouteMetric::Mtu(mtu) => Some(*mtu),
                    _ => None,
                });
            }
            _ => {}
        }
    }
    route.dst = IpNet::new(dst, h.destination_prefix_length).ok()?;
    Some(route)
}

#[cfg(test)]
mod tests;
