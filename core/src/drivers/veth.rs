//! veth pairs: the host end on the network's bridge (bridge networks) or alone with host routes
//! and neighbour entries to the pod (routed networks); the pod end named, addressed, up and
//! routed inside the sandbox netns (by [`crate::drivers::configure`]).

use ipnet::IpNet;
use knid_netops::{NetnsHandle, Route, RouteScope, Rtnl, VethEnd, VethSpec};

use crate::drivers::plan::{Plan, MAIN_TABLE};
use crate::error::{Error, Result};
use crate::failpoint;

/// Creates the veth of `plan`: host end (on `controller` when given) up and in the attaching
/// link group of the store marking with `mark` ([`super::mark::attaching_group`]), pod end
/// inside `pod_ns`, in one request. Returns the pod end's index. On error the caller rolls
/// back. Its ownership mark, and its hairpin mode, come with the attach's completion
/// ([`super::complete`]).
///
/// The only kernel call of an attach that may run before its `intent` is durable: the host
/// end's name is deterministic and its group says it is this knid's from the creating message
/// on, in the host netns, so if knid dies before the intent is durable, start-up recovery's
/// sweep deletes the link (and with it the pod end) as one with no record; nothing else exists
/// yet. Everything after waits for the intent.
pub(crate) fn create(
    host: &mut Rtnl,
    pod: &mut Rtnl,
    pod_ns: &NetnsHandle,
    plan: &Plan,
    controller: Option<u32>,
    mark: &str,
    intent: &mut super::Intent<'_>,
) -> Result<u32> {
    let ifname = plan.ifname();
    let host_name = plan.host_ifname();
    let spec = VethSpec {
        host: VethEnd {
            name: host_name.to_owned(),
            mtu: Some(plan.result.mtu),
            // Routed pods' static gateway neighbours point at this fixed address.
            mac: plan.result.neighbors.first().map(|n| n.mac.0),
        },
        peer: VethEnd {
            name: ifname.to_owned(),
            mtu: Some(plan.result.mtu),
            mac: Some(plan.result.mac.0),
        },
        peer_netns: Some(pod_ns),
        host_controller: controller,
    };
    // The host end is up, and this knid's, from its creation.
    let group = super::mark::attaching_group(mark);
    let create = |host: &mut Rtnl| {
        host.create_veth_up_in_group(&spec, group).map_err(|e| {
            let context = format!("create veth {host_name} for {ifname}");
            (e.is_exists(), Error::kernel(context, e))
        })
    };
    if let Err((exists, err)) = create(host) {
        if !exists {
            return Err(err);
        }
        // EEXIST: the pod name is taken in the sandbox, by the pod end of a detached veth the
        // reaper has not deleted yet (renamed out of the way now; or deleted by the reaper since)
        // or by anything else (refused); or our deterministic host name is a leftover of an
        // interrupted attach of this very interface (replaced, unless another knid's mark
        // claims it). Then once more.
        if !free_retired_name(pod, ifname)? {
            crate::drivers::check_free(pod, pod_ns, ifname)?;
        }
        if super::mark::remove_leftover(host, host_name, mark)? {
            log::warn!("replaced a stale {host_name} left by an interrupted attach");
        }
        create(host).map_err(|(_, e)| e)?;
    }
    // The intent's flush ran meanwhile; nothing else happens before it is durable.
    intent.durable()?;
    failpoint::hit("attach.veth_created")?;
    match controller {
        // A bridge port needs no IPv6; turned off before its peer, still down, gives it
        // carrier.
        Some(_) => keep_off_ipv6(host, host_name)?,
        None => {
            let host_index = crate::drivers::index_of(host, host_name, "the host netns")?;
            route_to_pod(host, host_index, plan)?;
        }
    }
    crate::drivers::index_of(pod, ifname, "the sandbox netns")
}

/// Bridge networks, host side: the host end has IPv6 turned off
/// ([`knid_netops::sysctl::disable_ipv6`]): no address and no multicast route of its own. A
/// link gone by now is an error; one without IPv6 (an MTU below 1,280) is fine.
fn keep_off_ipv6(host: &mut Rtnl, name: &str) -> Result<()> {
    let off = knid_netops::sysctl::disable_ipv6(name)
        .map_err(|e| Error::kernel(format!("turn IPv6 off on {name}"), e))?;
    if !off {
        crate::drivers::index_of(host, name, "the host netns")?;
    }
    Ok(())
}

/// Routed networks, host side: a route to each pod address via the host end, and a static
/// neighbour entry for it (the pod's MAC is known), so neither side depends on ARP or NDP.
fn route_to_pod(host: &mut Rtnl, host_index: u32, plan: &Plan) -> Result<()> {
    for addr in plan.pod_addresses() {
        let dst = IpNet::from(addr.addr());
        let route = Route {
            dst,
            gateway: None,
            oif: Some(host_index),
            table: MAIN_TABLE,
            mtu: None,
            scope: RouteScope::Link,
            protocol: knid_netops::route::RTPROT_STATIC,
            metric: None,
            onlink: false,
        };
        host.add_route(&route).map_err(|e| {
            Error::kernel(
                format!("add host route {dst} via {}", plan.host_ifname()),
                e,
            )
        })?;
        host.add_neighbour(host_index, addr.addr(), plan.result.mac.0)
            .map_err(|e| {
                Error::kernel(
                    format!("add neighbour {} on {}", addr.addr(), plan.host_ifname()),
                    e,
                )
            })?;
    }
    Ok(())
}

/// Deletes a host link by name (a veth's pod end goes with it). Ok(false) when already gone,
/// e.g. because the pod's netns was destroyed.
pub(crate) fn remove(host: &mut Rtnl, host_ifname: &str) -> Result<bool> {
    host.delete_link_by_name(host_ifname)
        .map_err(|e| Error::kernel(format!("delete {host_ifname}"), e))
}

/// What the alias of a detached veth's pod end starts with, its host end's name after it, until
/// the reaper deletes the pair.
const RETIRED_ALIAS: &str = "knid-retired:";

/// How a detach finds the pod end of a veth in the sandbox netns.
#[derive(Debug, Clone, Copy)]
pub(crate) enum PodEnd<'a> {
    /// By the index recorded when it was attached: the kernel gives an index out once per netns
    /// (it counts on, cyclically, over 2^31), so the index is this link or none.
    Index(u32),
    /// By name, and by `mac` when known (records written before indexes were).
    Named {
        /// Its name in the netns.
        ifname: &'a str,
        /// Its recorded MAC.
        mac: Option<[u8; 6]>,
    },
}

/// Takes the pod end of a veth being detached out of service: the pod end `end` is set down (its
/// routes go with it, so nothing flows and nothing collides with a new interface of the netns)
/// and marked retired (alias `knid-retired:<host ifname>`), in one request; the reaper deletes
/// the pair with its host end later, in a batch. By index that is all; by name it is looked up
/// first, and a link of that name with another MAC is not this interface and is left alone.
/// Its name is freed when a new interface of the netns needs it ([`free_retired_name`]), not
/// here: a rename costs the kernel an RCU grace period under the RTNL lock. Returns whether the
/// pod end is out of service (set down now, or already down and retired). False when it is not
/// in the netns (gone with its pair, as when a reaper round of other detaches deleted it
/// meanwhile, or moved out of the netns, or renamed when looked up by name) or not this
/// interface: the caller then closes the host end instead, which is a no-op for a pair that is
/// gone and leaves a pod end that lives elsewhere nothing to send to.
pub(crate) fn retire_pod_end(pod: &mut Rtnl, end: PodEnd<'_>, host_ifname: &str) -> Result<bool> {
    let alias = format!("{RETIRED_ALIAS}{host_ifname}");
    let index = match end {
        PodEnd::Index(index) => index,
        PodEnd::Named { ifname, mac } => {
            let Some(link) = pod
                .link_by_name(ifname)
                .map_err(|e| Error::kernel(format!("look up {ifname}"), e))?
            else {
                return Ok(false);
            };
            if mac.is_some_and(|mac| link.mac != Some(mac)) {
                return Ok(false);
            }
            if !link.up && link.alias.as_deref() == Some(alias.as_str()) {
                return Ok(true);
            }
            link.index
        }
    };
    failpoint::hit("detach.pod_end_found")?;
    match pod.set_down_with_alias(index, &alias) {
        Err(e) if e.is_not_found() => {
            log::debug!("the pod end of {host_ifname} is gone from its netns");
            Ok(false)
        }
        done => done
            .map(|()| true)
            .map_err(|e| Error::kernel(format!("set the pod end of {host_ifname} down"), e)),
    }
}

/// Frees the name `ifname` in a pod's netns when the link holding it is the pod end of a
/// detached veth ([`retire_pod_end`]: down, alias `knid-retired:<host ifname>`): it is renamed
/// `kx` + 10 hex digits derived from its host end's name, until the reaper deletes the pair.
/// Returns whether it was (false: no such link, or not a retired pod end).
pub(crate) fn free_retired_name(pod: &mut Rtnl, ifname: &str) -> Result<bool> {
    let Some(link) = pod
        .link_by_name(ifname)
        .map_err(|e| Error::kernel(format!("look up {ifname}"), e))?
    else {
        return Ok(false);
    };
    let Some(host_ifname) = link
        .alias
        .as_deref()
        .and_then(|alias| alias.strip_prefix(RETIRED_ALIAS))
        .filter(|_| !link.up)
    else {
        return Ok(false);
    };
    let retired = crate::drivers::names::retired_pod_ifname(host_ifname);
    let renamed = match pod.rename(link.index, &retired) {
        // An earlier detach of this interface left its pod end here, not reaped yet: it goes now.
        Err(e) if e.is_exists() => {
            pod.delete_link_by_name(&retired)
                .map_err(|e| Error::kernel(format!("delete {retired}"), e))?;
            pod.rename(link.index, &retired)
        }
        other => other,
    };
    match renamed {
        Ok(()) => log::debug!("{ifname}: the pod end of detached {host_ifname} renamed {retired}"),
        // The reaper deleted it meanwhile: the name is free all the same.
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(Error::kernel(format!("rename {ifname} to {retired}"), e)),
    }
    Ok(true)
}
