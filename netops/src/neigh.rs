//! Static neighbour entries (ARP for IPv4, NDP for IPv6).

use std::net::IpAddr;

use netlink_packet_core::{NLM_F_CREATE, NLM_F_REPLACE};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use crate::error::Result;
use crate::rtnl::Rtnl;
use crate::Mac;

/// An entry of a link's neighbour table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbour {
    /// Interface index.
    pub index: u32,
    /// The neighbour's IP address.
    pub ip: IpAddr,
    /// Its link-layer address; `None` while unresolved (incomplete, failed).
    pub mac: Option<Mac>,
    /// A static entry (NUD_PERMANENT), never aged out or re-resolved.
    pub permanent: bool,
}

impl Rtnl {
    /// Adds a permanent neighbour entry on link `index`, replacing any entry for `ip` there
    /// (static or learned), so adding it again is success.
    pub fn add_neighbour(&mut self, index: u32, ip: IpAddr, mac: Mac) -> Result<()> {
        let msg = RouteNetlinkMessage::NewNeighbour(add_message(index, ip, mac));
        let target = format!("{ip} on index {index}");
        self.ack(msg, NLM_F_CREATE | NLM_F_REPLACE, "add neighbour", &target)
    }

    /// Deletes the entry for `ip` on link `index`. `Ok(false)` when there was none (or no
    /// such link).
    pub fn delete_neighbour(&mut self, index: u32, ip: IpAddr) -> Result<bool> {
        let msg = RouteNetlinkMessage::DelNeighbour(delete_message(index, ip));
        let target = format!("{ip} on index {index}");
        match self.ack(msg, 0, "delete neighbour", &target) {
            Ok(()) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The IPv4 (ARP) or IPv6 (NDP) neighbour entries of link `index`, static and learned.
    pub fn neighbours(&mut self, index: u32, ipv6: bool) -> Result<Vec<Neighbour>> {
        let msg = RouteNetlinkMessage::GetNeighbour(dump_message(index, ipv6));
        let target = format!("of index {index}");
        Ok(self
            .dump(msg, "dump neighbours", &target)?
            .iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewNeighbour(n) => parse_neighbour(n),
                _ => None,
            })
            .filter(|n| n.index == index)
            .collect())
    }
}

fn family(ipv6: bool) -> AddressFamily {
    if ipv6 {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    }
}

/// The header and NDA_DST that identify an entry, as delete sends them.
pub(crate) fn delete_message(index: u32, ip: IpAddr) -> NeighbourMessage {
    let mut msg = NeighbourMessage::default();
    msg.header.family = family(ip.is_ipv6());
    msg.header.ifindex = index;
    msg.attributes
        .push(NeighbourAttribute::Destination(NeighbourAddress::from(ip)));
    msg
}

pub(crate) fn add_message(index: u32, ip: IpAddr, mac: Mac) -> NeighbourMessage {
    let mut msg = delete_message(index, ip);
    msg.header.state = NeighbourState::Permanent;
    msg.attributes
        .push(NeighbourAttribute::LinkLayerAddress(mac.to_vec()));
    msg
}

/// Under strict checking the kernel rejects a dump request with an ifindex in the header
/// (EINVAL, "Invalid values in header"): the link filter goes in NDA_IFINDEX.
pub(crate) fn dump_message(index: u32, ipv6: bool) -> NeighbourMessage {
    let mut msg = NeighbourMessage::default();
    msg.header.family = family(ipv6);
    msg.attributes.push(NeighbourAttribute::IfIndex(index));
    msg
}

pub(crate) fn parse_neighbour(msg: &NeighbourMessage) -> Option<Neighbour> {
    let mut ip = None;
    let mut mac = None;
    for attr in &msg.attributes {
        match attr {
            NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => ip = Some((*v4).into()),
            NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => {
                ip = Some((*v6).into());
            }
            NeighbourAttribute::LinkLayerAddress(a) => mac = Mac::try_from(a.as_slice()).ok(),
            _ => {}
        }
    }
    Some(Neighbour {
        index: msg.header.ifindex,
        ip: ip?,
        mac,
        permanent: msg.header.state == NeighbourState::Permanent,
    })
}

#[cfg(test)]
mod tests;
