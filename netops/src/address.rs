//! Interface addresses.

use std::net::IpAddr;

use ipnet::IpNet;
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::address::{
    AddressAttribute, AddressHeaderFlags, AddressMessage, AddressScope,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use crate::error::{Error, Result};
use crate::rtnl::Rtnl;

/// An address on an interface, with its prefix length (`10.88.0.5/16`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    /// Interface index.
    pub index: u32,
    /// Address and prefix length.
    pub net: IpNet,
}

impl Rtnl {
    /// Adds an address; idempotent (EEXIST of the identical address is success).
    ///
    /// IPv6 addresses get IFA_F_NODAD so they are usable at once; IPv4 ones get the broadcast
    /// address of their prefix.
    pub fn add_address(&mut self, index: u32, net: IpNet) -> Result<()> {
        let msg = RouteNetlinkMessage::NewAddress(add_message(index, net));
        let target = format_args!("{net} on index {index}");
        match self.ack(msg, NLM_F_CREATE | NLM_F_EXCL, "add address", &target) {
            // EEXIST also covers the same IPv6 address with another prefix: only the exact
            // address counts as already done.
            Err(e) if e.is_exists() => {
                let wanted = Address { index, net };
                if self.addresses(Some(index))?.contains(&wanted) {
                    Ok(())
                } else {
                    Err(e)
                }
            }
            Err(e) if net.addr().is_ipv6() && e.errno() == Some(libc::EACCES) => {
                Err(ipv6_disabled(e))
            }
            other => other,
        }
    }

    /// Deletes an address. `Ok(false)` when it (or its link) was already gone.
    pub fn delete_address(&mut self, index: u32, net: IpNet) -> Result<bool> {
        let msg = RouteNetlinkMessage::DelAddress(address_message(index, net));
        let target = format_args!("{net} on index {index}");
        match self.ack(msg, 0, "delete address", &target) {
            Ok(()) => Ok(true),
            Err(e) if e.is_not_found() || e.errno() == Some(libc::EADDRNOTAVAIL) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Addresses of both families, of one link (filtered by the kernel) or of all.
    pub fn addresses(&mut self, index: Option<u32>) -> Result<Vec<Address>> {
        let msg = RouteNetlinkMessage::GetAddress(dump_message(index));
        let target = match index {
            Some(i) => format!("of index {i}"),
            None => "of all links".to_owned(),
        };
        Ok(self
            .dump(msg, "dump addresses", &target)?
            .iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewAddress(a) => parse_address(a),
                _ => None,
            })
            .filter(|a| index.is_none() || index == Some(a.index))
            .collect())
    }
}

/// The kernel answers a plain EACCES when IPv6 is disabled; say so, keeping the errno.
fn ipv6_disabled(e: Error) -> Error {
    e.explained("ipv6 is disabled (net.ipv6.conf.*.disable_ipv6)")
}

fn family(addr: IpAddr) -> AddressFamily {
    match addr {
        IpAddr::V4(_) => AddressFamily::Inet,
        IpAddr::V6(_) => AddressFamily::Inet6,
    }
}

/// Header plus IFA_LOCAL and IFA_ADDRESS, as iproute2 sends them for a non-peer address.
pub(crate) fn address_message(index: u32, net: IpNet) -> AddressMessage {
    let mut msg = AddressMessage::default();
    msg.header.family = family(net.addr());
    msg.header.prefix_len = net.prefix_len();
    msg.header.scope = AddressScope::Universe;
    msg.header.index = index;
    msg.attributes.push(AddressAttribute::Local(net.addr()));
    msg.attributes.push(AddressAttribute::Address(net.addr()));
    msg
}

pub(crate) fn add_message(index: u32, net: IpNet) -> AddressMessage {
    let mut msg = address_message(index, net);
    match net {
        // /31 and /32 have no broadcast address (RFC 3021).
        IpNet::V4(v4) if v4.prefix_len() < 31 => {
            msg.attributes
                .push(AddressAttribute::Broadcast(v4.broadcast()));
        }
        IpNet::V4(_) => {}
        // Without NODAD the address stays tentative (unusable) for a second or more.
        IpNet::V6(_) => msg.header.flags = AddressHeaderFlags::Nodad,
    }
    msg
}

/// An address dump request; strict checking filters by `header.index`.
pub(crate) fn dump_message(index: Option<u32>) -> AddressMessage {
    let mut msg = AddressMessage::default();
    msg.header.index = index.unwrap_or(0);
    msg
}

pub(crate) fn parse_address(msg: &AddressMessage) -> Option<Address> {
    let mut local = None;
    let mut address = None;
    for attr in &msg.attributes {
        match attr {
            AddressAttribute::Local(a) => local = Some(*a),
            AddressAttribute::Address(a) => address = Some(*a),
            _ => {}
        }
    }
    // IFA_LOCAL is the interface's own address; IFA_ADDRESS differs only for a peer address.
    let addr = local.or(address)?;
    let net = IpNet::new(addr, msg.header.prefix_len).ok()?;
    Some(Address {
        index: msg.header.index,
        net,
    })
}

#[cfg(test)]
mod tests;
