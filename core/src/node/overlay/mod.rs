//! The VXLAN overlay of cluster mode, for nodes that are not neighbours: one device per family
//! (`vxlan.knid` over the IPv4 underlay, `vxlan6.knid` over the IPv6 one), unicast only (no
//! multicast group, learning off), holding this node's VTEP address; and for every other node
//! reached through it, a permanent FDB entry (its VTEP MAC → its InternalIP) and a permanent
//! neighbour (its VTEP address → MAC). The routes to its pod CIDRs (`via` its VTEP address
//! `onlink` on the device) are `node::routes`'.

use std::net::IpAddr;

use ipnet::IpNet;
use knid_netops::{sysctl, Address, Rtnl, VxlanSpec};

use crate::config::VxlanSettings;

pub mod vtep;

pub use vtep::Vtep;

/// Bytes VXLAN adds to a packet over an IPv4 underlay (outer IPv4 20, UDP 8, VXLAN 8,
/// inner Ethernet 14).
pub const OVERHEAD_V4: u32 = 50;
/// Over an IPv6 underlay (outer IPv6 40).
pub const OVERHEAD_V6: u32 = 70;

/// The overlay device of a family.
pub fn device_name(v6: bool) -> &'static str {
    if v6 {
        "vxlan6.knid"
    } else {
        "vxlan.knid"
    }
}

/// What VXLAN adds over an underlay of that family.
pub fn overhead(v6: bool) -> u32 {
    if v6 {
        OVERHEAD_V6
    } else {
        OVERHEAD_V4
    }
}

/// One family's overlay device on this node, as [`ensure`] left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// Its name.
    pub name: &'static str,
    /// Its ifindex.
    pub index: u32,
    /// Its MTU: the underlay's minus the encapsulation.
    pub mtu: u32,
    /// The underlay device.
    pub underlay: String,
}

/// Another node reached through a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remote {
    /// Its VTEP MAC.
    pub mac: knid_netops::Mac,
    /// Its InternalIP: where its VXLAN packets go.
    pub underlay: IpAddr,
    /// Its VTEP address: the gateway of the routes to its pods.
    pub vtep: IpAddr,
}

/// The underlay device: `configured`, else the link holding `local` among `addresses` (the
/// node's); its (index, name, MTU).
pub fn underlay(
    rtnl: &mut Rtnl,
    addresses: &[Address],
    local: IpAddr,
    configured: Option<&str>,
) -> Result<(u32, String, u32), String> {
    if let Some(name) = configured {
        return match rtnl.link_by_name(name) {
            Ok(Some(link)) => Ok((link.index, link.name, link.mtu)),
            Ok(None) => Err(format!("cluster.vxlan_device {name} does not exist")),
            Err(e) => Err(format!("look up cluster.vxlan_device {name}: {e}")),
        };
    }
    let Some(found) = addresses.iter().find(|a| a.net.addr() == local) else {
        return Err(format!(
            "InternalIP {local} is not an address of this node: the overlay has no device to \
             leave from (set cluster.vxlan_device)"
        ));
    };
    match rtnl.link_by_index(found.index) {
        Ok(Some(link)) => Ok((link.index, link.name, link.mtu)),
        Ok(None) => Err(format!("the link holding {local} is gone")),
        Err(e) => Err(format!("look up the link holding {local}: {e}")),
    }
}

/// What one family's overlay device is made of: where it leaves from and what it holds.
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    /// The device's family.
    pub v6: bool,
    /// This node's InternalIP of the family: the packets' source.
    pub local: IpAddr,
    /// This node's VTEP address of the family (its pod CIDR's first address), when it has one.
    pub own_vtep: Option<IpAddr>,
    /// VNI, port and MAC.
    pub vtep: &'a Vtep,
}

/// Makes this node's overlay device of family `wanted.v6` what it must be: leaving from
/// `wanted.local` (its underlay found among the node's `addresses`, or `settings.device`) with
/// the VNI, port and MAC of `wanted.vtep`, MTU the underlay's minus the encapsulation, up,
/// holding `wanted.own_vtep` and no other address. A device of that name that differs in what
/// cannot change in place is replaced; a link of that name that is not a VXLAN device is left
/// alone and reported.
pub fn ensure(
    rtnl: &mut Rtnl,
    addresses: &[Address],
    wanted: Wanted<'_>,
    settings: &VxlanSettings,
) -> Result<Device, String> {
    let Wanted {
        v6,
        local,
        own_vtep,
        vtep,
    } = wanted;
    let name = device_name(v6);
    let (underlay_index, underlay_name, underlay_mtu) =
        underlay(rtnl, addresses, local, settings.device.as_deref())?;
    let mtu = underlay_mtu.saturating_sub(overhead(v6));
    let spec = VxlanSpec {
        name: name.to_owned(),
        vni: vtep.vni,
        port: vtep.port,
        local,
        underlay: underlay_index,
        mtu,
        mac: vtep.mac,
    };
    let kernel = |what: &str, e: knid_netops::Error| format!("{what} {name}: {e}");
    let found = rtnl.vxlan_by_name(name).map_err(|e| kernel("look up", e))?;
    let index = match found {
        Some(dev) if dev.link.kind.as_deref() != Some("vxlan") => {
            return Err(format!(
                "a link named {name} that is not a VXLAN device is in the way of the overlay"
            ))
        }
        Some(dev) if dev.matches(&spec) => {
            if dev.link.mtu != mtu {
                rtnl.set_mtu(dev.link.index, mtu)
                    .map_err(|e| kernel("set the MTU of", e))?;
            }
            if dev.link.mac != Some(vtep.mac) {
                rtnl.set_mac(dev.link.index, vtep.mac)
                    .map_err(|e| kernel("set the MAC of", e))?;
            }
            dev.link.index
        }
        other => {
            if let Some(old) = other {
                log::info!(
                    "cluster: overlay device {name} replaced (VNI, port, local address or \
                     underlay changed: {old:?})"
                );
                rtnl.delete_link(old.link.index)
                    .map_err(|e| kernel("delete", e))?;
            }
            rtnl.create_vxlan(&spec).map_err(|e| kernel("create", e))?;
            log::info!(
                "cluster: overlay device {name} created (VNI {}, port {}, from {local} on \
                 {underlay_name}, MTU {mtu})",
                vtep.vni,
                vtep.port
            );
            if v6 {
                // Its address is used at once, never tentative.
                sysctl::skip_dad(name).map_err(|e| format!("turn off DAD on {name}: {e}"))?;
            }
            rtnl.link_by_name(name)
                .map_err(|e| kernel("look up", e))?
                .ok_or_else(|| format!("{name} vanished after it was created"))?
                .index
        }
    };
    rtnl.set_up(index).map_err(|e| kernel("set up", e))?;
    let own = own_vtep.map(IpNet::from);
    for address in rtnl
        .addresses(Some(index))
        .map_err(|e| kernel("list the addresses of", e))?
    {
        let link_local = matches!(address.net.addr(), IpAddr::V6(a) if a.is_unicast_link_local());
        if Some(address.net) != own && !link_local {
            rtnl.delete_address(index, address.net)
                .map_err(|e| kernel("remove an old address from", e))?;
        }
    }
    if let Some(own) = own {
        rtnl.add_address(index, own)
            .map_err(|e| kernel("give its VTEP address to", e))?;
    }
    Ok(Device {
        name,
        index,
        mtu,
        underlay: underlay_name,
    })
}

/// Removes this node's overlay device of family `v6`, if there is one (the backend is
/// host-gw now, or the node lost its InternalIP of that family). Whether one was removed.
pub fn remove(rtnl: &mut Rtnl, v6: bool) -> Result<bool, String> {
    let name = device_name(v6);
    match rtnl.vxlan_by_name(name) {
        Ok(Some(dev)) if dev.link.kind.as_deref() == Some("vxlan") => {
            rtnl.delete_link(dev.link.index)
                .map_err(|e| format!("delete {name}: {e}"))?;
            log::info!("cluster: overlay device {name} removed");
            Ok(true)
        }
        Ok(_) => Ok(false),
        Err(e) => Err(format!("look up {name}: {e}")),
    }
}

/// The MTU the pod network (`pod_cidr_from_node`) gets under the overlay, checked when the
/// configuration is read (start-up, reload): one that sets none gets the underlay's MTU minus
/// the encapsulation; one that sets more is refused, naming both numbers. The underlay is
/// `cluster.vxlan_device`, else the device of the default route (IPv4, else IPv6), else taken
/// as 1500 bytes; its encapsulation is 70 bytes when it carries a global IPv6 address (IPv6
/// pods' packets cross it in IPv6), else 50. `configured` says whether the network's
/// configuration sets `mtu`.
pub fn fit_mtu(
    rtnl: &mut Rtnl,
    networks: &mut [crate::config::Network],
    configured: impl Fn(&str) -> bool,
    settings: &VxlanSettings,
) -> crate::error::Result<()> {
    use crate::error::Error;
    let Some(network) = networks.iter_mut().find(|n| n.pod_cidr_from_node) else {
        return Ok(());
    };
    let (name, mtu, v6) = underlay_at_start(rtnl, settings)
        .map_err(|e| Error::Config(format!("cluster.backend: the overlay's underlay: {e}")))?;
    let limit = mtu.saturating_sub(overhead(v6));
    let family = if v6 { "IPv6" } else { "IPv4" };
    if !configured(&network.name) {
        network.mtu = limit;
        log::info!(
            "network {}: MTU {limit}, what the VXLAN overlay carries over {name} (MTU {mtu}, \
             {} bytes of VXLAN over {family})",
            network.name,
            overhead(v6)
        );
    } else if network.mtu > limit {
        return Err(Error::Config(format!(
            "networks.{}.mtu: {} is more than the VXLAN overlay carries over {name}: {limit} \
             ({name}'s MTU {mtu} minus {} bytes of VXLAN over {family}); set it to {limit} or \
             less, leave it unset, or set cluster.backend = \"host-gw\" where every node is a \
             neighbour",
            network.name,
            network.mtu,
            overhead(v6)
        )));
    }
    Ok(())
}

/// The underlay as known before the Node is read: (name, MTU, carries global IPv6).
fn underlay_at_start(
    rtnl: &mut Rtnl,
    settings: &VxlanSettings,
) -> std::result::Result<(String, u32, bool), String> {
    let link = match &settings.device {
        Some(name) => Some(
            rtnl.link_by_name(name)
                .map_err(|e| format!("look up cluster.vxlan_device {name}: {e}"))?
                .ok_or_else(|| format!("cluster.vxlan_device {name} does not exist"))?,
        ),
        None => {
            let mut oif = None;
            for v6 in [false, true] {
                let routes = rtnl.routes(v6).map_err(|e| format!("list routes: {e}"))?;
                oif = routes
                    .iter()
                    .filter(|r| r.dst.prefix_len() == 0 && r.table == 254)
                    .find_map(|r| r.oif);
                if oif.is_some() {
                    break;
                }
            }
            match oif {
                Some(index) => rtnl
                    .link_by_index(index)
                    .map_err(|e| format!("look up the default route's device: {e}"))?,
                None => None,
            }
        }
    };
    let Some(link) = link else {
        return Ok((
            "the underlay (no default route: taken as 1500)".to_owned(),
            1500,
            false,
        ));
    };
    let v6 = rtnl
        .addresses(Some(link.index))
        .map_err(|e| format!("list the addresses of {}: {e}", link.name))?
        .iter()
        .any(|a| matches!(a.net.addr(), IpAddr::V6(ip) if !ip.is_unicast_link_local()));
    Ok((link.name, link.mtu, v6))
}

/// What one pass over a device's FDB and neighbours changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Synced {
    /// Entries (FDB or neighbour) added or put back.
    pub added: usize,
    /// Entries removed (their node went, or moved).
    pub removed: usize,
}

/// Makes `dev`'s FDB entries and permanent neighbours exactly those `remotes` call for.
pub fn sync(rtnl: &mut Rtnl, dev: &Device, remotes: &[Remote]) -> Result<Synced, String> {
    let mut synced = Synced::default();
    let name = dev.name;
    let kernel = |what: &str, e: knid_netops::Error| format!("{what} on {name}: {e}");
    let fdb = rtnl.fdb(dev.index).map_err(|e| kernel("read the FDB", e))?;
    for remote in remotes {
        if !fdb
            .iter()
            .any(|e| e.mac == remote.mac && e.dst == Some(remote.underlay))
        {
            rtnl.add_fdb(dev.index, remote.mac, remote.underlay)
                .map_err(|e| kernel("add an FDB entry", e))?;
            synced.added += 1;
        }
    }
    for entry in &fdb {
        let wanted = remotes
            .iter()
            .any(|r| r.mac == entry.mac && Some(r.underlay) == entry.dst);
        if !wanted
            && rtnl
                .delete_fdb(dev.index, entry.mac, entry.dst)
                .map_err(|e| kernel("remove an FDB entry", e))?
        {
            synced.removed += 1;
        }
    }
    let v6 = name == device_name(true);
    let neighbours = rtnl
        .neighbours(dev.index, v6)
        .map_err(|e| kernel("read the neighbours", e))?;
    for remote in remotes {
        if !neighbours
            .iter()
            .any(|n| n.ip == remote.vtep && n.mac == Some(remote.mac) && n.permanent)
        {
            rtnl.add_neighbour(dev.index, remote.vtep, remote.mac)
                .map_err(|e| kernel("add a neighbour", e))?;
            synced.added += 1;
        }
    }
    for n in neighbours.iter().filter(|n| n.permanent) {
        if !remotes.iter().any(|r| r.vtep == n.ip)
            && rtnl
                .delete_neighbour(dev.index, n.ip)
                .map_err(|e| kernel("remove a neighbour", e))?
        {
            synced.removed += 1;
        }
    }
    Ok(synced)
}

#[cfg(test)]
mod tests;
