//! The drivers: the pod side of an interface, per kind (veth, tap, DAN tap, macvlan/ipvlan,
//! host device, cni), behind the one dispatch on the kind in this file: which request fields a
//! kind takes ([`check_request`]), creating it ([`create`]), configuring it once it is in the
//! sandbox netns (addresses, up, routes, neighbours), verifying it ([`verify`]) and releasing
//! what the host link's deletion does not take along ([`release`]: a cni DEL chain, a tap beside
//! a veth, a macvlan or ipvlan, a host device to give back). Adding a kind touches this folder.

use std::collections::HashSet;

use knid_netops::netns::LOOPBACK_INDEX;
use knid_netops::{NetnsHandle, Route, RouteScope as NlScope, Rtnl, Step};
use knid_store::{AttachmentRecord, Batch};

use crate::config::Network;
use crate::error::{Error, Result};
use crate::failpoint;
use crate::lifecycle::attachment_key;
use crate::model::validate::Invalid;
use crate::model::{InterfaceKind, InterfaceResult, InterfaceSpec, MacAddr, RouteScope};
use crate::node;
use crate::records::attachment_from_record;
use crate::shared::Context;
use plan::Plan;

pub(crate) use crate::records::is_cni;
pub(crate) use intent::Intent;
pub(crate) use links::{check_free, found_or_vanished, index_of};

pub(crate) mod bandwidth;
pub(crate) mod cni;
pub(crate) mod dan;
pub(crate) mod hostdev;
mod intent;
mod links;
pub(crate) mod macvlan;
pub(crate) mod mark;
pub mod names;
pub(crate) mod plan;
pub(crate) mod tap;
pub(crate) mod verify;
pub(crate) mod veth;

/// The request rules of each kind, beyond the network's (see `Network::check_interface`):
/// which of an interface's fields a kind takes. The error names the field, relative to the
/// interface (`"mac"`, `"device"`).
pub(crate) fn check_request(
    kind: InterfaceKind,
    spec: &InterfaceSpec,
) -> std::result::Result<(), (String, Invalid)> {
    let refuse = |field: &str, rule: String| Err((field.to_owned(), Invalid::new(rule)));
    if spec.tap.is_some() && kind != InterfaceKind::Tap {
        return refuse(
            "tap",
            format!(
                "is only allowed with kind tap (this interface is {})",
                kind.as_str()
            ),
        );
    }
    // A cni network's plugins get the limits as the `bandwidth` capability.
    let shaped = matches!(
        kind,
        InterfaceKind::Veth | InterfaceKind::Tap | InterfaceKind::Cni
    );
    if spec.bandwidth.is_some() && !shaped {
        return refuse(
            "bandwidth",
            format!(
                "is only allowed with kinds veth and tap, whose host link knid shapes, and cni, \
                 whose plugins get it as the bandwidth capability (this interface is {})",
                kind.as_str()
            ),
        );
    }
    match (&spec.device, kind) {
        (None, InterfaceKind::HostDevice) => {
            return refuse(
                "device",
                "is required with kind host-device: name or pci_address".into(),
            )
        }
        (Some(_), k) if k != InterfaceKind::HostDevice => {
            return refuse(
                "device",
                format!(
                    "is only allowed with kind host-device (this interface is {})",
                    k.as_str()
                ),
            )
        }
        _ => {}
    }
    match kind {
        InterfaceKind::HostDevice if spec.mac.is_some() => refuse(
            "mac",
            "must be empty: a host device keeps its own MAC".into(),
        ),
        InterfaceKind::Cni if spec.mtu.is_some() => refuse(
            "mtu",
            "must be empty: a cni network's plugins set the MTU".into(),
        ),
        _ => Ok(()),
    }
}

/// Whether knid's IPAM gives this kind its addresses (a cni network's IPAM plugin does, and
/// judges static addresses itself: the `ips` capability).
pub(crate) fn knid_assigns_addresses(kind: InterfaceKind) -> bool {
    kind != InterfaceKind::Cni
}

/// Creates one planned interface in the sandbox netns (`pod`, `ns`) and configures it: THE
/// dispatch on the interface kind. Every kernel effect but a veth's creation waits for the
/// attach's `intent` to be durable (see [`veth::create`] for why that one need not). A cni
/// interface's chain result is written into `rec` (and the store) as soon as ADD returns, so
/// whatever happens next, its DEL gets the result as prevResult.
pub(crate) fn create(
    ctx: &Context,
    host: &mut Rtnl,
    pod: &mut Rtnl,
    ns: &NetnsHandle,
    plan: &Plan,
    rec: &mut AttachmentRecord,
    intent: &mut Intent<'_>,
) -> Result<()> {
    let bridge = match plan.bridge() {
        Some(_) => Some(bridge_index(ctx, host, &plan.network)?),
        None => None,
    };
    let bridge_at = bridge.map(|(index, _)| index);
    // The source guard goes in before the host link exists (its hook waits for the name), so no
    // frame of the pod ever passes an unguarded link. Like the veth's creation it may run before
    // the intent is durable: a guard without a record goes with the next rebuild of the table.
    // A kernel that cannot hook a missing device gets it right after the link is created, the
    // pod's end still down (`late_guard`).
    let guard = node::antispoof::guard_of(&plan.network, &plan.result);
    let mut late_guard = None;
    if let Some(guard) = guard {
        if node::antispoof::hooks_by_name() {
            node::antispoof::install(&guard)?;
            failpoint::hit("attach.guarded")?;
        } else {
            late_guard = Some(guard);
        }
    }
    let guard_now = |late: &mut Option<knid_netops::nft::Guard>| -> Result<()> {
        if let Some(guard) = late.take() {
            node::antispoof::install(&guard)?;
            failpoint::hit("attach.guarded")?;
        }
        Ok(())
    };
    match plan.result.kind {
        InterfaceKind::Tap if plan.result.is_dan() => {
            let bridge = bridge_at.ok_or_else(|| {
                Error::FailedPrecondition(format!(
                    "network {} has no bridge for a DAN tap",
                    plan.network.name
                ))
            })?;
            intent.durable()?;
            tap::create_on_host(host, plan, bridge, &mark::attaching(&ctx.link_mark))
                .map_err(|e| crate::node::bridge::explain(&plan.network, e))?;
            guard_now(&mut late_guard)?;
            shape(ctx, host, plan, &rec.sandbox_id)?;
            keep_bridge_mtu(ctx, host, plan)
        }
        InterfaceKind::Veth | InterfaceKind::Tap => {
            let mark = ctx.link_mark.as_str();
            let created = veth::create(host, pod, ns, plan, bridge_at, mark, intent)
                .map_err(|e| crate::node::bridge::explain(&plan.network, e));
            let index = match created {
                Err(e @ Error::BridgeFull { .. }) => return Err(e),
                // The remembered bridge may have been deleted or replaced behind knid's
                // back: look again (failing if it is gone) and retry once on a new one.
                Err(e) if bridge.is_some_and(|(_, remembered)| remembered) => {
                    ctx.bridges.clear();
                    let (fresh, _) = bridge_index(ctx, host, &plan.network)?;
                    if Some(fresh) == bridge_at {
                        return Err(e);
                    }
                    veth::create(host, pod, ns, plan, Some(fresh), mark, intent)?
                }
                other => other?,
            };
            rec.pod_ifindex = index;
            guard_now(&mut late_guard)?;
            shape(ctx, host, plan, &rec.sandbox_id)?;
            keep_bridge_mtu(ctx, host, plan)?;
            configure(pod, index, plan)?;
            if plan.result.kind == InterfaceKind::Tap {
                tap::create_in_pod(pod, ns, plan, index)?;
            }
            Ok(())
        }
        InterfaceKind::Macvlan | InterfaceKind::Ipvlan => {
            intent.durable()?;
            let index = macvlan::create(host, pod, ns, plan, &ctx.link_mark)?;
            configure(pod, index, plan)
        }
        InterfaceKind::HostDevice => {
            intent.durable()?;
            let index = hostdev::move_in(host, pod, ns, plan)?;
            configure(pod, index, plan)
        }
        InterfaceKind::Cni => {
            intent.durable()?;
            let added = cni::add(ctx, rec);
            let before = rec.clone();
            let recorded = added.and_then(|result| {
                cni::record_result(rec, &result)?;
                // What the plugins reported must map back, or it is not recorded: the
                // record stays as it was and the ADD is undone as a failed one.
                crate::records::check_encodable(rec).inspect_err(|_| *rec = before)
            });
            // The result, or that a failed ADD was already undone, is durable before
            // anything else happens to this attachment.
            let mut batch = Batch::new();
            batch.put_attachment(rec.clone());
            ctx.store.commit(&batch)?;
            recorded?;
            failpoint::hit("attach.cni_added")
        }
    }
}

/// Whether an interface of `kind` ends its attach with the completion mark on its host link
/// ([`complete`]): the veth and tap kinds, whose host link knid creates in the host netns. An
/// attach of such interfaces only may be rolled forward by start-up recovery.
pub(crate) fn completes(kind: InterfaceKind) -> bool {
    matches!(kind, InterfaceKind::Veth | InterfaceKind::Tap)
}

/// The last kernel step of an attach for the interface `plan`, once everything else of every
/// interface succeeded: the completion mark on its host link ([`mark::complete`]), with the
/// hairpin mode of a veth on a bridge. Nothing for the kinds that do not [`complete`].
pub(crate) fn complete(ctx: &Context, host: &mut Rtnl, plan: &Plan) -> Result<()> {
    if !completes(plan.result.kind) {
        return Ok(());
    }
    let hairpin =
        (plan.bridge().is_some() && !plan.result.is_dan()).then(|| plan.network.hairpin());
    mark::complete(host, plan.host_ifname(), &ctx.link_mark, hairpin)
}

/// The bandwidth limits of `plan` on its host link ([`bandwidth::apply`]), if it has any.
fn shape(ctx: &Context, host: &mut Rtnl, plan: &Plan, sandbox_id: &str) -> Result<()> {
    let Some(bw) = &plan.result.bandwidth else {
        return Ok(());
    };
    bandwidth::apply(
        host,
        plan.host_ifname(),
        (sandbox_id, plan.ifname()),
        bw,
        plan.result.mtu,
        &ctx.link_mark,
    )
}

/// The bridge's ifindex, and whether it is only remembered from an earlier attach; one looked
/// up is remembered. A bridge missing, not a bridge, or down fails the attach
/// ([`Error::NodeNetwork`]): see [`node`] for why an attach never sets one up.
fn bridge_index(ctx: &Context, host: &mut Rtnl, network: &Network) -> Result<(u32, bool)> {
    let name = network.bridge().unwrap_or_default();
    if let Some(index) = ctx.bridges.get(name) {
        return Ok((index, true));
    }
    let index = node::bridge::bridge_for_attach(host, network)?;
    ctx.bridges.remember(name, index);
    Ok((index, false))
}

/// A port of a smaller MTU than its network's may have lowered the bridge (a bridge whose MTU
/// was never set keeps following its smallest port): set it back.
fn keep_bridge_mtu(ctx: &Context, host: &mut Rtnl, plan: &Plan) -> Result<()> {
    let network = &plan.network;
    let Some(index) = network.bridge().and_then(|name| ctx.bridges.get(name)) else {
        return Ok(());
    };
    if plan.result.mtu >= network.mtu {
        return Ok(());
    }
    node::bridge::pin_mtu(host, index, network)
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

/// Which MAC the pod side of an interface must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MacRule {
    /// The one knid recorded (Check without an expectation).
    Recorded,
    /// The one the caller expects (a CNI CHECK's prevResult, after a chained plugin changed it).
    Expected(MacAddr),
    /// Any: the reconciler looks for interfaces gone, renamed or down, and a MAC changed in place
    /// (by a chained plugin such as tuning, or the pod) is neither.
    Ignored,
}

/// The first difference between the attached interface `rec` and the kernel, or `None`: its
/// pod side in the sandbox netns (there, up, with its recorded MAC — or `expected_mac` when the
/// caller knows better, none for [`MacRule::Ignored`] — and addresses; a DAN tap has nothing
/// there, the guest owns its addresses), then, for a tap beside a veth, the tap and its
/// redirects, then, for a veth or a tap, its host link (there and up), looked up in `links` (a
/// dump of the host's links) or, without one, by name; then its bandwidth limits, if it has any
/// ([`bandwidth::check`]). Check and the reconciler's look at every attached interface both use
/// it.
pub(crate) fn difference(
    rec: &AttachmentRecord,
    mac_rule: MacRule,
    host: &mut Rtnl,
    links: Option<&std::collections::HashMap<String, knid_netops::Link>>,
) -> Result<Option<verify::Difference>> {
    let iface = attachment_from_record(rec)?;
    if !iface.is_dan() {
        let recorded = (iface.mac != MacAddr::UNKNOWN).then_some(iface.mac.0);
        let mac = verify::MacCheck {
            want: match mac_rule {
                MacRule::Recorded => recorded,
                MacRule::Expected(mac) => Some(mac.0),
                MacRule::Ignored => None,
            },
            recorded,
        };
        let addrs: Vec<_> = iface.ips.iter().map(|ip| ip.address).collect();
        let pod = verify::pod_interface(
            std::path::Path::new(&rec.netns_path),
            &rec.ifname,
            mac,
            &addrs,
        );
        if let Err(d) = pod {
            return Ok(Some(d));
        }
        if let Some(tap) = iface.tap.as_ref().filter(|t| !t.dan) {
            let netns = std::path::Path::new(&rec.netns_path);
            if let Err(d) = verify::pod_tap(netns, &rec.ifname, &tap.name) {
                return Ok(Some(d));
            }
        }
    }
    if matches!(iface.kind, InterfaceKind::Veth | InterfaceKind::Tap) {
        let name = &rec.host_ifname;
        let link = match links {
            Some(links) => links.get(name).cloned(),
            None => host
                .link_by_name(name)
                .map_err(|e| Error::kernel(format!("look up {name}"), e))?,
        };
        if let Err(d) = verify::host_link(name, link.as_ref()) {
            return Ok(Some(d));
        }
        if let (Some(bw), Some(link)) = (&iface.bandwidth, link) {
            if let Err(d) = bandwidth::check(host, rec, link.index, bw) {
                return Ok(Some(d));
            }
        }
    }
    Ok(None)
}

/// Verifies an attached interface against the kernel for Check: [`difference`], then a cni
/// interface's plugins run their own CHECK with the cached result. A difference is
/// FailedPrecondition naming the sandbox and the difference.
pub(crate) fn verify(
    ctx: &Context,
    host: &mut Rtnl,
    rec: &AttachmentRecord,
    expected_mac: Option<MacAddr>,
) -> Result<()> {
    let rule = expected_mac.map_or(MacRule::Recorded, MacRule::Expected);
    let found = difference(rec, rule, host, None)?;
    if let Some(d) = found {
        return Err(Error::FailedPrecondition(format!(
            "sandbox {}: {d}",
            rec.sandbox_id
        )));
    }
    if InterfaceKind::parse(&rec.kind) == Ok(InterfaceKind::Cni) {
        cni::check(ctx, rec)?;
    }
    Ok(())
}

/// Whether the pod side of `rec` needs releasing before its host link goes: something the host
/// link's deletion does not remove, or (a veth's pod end) a name to free at once.
pub(crate) fn has_pod_side(rec: &AttachmentRecord) -> bool {
    match InterfaceKind::parse(&rec.kind) {
        Ok(InterfaceKind::Tap) => !dan::is_dan(rec),
        // Its pod end goes with the host end, but is taken out of service at once.
        Ok(InterfaceKind::Veth) => true,
        Ok(InterfaceKind::Macvlan | InterfaceKind::Ipvlan | InterfaceKind::HostDevice) => true,
        Ok(InterfaceKind::Cni) | Err(_) => false,
    }
}

/// Whether the host link of `rec` is a veth's host end whose pod end a detach sets down (a veth,
/// or a pod tap beside one; not a DAN tap, which is the host link itself): that host link can
/// stay up once retired, and its retirement is the first kernel effect of the detach.
pub(crate) fn has_veth_end(rec: &AttachmentRecord) -> bool {
    match InterfaceKind::parse(&rec.kind) {
        Ok(InterfaceKind::Veth) => true,
        Ok(InterfaceKind::Tap) => !dan::is_dan(rec),
        _ => false,
    }
}

/// Releases the pod side of `atts` (one sandbox's): what deleting the host link does not remove
/// — an IFB shaping what the pod sends, a cni interface's DEL chain, and the rest of
/// [`release_in`] in the netns each attachment recorded. The netns is only opened when one of
/// them needs it. Every attachment is tried; the first error is returned. Returns the host
/// links whose veth's pod end is now down: nothing flows through them any more.
pub(crate) fn release(
    ctx: &Context,
    host: &mut Rtnl,
    atts: &[AttachmentRecord],
) -> Result<HashSet<String>> {
    let mut first_error = None;
    for att in atts {
        if let Err(e) = bandwidth::remove_ifb(host, att) {
            log::warn!("{}: {}", attachment_key(att), e.chain());
            first_error.get_or_insert(e);
        }
    }
    for att in atts.iter().filter(|a| is_cni(a)) {
        if let Err(e) = cni::del(ctx, att) {
            log::warn!("{}: {}", attachment_key(att), e.chain());
            first_error.get_or_insert(e);
        }
    }
    let mut quiet = HashSet::new();
    if let Some(first) = atts.iter().find(|a| has_pod_side(a)) {
        let ns = crate::netns::recorded::still_there(
            &first.netns_path,
            first.netns_dev,
            first.netns_ino,
        );
        if let Err(e) = release_in(host, ns.as_ref(), atts, &mut quiet) {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(quiet), Err)
}

/// [`veth::retire_pod_end`] for the veth end of `att`: by its recorded index when it has one,
/// else by name and MAC.
fn retire_veth_end(
    pod: &mut Rtnl,
    att: &AttachmentRecord,
    iface: &InterfaceResult,
) -> Result<bool> {
    let end = match att.pod_ifindex {
        0 => veth::PodEnd::Named {
            ifname: &att.ifname,
            mac: (iface.mac != MacAddr::UNKNOWN).then_some(iface.mac.0),
        },
        index => veth::PodEnd::Index(index),
    };
    veth::retire_pod_end(pod, end, &att.host_ifname)
}

/// Releases the pod side of `atts` (a veth's pod end set down, a tap beside a veth, a macvlan or
/// ipvlan deleted; a host device moved back to the host with its original name, MTU and state).
/// `ns` is the sandbox netns when it still exists; without it a veth, a tap or a child went with
/// it, and a physical device was returned to the host by the kernel (then it is only renamed
/// back). Idempotent; every attachment is tried and the first error returned. The host links of
/// veths whose pod end was set down (or already was) are added to `quiet`.
fn release_in(
    host: &mut Rtnl,
    ns: Option<&NetnsHandle>,
    atts: &[AttachmentRecord],
    quiet: &mut HashSet<String>,
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
                (Some(pod), Some(tap)) => tap::remove_pod_tap(pod, &tap.name)
                    .and_then(|()| retire_veth_end(pod, att, &iface)),
                _ => Ok(false),
            },
            // Without the netns (gone, or not the recorded one any more) the pod end is out of
            // reach: its host end is taken out of service instead.
            InterfaceKind::Veth => match &mut pod {
                Some(pod) => retire_veth_end(pod, att, &iface),
                None => Ok(false),
            },
            InterfaceKind::Macvlan | InterfaceKind::Ipvlan => match &mut pod {
                Some(pod) => macvlan::remove(pod, &iface).map(|()| false),
                None => Ok(false),
            },
            InterfaceKind::HostDevice => {
                hostdev::give_back(host, pod.as_mut(), &iface).map(|()| false)
            }
            // A cni interface is the plugins' to remove (teardown runs its DEL chain).
            InterfaceKind::Cni => Ok(false),
        });
        match result {
            Ok(true) => {
                quiet.insert(att.host_ifname.clone());
            }
            Ok(false) => {}
            Err(e) => {
                log::warn!("{}: {}", attachment_key(att), e.chain());
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}
