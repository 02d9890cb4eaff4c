//! VXLAN devices for the cluster overlay: created unicast-only (no multicast group, learning
//! off, so the kernel never floods or learns), their settings read back, and the entries of
//! their forwarding database (FDB): which remote endpoint a MAC lives behind.

use std::net::IpAddr;

use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE};
use netlink_packet_route::link::{
    InfoData, InfoKind, InfoVxlan, LinkAttribute, LinkInfo, LinkMessage,
};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use crate::error::Result;
use crate::link::{get_by_name_message, Link};
use crate::rtnl::Rtnl;
use crate::Mac;

/// A VXLAN device to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VxlanSpec {
    /// Its name.
    pub name: String,
    /// The VXLAN network identifier (24 bits).
    pub vni: u32,
    /// The UDP port it sends to and listens on.
    pub port: u16,
    /// The underlay address its packets leave from.
    pub local: IpAddr,
    /// The underlay device (its ifindex) the packets go out of.
    pub underlay: u32,
    /// Its MTU.
    pub mtu: u32,
    /// Its MAC (the VTEP MAC the other nodes address).
    pub mac: Mac,
}

/// A VXLAN device as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vxlan {
    /// The link.
    pub link: Link,
    /// Its VNI.
    pub vni: Option<u32>,
    /// Its UDP port.
    pub port: Option<u16>,
    /// Its local underlay address.
    pub local: Option<IpAddr>,
    /// Its underlay device.
    pub underlay: Option<u32>,
    /// Whether it learns remote MACs from the packets it receives.
    pub learning: bool,
}

impl Vxlan {
    /// Whether the device is what `spec` asks for (its name aside; MTU and MAC can be changed
    /// in place, the rest cannot).
    pub fn matches(&self, spec: &VxlanSpec) -> bool {
        self.vni == Some(spec.vni)
            && self.port == Some(spec.port)
            && self.local == Some(spec.local)
            && self.underlay == Some(spec.underlay)
            && !self.learning
    }
}

/// One entry of a VXLAN device's FDB: `mac` is reached at underlay address `dst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdbEntry {
    /// The remote MAC (all zeros: the default destination).
    pub mac: Mac,
    /// The remote endpoint's underlay address.
    pub dst: Option<IpAddr>,
    /// A static entry (NUD_PERMANENT).
    pub permanent: bool,
}

impl Rtnl {
    /// Creates a VXLAN device as `spec` says, down. An existing link of that name is an error
    /// ([`crate::Error::is_exists`]).
    pub fn create_vxlan(&mut self, spec: &VxlanSpec) -> Result<()> {
        let msg = RouteNetlinkMessage::NewLink(vxlan_message(spec));
        self.ack(msg, NLM_F_CREATE | NLM_F_EXCL, "create vxlan", &spec.name)
    }

    /// The VXLAN device named `name` with its settings; `Ok(None)` when there is no link of
    /// that name, `Ok(Some)` with no VNI when the link is not a VXLAN device.
    pub fn vxlan_by_name(&mut self, name: &str) -> Result<Option<Vxlan>> {
        let msg = RouteNetlinkMessage::GetLink(get_by_name_message(name));
        match self.get(msg, "get link", &name) {
            Ok(RouteNetlinkMessage::NewLink(m)) => Ok(Some(parse_vxlan(&m))),
            Ok(_) => Ok(None),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Adds (or replaces) the permanent FDB entry sending `mac` to `dst` on VXLAN device
    /// `index`.
    pub fn add_fdb(&mut self, index: u32, mac: Mac, dst: IpAddr) -> Result<()> {
        let msg = RouteNetlinkMessage::NewNeighbour(fdb_message(index, mac, Some(dst)));
        let target = format!("{} on index {index}", mac_text(&mac));
        self.ack(msg, NLM_F_CREATE | NLM_F_REPLACE, "add fdb entry", &target)
    }

    /// Deletes the FDB entry of `mac` (to `dst`) on device `index`; `Ok(false)` when there was
    /// none.
    pub fn delete_fdb(&mut self, index: u32, mac: Mac, dst: Option<IpAddr>) -> Result<bool> {
        let msg = RouteNetlinkMessage::DelNeighbour(fdb_message(index, mac, dst));
        let target = format!("{} on index {index}", mac_text(&mac));
        match self.ack(msg, 0, "delete fdb entry", &target) {
            Ok(()) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The FDB entries of device `index` (filtered by the kernel, and again here).
    pub fn fdb(&mut self, index: u32) -> Result<Vec<FdbEntry>> {
        let mut msg = NeighbourMessage::default();
        msg.header.family = AddressFamily::Bridge;
        msg.header.ifindex = index;
        let target = format!("of index {index}");
        self.dump_map(
            RouteNetlinkMessage::GetNeighbour(msg),
            "dump fdb",
            &target,
            |m| match m {
                RouteNetlinkMessage::NewNeighbour(n) if n.header.ifindex == index => parse_fdb(&n),
                _ => None,
            },
        )
    }
}

fn mac_text(mac: &Mac) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

pub(crate) fn vxlan_message(spec: &VxlanSpec) -> LinkMessage {
    let mut msg = LinkMessage::default();
    msg.attributes
        .push(LinkAttribute::IfName(spec.name.clone()));
    msg.attributes.push(LinkAttribute::Mtu(spec.mtu));
    msg.attributes
        .push(LinkAttribute::Address(spec.mac.to_vec()));
    let local = match spec.local {
        IpAddr::V4(a) => InfoVxlan::Local(a),
        IpAddr::V6(a) => InfoVxlan::Local6(a),
    };
    msg.attributes.push(LinkAttribute::LinkInfo(vec![
        LinkInfo::Kind(InfoKind::Vxlan),
        LinkInfo::Data(InfoData::Vxlan(vec![
            InfoVxlan::Id(spec.vni),
            local,
            InfoVxlan::Link(spec.underlay),
            InfoVxlan::Port(spec.port),
            InfoVxlan::Learning(false),
        ])),
    ]));
    msg
}

pub(crate) fn fdb_message(index: u32, mac: Mac, dst: Option<IpAddr>) -> NeighbourMessage {
    let mut msg = NeighbourMessage::default();
    msg.header.family = AddressFamily::Bridge;
    msg.header.ifindex = index;
    msg.header.state = NeighbourState::Permanent;
    msg.header.flags = NeighbourFlags::Own;
    msg.attributes
        .push(NeighbourAttribute::LinkLayerAddress(mac.to_vec()));
    if let Some(dst) = dst {
        let bytes = match dst {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        };
        msg.attributes
            .push(NeighbourAttribute::Destination(NeighbourAddress::Other(
                bytes,
            )));
    }
    msg
}

pub(crate) fn parse_fdb(msg: &NeighbourMessage) -> Option<FdbEntry> {
    let mut mac = None;
    let mut dst = None;
    for attr in &msg.attributes {
        match attr {
            NeighbourAttribute::LinkLayerAddress(a) => mac = Mac::try_from(a.as_slice()).ok(),
            NeighbourAttribute::Destination(NeighbourAddress::Other(b)) => {
                dst = match b.len() {
                    4 => <[u8; 4]>::try_from(b.as_slice()).ok().map(IpAddr::from),
                    16 => <[u8; 16]>::try_from(b.as_slice()).ok().map(IpAddr::from),
                    _ => None,
                };
            }
            NeighbourAttribute::Destination(NeighbourAddress::Inet(a)) => dst = Some((*a).into()),
            NeighbourAttribute::Destination(NeighbourAddress::Inet6(a)) => dst = Some((*a).into()),
            _ => {}
        }
    }
    Some(FdbEntry {
        mac: mac?,
        dst,
        permanent: msg.header.state == NeighbourState::Permanent,
    })
}

fn parse_vxlan(msg: &LinkMessage) -> Vxlan {
    let link = crate::link::parse_link(msg);
    let mut out = Vxlan {
        link,
        vni: None,
        port: None,
        local: None,
        underlay: None,
        learning: true,
    };
    let data = msg.attributes.iter().find_map(|a| match a {
        LinkAttribute::LinkInfo(infos) => infos.iter().find_map(|i| match i {
            LinkInfo::Data(InfoData::Vxlan(d)) => Some(d),
            _ => None,
        }),
        _ => None,
    });
    for attr in data.into_iter().flatten() {
        match attr {
            InfoVxlan::Id(id) => out.vni = Some(*id),
            InfoVxlan::Port(p) => out.port = Some(*p),
            InfoVxlan::Local(a) => out.local = Some((*a).into()),
            InfoVxlan::Local6(a) => out.local = Some((*a).into()),
            InfoVxlan::Link(l) => out.underlay = Some(*l),
            InfoVxlan::Learning(on) => out.learning = *on,
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests;
