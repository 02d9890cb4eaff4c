//! The `bridge` driver: a veth pair with its host end on the network's bridge and its pod end,
//! addressed and routed, in the sandbox netns.

use std::net::IpAddr;

use ipnet::IpNet;
use knid_netops::{NetnsHandle, Route, Rtnl, VethEnd, VethSpec};

use crate::config::Network;
use crate::error::{Error, Result};
use crate::failpoint;
use crate::model::{MacAddr, RouteInfo, RouteScope};

/// Main routing table.
const MAIN_TABLE: u32 = 254;

/// Everything one veth attachment needs, decided before the first kernel call.
#[derive(Debug, Clone)]
pub struct VethPlan {
    /// Pod-side name.
    pub ifname: String,
    /// Host-side name (deterministic).
    pub host_ifname: String,
    /// Pod-side MAC.
    pub mac: MacAddr,
    /// MTU of both ends.
    pub mtu: u32,
    /// Addresses with their gateways.
    pub addresses: Vec<(IpNet, IpAddr)>,
    /// Metric of this interface's default routes: distinct per interface of a sandbox, so a
    /// second interface's default route does not replace the first's.
    pub route_metric: u32,
}

impl VethPlan {
    /// The routes the attach installs: a default route per family via its gateway.
    pub fn routes(&self) -> Vec<RouteInfo> {
        self.addresses
            .iter()
            .map(|(net, gateway)| RouteInfo {
                dst: match net {
                    IpNet::V4(_) => IpNet::V4(ipnet::Ipv4Net::default()),
                    IpNet::V6(_) => IpNet::V6(ipnet::Ipv6Net::default()),
                },
                gateway: Some(*gateway),
                mtu: None,
                scope: RouteScope::Universe,
                table: MAIN_TABLE,
                metric: Some(self.route_metric),
            })
            .collect()
    }
}

/// Creates the veth described by `plan`: host end on `network`'s bridge and up; pod end named,
/// addressed, up and routed inside `pod_ns` (through `pod`, a socket opened there). `lo` is
/// brought up too. On error the caller rolls back with [`remove`].
pub fn attach(
    host: &mut Rtnl,
    pod: &mut Rtnl,
    pod_ns: &NetnsHandle,
    network: &Network,
    bridge_index: u32,
    plan: &VethPlan,
) -> Result<()> {
    let ifname = &plan.ifname;
    let host_name = &plan.host_ifname;
    if pod
        .link_by_name(ifname)
        .map_err(|e| Error::kernel(format!("look up {ifname} in netns"), e))?
        .is_some()
    {
        return Err(Error::FailedPrecondition(format!(
            "interface {ifname} already exists in netns {}",
            pod_ns.path().display()
        )));
    }
    let spec = VethSpec {
        host: VethEnd {
            name: host_name.clone(),
            mtu: Some(plan.mtu),
            mac: None,
        },
        peer: VethEnd {
            name: ifname.clone(),
            mtu: Some(plan.mtu),
            mac: Some(plan.mac.0),
        },
        peer_netns: Some(pod_ns),
        host_controller: Some(bridge_index),
    };
    let create = |host: &mut Rtnl| {
        host.create_veth(&spec).map_err(|e| {
            let context = format!("create veth {host_name} on {} for {ifname}", network.bridge);
            (e.is_exists(), Error::kernel(context, e))
        })
    };
    if let Err((exists, err)) = create(host) {
        // The pod name was checked free above, so EEXIST is our deterministic host name: a
        // leftover of an interrupted attach of this very interface. Replace it, once.
        let removed = exists
            && host
                .delete_link_by_name(host_name)
                .map_err(|e| Error::kernel(format!("remove stale {host_name}"), e))?;
        if !removed {
            return Err(err);
        }
        log::warn!("replaced a stale {host_name} left by an interrupted attach");
        create(host).map_err(|(_, e)| e)?;
    }
    failpoint::hit("attach.veth_created")?;
    let host_link = host
        .link_by_name(host_name)
        .map_err(|e| Error::kernel(format!("look up {host_name}"), e))?
        .ok_or_else(|| Error::FailedPrecondition(format!("{host_name} vanished after creation")))?;
    host.set_up(host_link.index)
        .map_err(|e| Error::kernel(format!("set {host_name} up"), e))?;
    failpoint::hit("attach.host_up")?;

    // The pod end cannot be set up in the create message (ENOTCONN): configure it from inside.
    let pod_link = pod
        .link_by_name(ifname)
        .map_err(|e| Error::kernel(format!("look up {ifname} in netns"), e))?
        .ok_or_else(|| {
            Error::FailedPrecondition(format!("{ifname} missing in netns after creation"))
        })?;
    for (addr, _) in &plan.addresses {
        pod.add_address(pod_link.index, *addr)
            .map_err(|e| Error::kernel(format!("add {addr} to {ifname}"), e))?;
    }
    failpoint::hit("attach.addressed")?;
    pod.set_up(pod_link.index)
        .map_err(|e| Error::kernel(format!("set {ifname} up"), e))?;
    if let Some(lo) = pod
        .link_by_name("lo")
        .map_err(|e| Error::kernel("look up lo in netns", e))?
    {
        if !lo.up {
            pod.set_up(lo.index)
                .map_err(|e| Error::kernel("set lo up", e))?;
        }
    }
    failpoint::hit("attach.pod_up")?;
    for (_, gateway) in &plan.addresses {
        let route = Route {
            metric: Some(plan.route_metric),
            ..Route::default_via(*gateway, pod_link.index)
        };
        pod.add_route(&route).map_err(|e| {
            Error::kernel(format!("add default route via {gateway} on {ifname}"), e)
        })?;
    }
    failpoint::hit("attach.routed")?;
    Ok(())
}

/// Deletes the veth by its host name (the pod end goes with it). Ok(false) when already gone,
/// e.g. because the pod's netns was destroyed.
pub fn remove(host: &mut Rtnl, host_ifname: &str) -> Result<bool> {
    host.delete_link_by_name(host_ifname)
        .map_err(|e| Error::kernel(format!("delete {host_ifname}"), e))
}
