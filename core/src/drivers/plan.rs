//! Planning one interface: every name, address, MAC, MTU, route and device decided before the
//! intent is recorded, so the record says exactly which kernel objects the attach may create
//! (docs/architecture.md#the-attachment-lifecycle-attach--detach--gone) and recovery can find them by name.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use ipnet::IpNet;
use knid_netops::Rtnl;
use knid_store::Owner;

use super::names;
use crate::config::{Driver, Network};
use crate::error::{Error, Result};
use crate::lifecycle;
use crate::model::{
    CniInfo, DeviceInfo, DeviceRef, InterfaceKind, InterfaceResult, InterfaceSpec, IpConfig,
    MacAddr, Neighbor, RouteInfo, RouteScope, SandboxId, TapInfo, TapSpec,
};
use crate::records::corrupt;
use crate::shared::Context;

pub(crate) use crate::model::MAIN_TABLE;
/// Metric of the first interface's default routes; later interfaces count up from it.
const DEFAULT_ROUTE_METRIC_BASE: u32 = 100;

/// Everything one interface needs, decided before the first kernel call.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The interface as it will be reported (state Pending), recorded with the intent.
    pub result: InterfaceResult,
    /// The network it is on.
    pub network: Network,
    /// The IPAM cursor marks to persist with the reservations ([`crate::ipam::Allocation`]).
    pub marks: Vec<IpAddr>,
}

impl Plan {
    /// Pod-side name.
    pub fn ifname(&self) -> &str {
        self.result.name.as_str()
    }

    /// The deterministic host-side name: the veth host end, the DAN tap, or the temporary name
    /// of a macvlan/ipvlan before it moves into the pod.
    pub fn host_ifname(&self) -> &str {
        &self.result.host_ifname
    }

    /// Addresses to put on the pod interface (none for a DAN tap: the guest owns them).
    pub fn pod_addresses(&self) -> impl Iterator<Item = IpNet> + '_ {
        self.result.ips.iter().map(|ip| ip.address)
    }

    /// The bridge the host side joins: bridge networks' veths and DAN taps.
    pub fn bridge(&self) -> Option<&str> {
        match self.result.kind {
            InterfaceKind::Veth | InterfaceKind::Tap => self.network.bridge(),
            _ => None,
        }
    }
}

/// Plans interface `spec` of sandbox `id` at `position`, allocating its addresses (marked used
/// in IPAM's memory; the caller hands them back on error).
pub(crate) fn plan(
    ctx: &Context,
    host: &mut Rtnl,
    id: &SandboxId,
    netns_path: &Path,
    spec: &InterfaceSpec,
    position: usize,
) -> Result<Plan> {
    let network = ctx.network(&spec.network).ok_or_else(|| {
        Error::FailedPrecondition(format!("network {} was removed", spec.network))
    })?;
    let kind = spec.kind.unwrap_or_else(|| network.default_kind());
    let ifname = spec.name.as_str();
    let host_ifname = names::host_ifname(id.as_str(), ifname);
    if kind == InterfaceKind::Cni {
        return Ok(cni_plan(spec, network, host_ifname));
    }
    // A host device is found (and checked free) before any address is taken.
    let device = match (&spec.device, kind) {
        (Some(device), InterfaceKind::HostDevice) => {
            Some(find_device(ctx, host, id, spec, &network, device)?)
        }
        _ => None,
    };
    let owner = Owner {
        sandbox_id: id.as_str().to_owned(),
        ifname: ifname.to_owned(),
    };
    // The last step that may fail before the addresses are taken: nothing after it does, so
    // no error leaves an address marked in memory that the caller never saw.
    let (mac, mtu) = match &device {
        Some((info, mac)) => (*mac, spec.mtu.unwrap_or(info.original_mtu)),
        // An ipvlan and a passthru macvlan carry the parent's MAC.
        None if network.shares_parent_mac() => {
            (parent_mac(host, &network)?, spec.mtu.unwrap_or(network.mtu))
        }
        None => (
            spec.mac.unwrap_or_else(MacAddr::random_local),
            spec.mtu.unwrap_or(network.mtu),
        ),
    };
    let allocation = ctx.ipam.allocate(&network, &owner, &spec.static_ips)?;
    let routed = network.driver == Driver::Routed;
    let route_metric =
        DEFAULT_ROUTE_METRIC_BASE.saturating_add(u32::try_from(position).unwrap_or(u32::MAX));
    let ips: Vec<IpConfig> = allocation
        .leases
        .iter()
        .map(|l| IpConfig {
            // Routed pods own just their address; everything goes via the link-local gateway.
            address: if routed {
                IpNet::from(l.address.addr())
            } else {
                l.address
            },
            gateway: Some(l.gateway),
        })
        .collect();
    let tap = (kind == InterfaceKind::Tap).then(|| {
        tap_info(
            &spec.tap.clone().unwrap_or_default(),
            id,
            ifname,
            &host_ifname,
            netns_path,
        )
    });
    let dan_path = tap
        .as_ref()
        .filter(|t| t.dan)
        .map(|_| dan_path(&ctx.dan_dir, id.as_str()));
    let neighbors = if routed {
        // The gateways answer through static entries pointing at the host end's fixed MAC:
        // no proxy ARP or NDP on the host.
        let host_mac = names::host_mac(&host_ifname);
        ips.iter()
            .filter_map(|ip| ip.gateway)
            .map(|gw| Neighbor {
                ip: gw,
                mac: host_mac,
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut result = InterfaceResult {
        name: spec.name.clone(),
        network: network.name.clone(),
        kind,
        state: lifecycle::INITIAL,
        mac,
        mtu,
        host_ifname,
        routes: Vec::new(),
        ips,
        neighbors,
        tap,
        device: device.map(|(info, _)| info),
        dan_path,
        parent: network.parent().map(str::to_owned),
        mode: network.mode().map(str::to_owned),
        cni: None,
        bandwidth: spec.bandwidth,
    };
    result.routes = routes(&result, routed, route_metric);
    Ok(Plan {
        result,
        network,
        marks: allocation.marks,
    })
}

/// A cni interface: the plugins decide addresses, routes, MAC and MTU, filled in when the ADD
/// chain returns. The deterministic host name is kept as the record's handle, though knid
/// never creates a link by it.
fn cni_plan(spec: &InterfaceSpec, network: Network, host_ifname: String) -> Plan {
    let result = InterfaceResult {
        name: spec.name.clone(),
        network: network.name.clone(),
        kind: InterfaceKind::Cni,
        state: lifecycle::INITIAL,
        mac: spec.mac.unwrap_or(MacAddr::UNKNOWN),
        mtu: network.mtu,
        host_ifname,
        ips: Vec::new(),
        routes: Vec::new(),
        neighbors: Vec::new(),
        tap: None,
        device: None,
        dan_path: None,
        parent: None,
        mode: None,
        cni: Some(CniInfo::default()),
        bandwidth: None,
    };
    Plan {
        result,
        network,
        marks: Vec::new(),
    }
}

/// The routes an interface gets in the pod: a default route per family via its gateway, and for
/// routed networks first an on-link route to the IPv4 link-local gateway (IPv6 link-local
/// gateways are on-link by definition). A DAN tap's routes are the guest's.
fn routes(iface: &InterfaceResult, routed: bool, metric: u32) -> Vec<RouteInfo> {
    let mut out = Vec::new();
    for ip in &iface.ips {
        let Some(gateway) = ip.gateway else { continue };
        if routed && gateway.is_ipv4() {
            out.push(RouteInfo {
                dst: IpNet::from(gateway),
                gateway: None,
                mtu: None,
                scope: RouteScope::Link,
                table: MAIN_TABLE,
                metric: None,
            });
        }
        out.push(RouteInfo {
            dst: match gateway {
                IpAddr::V4(_) => IpNet::V4(ipnet::Ipv4Net::default()),
                IpAddr::V6(_) => IpNet::V6(ipnet::Ipv6Net::default()),
            },
            gateway: Some(gateway),
            mtu: None,
            scope: RouteScope::Universe,
            table: MAIN_TABLE,
            metric: Some(metric),
        });
    }
    out
}

fn parent_mac(host: &mut Rtnl, network: &Network) -> Result<MacAddr> {
    let parent = network.parent().unwrap_or_default();
    host.link_by_name(parent)
        .map_err(|e| Error::kernel(format!("look up parent {parent}"), e))?
        .ok_or_else(|| {
            Error::FailedPrecondition(format!(
                "network {}: parent device {parent} is missing",
                network.name
            ))
        })?
        .mac
        .map(MacAddr)
        .ok_or_else(|| {
            Error::FailedPrecondition(format!("parent device {parent} has no Ethernet address"))
        })
}

/// The DAN file of a sandbox.
pub(crate) fn dan_path(dan_dir: &Path, sandbox_id: &str) -> PathBuf {
    dan_dir.join(format!("{sandbox_id}.json"))
}

/// The tap of an interface: beside the veth end in the sandbox netns, or (DAN) the host link.
fn tap_info(
    spec: &TapSpec,
    id: &SandboxId,
    ifname: &str,
    host_ifname: &str,
    netns_path: &Path,
) -> TapInfo {
    let in_pod = !spec.dan;
    TapInfo {
        // In the pod netns the tap sits beside the veth end; on the host it is the host link.
        name: if in_pod {
            names::tap_ifname(id.as_str(), ifname)
        } else {
            host_ifname.to_owned()
        },
        netns_path: in_pod.then(|| netns_path.to_path_buf()),
        queue_pairs: spec.queue_pairs,
        multi_queue: spec.queue_pairs > 1,
        vnet_hdr: true,
        no_pi: true,
        vhost_net_ok: knid_netops::tap::vhost_net_usable(),
        owner_uid: tap_owner(spec.owner_uid, spec.owner_gid),
        owner_gid: spec.owner_gid,
        redirect_peer: if in_pod {
            ifname.to_owned()
        } else {
            String::new()
        },
        dan: spec.dan,
    }
}

/// Who `link` belongs to when it is not a pod's to take: loopback, a bridge or a bridge port,
/// one of knid's own links, or the parent or bridge of a configured network (moving it would cut
/// that network off for as long as the pod lives).
fn device_owner(ctx: &Context, link: &knid_netops::Link) -> Option<String> {
    let name = link.name.as_str();
    if link.index == knid_netops::netns::LOOPBACK_INDEX || name == "lo" {
        return Some("the loopback device".into());
    }
    if names::is_host_ifname(name) || link.group == ctx.reaper_group {
        return Some("one of knid's own links".into());
    }
    let mut networks: Vec<_> = ctx.networks().into_values().collect();
    networks.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(net) = networks.iter().find(|n| n.parent() == Some(name)) {
        return Some(format!("the parent of network {}", net.name));
    }
    if let Some(net) = networks.iter().find(|n| n.bridge() == Some(name)) {
        return Some(format!("the bridge of network {}", net.name));
    }
    if link.kind.as_deref() == Some("bridge") {
        return Some("a bridge".into());
    }
    link.controller.map(|_| "a bridge port".into())
}

/// Whether a default route (IPv4 or IPv6, main table) of the host netns goes out through link
/// `index`.
fn is_uplink(host: &mut Rtnl, index: u32) -> Result<bool> {
    for ipv6 in [false, true] {
        let routes = host
            .routes(ipv6)
            .map_err(|e| Error::kernel("list the host's routes", e))?;
        if routes
            .iter()
            .any(|r| r.dst.prefix_len() == 0 && r.oif == Some(index))
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Finds the requested host device in the host netns and checks no other attachment holds it.
/// Returns what detach restores, and its MAC.
fn find_device(
    ctx: &Context,
    host: &mut Rtnl,
    id: &SandboxId,
    spec: &InterfaceSpec,
    network: &Network,
    device: &DeviceRef,
) -> Result<(DeviceInfo, MacAddr)> {
    let (name, pci) = match device {
        DeviceRef::Name(name) => (name.to_string(), None),
        DeviceRef::Pci(pci) => {
            let name = knid_netops::sysfs::pci_netdev(&ctx.sysfs, pci)
                .map_err(|e| match e.errno() {
                    // No <sysfs>/bus/pci/devices/<pci>: the node has no such device.
                    Some(libc::ENOENT) => Error::FailedPrecondition(format!(
                        "PCI device {pci} does not exist on this node"
                    )),
                    _ => Error::kernel(format!("find the netdev of PCI device {pci}"), e),
                })?
                .ok_or_else(|| {
                    Error::FailedPrecondition(format!(
                        "PCI device {pci} has no network interface in the host netns"
                    ))
                })?;
            (name, Some(pci.clone()))
        }
    };
    let read = corrupt::all_attachments(&ctx.store)?;
    // A record knid cannot use still holds the device it names, whatever its state.
    let unusable = read.corrupt.into_iter().filter_map(|b| b.record);
    for holder in read.usable.into_iter().chain(unusable) {
        // A Reaping holder gave its device back before it was marked Reaping.
        if matches!(
            lifecycle::state_of(&holder),
            Ok(crate::model::AttachmentState::Reaping)
        ) {
            continue;
        }
        if holder
            .device
            .as_ref()
            .is_some_and(|d| d.original_name == name)
            && !(holder.sandbox_id == id.as_str() && holder.ifname == spec.name.as_str())
        {
            return Err(Error::FailedPrecondition(format!(
                "device {name} is in use by sandbox {} ({})",
                holder.sandbox_id, holder.ifname
            )));
        }
    }
    let link = host
        .link_by_name(&name)
        .map_err(|e| Error::kernel(format!("look up device {name}"), e))?
        .ok_or_else(|| {
            Error::FailedPrecondition(format!("device {name} is not in the host netns"))
        })?;
    if let Some(owner) = device_owner(ctx, &link) {
        return Err(Error::FailedPrecondition(format!(
            "device {name} is {owner}; it cannot be moved into a pod"
        )));
    }
    if !network.allows_uplink() && is_uplink(host, link.index)? {
        return Err(Error::FailedPrecondition(format!(
            "device {name} is the node's uplink (a default route goes through it); it cannot be \
             moved into a pod unless network {} sets allow_uplink = true",
            network.name
        )));
    }
    // Loopback reports an all-zero address: no Ethernet address either.
    let mac = link
        .mac
        .map(MacAddr)
        .filter(|mac| *mac != MacAddr::UNKNOWN)
        .ok_or_else(|| {
            Error::FailedPrecondition(format!("device {name} has no Ethernet address"))
        })?;
    Ok((
        DeviceInfo {
            pci_address: pci,
            original_name: name,
            original_mtu: link.mtu,
            was_up: link.up,
        },
        mac,
    ))
}

/// The tap's owner uid: the one asked for; root when neither an owner nor a group is. The kernel
/// lets any process open a tap that has neither (with /dev/net/tun world-writable, as
/// distributions ship it), so a tap is never left without one. A group alone stays alone: with an
/// owner too, the kernel would demand both.
pub(crate) fn tap_owner(owner_uid: Option<u32>, owner_gid: Option<u32>) -> Option<u32> {
    match (owner_uid, owner_gid) {
        (None, None) => Some(0),
        (uid, _) => uid,
    }
}
