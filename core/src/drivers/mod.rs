//! The pod side of an interface, whatever its kind: configuring it once it is in the sandbox
//! netns (addresses, up, routes, neighbours), and releasing what the host link's deletion does
//! not take along (a tap beside a veth, a macvlan or ipvlan, a host device to give back).

use knid_netops::netns::LOOPBACK_INDEX;
use knid_netops::{NetnsHandle, Route, RouteScope as NlScope, Rtnl, Step};
use knid_store::AttachmentRecord;

use crate::error::{Error, Result};
use crate::failpoint;
use crate::model::{InterfaceKind, RouteScope};
use crate::records::{attachment_from_record, attachment_key};
use plan::Plan;

pub(crate) mod cni;
pub(crate) mod dan;
pub(crate) mod hostdev;
pub(crate) mod macvlan;
pub mod names;
pub(crate) mod plan;
pub(crate) mod tap;
pub(crate) mod veth;

/// Fails when `ifname` already exists in the sandbox netns.
pub(crate) fn check_free(pod: &mut Rtnl, pod_ns: &NetnsHandle, ifname: &str) -> Result<()> {
    let taken = pod
        .link_by_name(ifname)
        .map_err(|e| Error::kernel(format!("look up {ifname} in netns"), e))?
        .is_some();
    if taken {
        return Err(Error::FailedPrecondition(format!(
            "interface {ifname} already exists in netns {}",
            pod_ns.path().display()
        )));
    }
    Ok(())
}

/// The index of link `name`, which must exist (`place` names the netns for the message).
pub(crate) fn index_of(rtnl: &mut Rtnl, name: &str, place: &str) -> Result<u32> {
    rtnl.link_by_name(name)
        .map_err(|e| Error::kernel(format!("look up {name} in {place}"), e))?
        .map(|l| l.index)
        .ok_or_else(|| Error::FailedPrecondition(format!("{name} vanished from {place}")))
}

/// Configures the pod interface `index` as `plan` says: addresses, up (and `lo`), static
/// neighbours, routes, in that order and in one netlink round trip.
pub(crate) fn configure(pod: &mut Rtnl, index: u32, plan: &Plan) -> Result<()> {
    let ifname = plan.ifname();
    let mut steps: Vec<Step> = plan
        .pod_addresses()
        .map(|net| Step::Address { index, net })
        .collect();
    steps.push(Step::Up(index));
    // Every pod expects a working loopback; setting it up again is a no-op.
    steps.push(Step::Up(LOOPBACK_INDEX));
    for n in &plan.result.neighbors {
        steps.push(Step::Neighbour {
            index,
            ip: n.ip,
            mac: n.mac.0,
        });
    }
    for r in &plan.result.routes {
        steps.push(Step::Route(Route {
            dst: r.dst,
            gateway: r.gateway,
            oif: Some(index),
            table: r.table,
            mtu: r.mtu,
            scope: match r.scope {
                RouteScope::Universe => NlScope::Universe,
                RouteScope::Link => NlScope::Link,
                RouteScope::Host => NlScope::Host,
            },
            protocol: knid_netops::route::RTPROT_STATIC,
            metric: r.metric,
            // A gateway in the interface's own subnet is on its link by construction. Said so,
            // the route does not wait for the IPv6 prefix route the kernel adds only once the
            // link just set up is ready (asynchronously, seen failing under load).
            onlink: r
                .gateway
                .is_some_and(|gw| plan.pod_addresses().any(|net| net.contains(&gw))),
        }));
    }
    // One round trip for all of it.
    pod.apply_steps(&steps).map_err(|failed| {
        let context = match &steps[failed.step] {
            Step::Address { net, .. } => format!("add {net} to {ifname}"),
            Step::Up(LOOPBACK_INDEX) => "set lo up".to_owned(),
            Step::Up(_) => format!("set {ifname} up"),
            Step::Neighbour { ip, .. } => format!("add neighbour {ip} on {ifname}"),
            Step::Route(route) => format!("add route {} on {ifname}", route.dst),
        };
        Error::kernel(context, failed.error)
    })?;
    failpoint::hit("attach.routed")?;
    Ok(())
}

/// Whether the pod side of `rec` holds something the host link's deletion does not remove.
pub(crate) fn has_pod_side(rec: &AttachmentRecord) -> bool {
    match rec.kind.as_str() {
        "tap" => rec.tap.as_ref().is_some_and(|t| !t.dan),
        "macvlan" | "ipvlan" | "host-device" => true,
        _ => false,
    }
}

/// Releases the pod side of `atts` (a tap beside a veth, a macvlan or ipvlan deleted; a host
/// device moved back to the host with its original name, MTU and state). `ns` is the sandbox
/// netns when it still exists; without it a tap or child went with it, and a physical device
/// was returned to the host by the kernel (then it is only renamed back). Idempotent; every
/// attachment is tried and the first error returned.
pub(crate) fn release(
    host: &mut Rtnl,
    ns: Option<&NetnsHandle>,
    atts: &[AttachmentRecord],
) -> Result<()> {
    let atts: Vec<&AttachmentRecord> = atts.iter().filter(|a| has_pod_side(a)).collect();
    if atts.is_empty() {
        return Ok(());
    }
    let mut pod = match ns {
        Some(ns) => Some(Rtnl::open_in(ns).map_err(|source| Error::Netns {
            path: ns.path().to_path_buf(),
            source,
        })?),
        None => None,
    };
    let mut first_error = None;
    for att in atts {
        let result = attachment_from_record(att).and_then(|iface| match iface.kind {
            InterfaceKind::Tap => match (&mut pod, &iface.tap) {
                (Some(pod), Some(tap)) => crate::drivers::tap::remove_pod_tap(pod, &tap.name),
                _ => Ok(()),
            },
            InterfaceKind::Macvlan | InterfaceKind::Ipvlan => match &mut pod {
                Some(pod) => crate::drivers::macvlan::remove(pod, &iface),
                None => Ok(()),
            },
            InterfaceKind::HostDevice => {
                crate::drivers::hostdev::give_back(host, pod.as_mut(), &iface)
            }
            // A cni interface is the plugins' to remove (teardown runs its DEL chain).
            InterfaceKind::Veth | InterfaceKind::Cni => Ok(()),
        });
        if let Err(e) = result {
            log::warn!("{}: {}", attachment_key(att), e.chain());
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}
