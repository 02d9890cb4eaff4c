//! The node side of each network: set up at start-up, on reload and by SetupNodeNetwork (the
//! bridge and its gateway addresses for `bridge` networks, see [`bridge`]; the parent device of
//! macvlan and ipvlan networks checked), the IPAM pools loaded, forwarding enabled, knid's
//! nf_tables tables rebuilt ([`nat`], [`antispoof`]); and the node-side readiness of each network.
//!
//! A bridge is created at start-up and when a reload adds its network, and re-created by
//! SetupNodeNetwork (or a restart) if it was deleted behind knid's back — never by an attach:
//! the pods attached to it lost their ports with it, and only [`bridge::reconnect_ports`] brings
//! them back, so an attach that finds its bridge broken fails and says how to repair it.

use std::collections::HashMap;

use knid_netops::{sysctl, Rtnl};
use knid_store::AttachmentRecord;

use crate::config::{Driver, Network};
use crate::error::{Error, Result};
use crate::lifecycle;
use crate::locks::{LockExt, RwLockExt};
use crate::model::AttachmentState;
use crate::records::corrupt;
use crate::shared::Context;

pub mod antispoof;
pub mod bridge;
pub mod cluster;
pub mod host_ports;
pub mod nat;
pub mod overlay;
pub mod plan;
pub mod policy;
pub(crate) mod port_census;
pub(crate) mod recorded;
pub mod routes;

pub use bridge::bridge_mac;

/// A netlink socket in knid's own (the host's) network namespace: the calling thread's.
pub(crate) fn host_rtnl() -> Result<Rtnl> {
    Rtnl::open().map_err(|e| Error::kernel("open host netlink socket", e))
}

/// What start-up read and listed before the networks are applied, given to [`apply`] only when
/// recovery changed nothing, and nothing can attach before it returns.
pub(crate) struct AtStart {
    /// Every usable attachment record, as recovery read them.
    pub(crate) records: Vec<AttachmentRecord>,
    /// The source guards' chains, listed while recovery ran.
    pub(crate) guards: antispoof::Listing,
}

/// (Re)applies a network list: node side set up, pools loaded. A network holding addresses
/// keeps its old definition if the new one changes its subnets (refused and logged).
///
/// `start` is given only at start-up ([`AtStart`]); else the records are read here when
/// needed (for a bridge to give its ports back, and for the source guards after the guards
/// are listed), and the guards listed here.
pub(crate) fn apply(ctx: &Context, wanted: Vec<Network>, start: Option<AtStart>) -> Result<()> {
    let mut rtnl = host_rtnl()?;
    let current = ctx.networks();
    let held = ctx.store.networks_with_reservations()?;
    let at_start = start.is_some();
    // Read only if a bridge turns out to be missing.
    let (mut attachments, listed) = match start {
        Some(s) => (Some(s.records), Some(s.guards)),
        None => (None, None),
    };
    let mut next: HashMap<String, Network> = HashMap::new();
    // A bridge created (its ports given back): the ports counted before are stale.
    let mut bridge_made = false;
    for net in wanted {
        let old = current.get(&net.name);
        if let Some(old) = old.filter(|o| o.subnets != net.subnets && held.contains(&o.name)) {
            if !takes_its_pods_addresses(ctx, old, &net)? {
                log::error!(
                    "network {}: subnets cannot change while addresses are reserved; keeping \
                     the old definition",
                    old.name
                );
                next.insert(old.name.clone(), old.clone());
                continue;
            }
        }
        let bridge = setup(&mut rtnl, &net)?;
        // NetworkPolicy sees the traffic between pods of one bridge only through br_netfilter;
        // without it, the bridge is left as the node's sysctls make it.
        if let Some(b) = &bridge {
            let on = ctx.policies.is_some();
            rtnl.set_bridge_netfilter(b.index, on).map_err(|e| {
                Error::kernel(
                    format!("network {}: bridge nf_call_iptables {on}", net.name),
                    e,
                )
            })?;
        }
        ctx.bridges.clear();
        if let Some(bridge) = bridge.filter(|b| b.created) {
            bridge_made = true;
            let all = match attachments.as_ref() {
                Some(all) => all,
                None => attachments.insert(corrupt::all_attachments(&ctx.store)?.usable),
            };
            reconnect_ports(ctx, &mut rtnl, &net, bridge.index, all)?;
        }
        let reservations = ctx.store.reservation_owners(&net.name)?;
        let cursors: Vec<_> = [false, true]
            .into_iter()
            .filter_map(|v6| ctx.store.cursor(&net.name, v6).transpose())
            .collect::<std::result::Result<_, _>>()?;
        ctx.ipam.load_network(&net, reservations, &cursors);
        let addressing = match net.cni() {
            // The conflist's own plugins and IPAM.
            Some(cni) => format!(
                "list {} (CNI {}): {}",
                cni.list.name,
                cni.list.version,
                (0..cni.list.plugins.len())
                    .map(|i| cni.list.plugin_type(i))
                    .collect::<Vec<_>>()
                    .join(" → ")
            ),
            None => net
                .subnets
                .iter()
                .map(|(s, g)| format!("{s} gw {g}"))
                .collect::<Vec<_>>()
                .join(", "),
        };
        log::info!(
            "network {} ({}{}) ready: {addressing}",
            net.name,
            net.kind(),
            net.bridge()
                .or(net.parent())
                .map(|d| format!(" on {d}"))
                .unwrap_or_default(),
        );
        next.insert(net.name.clone(), net);
    }
    for (name, old) in &current {
        if !next.contains_key(name) {
            if held.contains(name) {
                log::error!("network {name}: still holds addresses; kept although it left the configuration");
                next.insert(name.clone(), old.clone());
            } else {
                log::info!("network {name}: left the configuration; removed");
                ctx.ipam.remove_network(name);
            }
        }
    }
    enable_forwarding()?;
    for net in next.values() {
        if let Some(bridge) = net.bridge() {
            // A host port reached at 127.0.0.1 leaves through the bridge with a loopback
            // source (masqueraded in postrouting, after routing): the kernel drops it there
            // unless route_localnet is on, as CNI portmap sets it.
            let key = format!("net/ipv4/conf/{bridge}/route_localnet");
            if let Err(e) = sysctl::write(&key, "1") {
                log::warn!("network {}: {key}: {e}", net.name);
            }
        }
    }
    // Bridges created or given their ports back, or changed by a reload: the counts are taken
    // anew meanwhile. At start-up, where the bridges found are left as they were, the look
    // taken while recovery ran (which counted them) stands unless a bridge was made.
    if bridge_made || !at_start {
        ctx.port_census.changed();
    }
    if next.values().any(|n| n.bridge().is_some()) {
        ctx.port_census.warm_up();
    }
    // One socket for both: the close of one whose transaction replaced a table waits for an RCU
    // grace period (~10 ms; NETLINK_URELEASE flushes nf_tables' destroy work), which passes
    // meanwhile when the guards' work comes between.
    let mut nft = nat::host_nft()?;
    nat::apply(&mut nft, next.values(), ctx.host_ports.all_elements())?;
    // Read again after the guards are listed, but at start-up: an attach may have guarded its
    // link since they were read for the ports.
    antispoof::apply(
        &mut nft,
        &ctx.store,
        &next,
        attachments.filter(|_| at_start),
        listed,
    )?;
    // The kernel has them: in force even if the store cannot record them now.
    let saved = recorded::save(&ctx.store, &next, &held);
    *ctx.networks.exclusive() = next;
    saved
}

/// Whether `new` may replace `old`, a network whose pods hold addresses: only when `old`
/// waited for its pod CIDR (it had no subnets: a store from before the pod CIDR was recorded)
/// and every address its pods hold lies in `new`'s subnets.
fn takes_its_pods_addresses(ctx: &Context, old: &Network, new: &Network) -> Result<bool> {
    if !old.awaits_pod_cidr() || new.subnets.is_empty() {
        return Ok(false);
    }
    let held = ctx.store.reservation_owners(&old.name)?;
    Ok(held
        .iter()
        .all(|(addr, _)| new.subnets.iter().any(|(net, _)| net.contains(addr))))
}

/// Puts the host ends of `net`'s live attachments among `all` back on its bridge, just
/// created: if it was deleted behind knid's back, their ports went with it.
fn reconnect_ports(
    ctx: &Context,
    rtnl: &mut Rtnl,
    net: &Network,
    index: u32,
    all: &[AttachmentRecord],
) -> Result<()> {
    let ports: Vec<String> = all
        .iter()
        .filter(|rec| rec.network == net.name)
        .filter(|rec| {
            matches!(
                lifecycle::state_of(rec),
                Ok(AttachmentState::Pending
                    | AttachmentState::Provisioning
                    | AttachmentState::Attached)
            )
        })
        .map(|rec| rec.host_ifname.clone())
        .collect();
    if ports.is_empty() {
        return Ok(());
    }
    let bridge = net.bridge().unwrap_or_default();
    let reconnected = bridge::reconnect_ports(rtnl, bridge, index, &ports, ctx.reaper_group)?;
    log::warn!(
        "network {}: bridge {bridge} was missing: set up again, {reconnected} of {} pod \
         port(s) reconnected",
        net.name,
        ports.len()
    );
    Ok(())
}

/// Sets up the node side of `network`, idempotently: run at every start, reload and
/// SetupNodeNetwork. A bridge is created if missing (see [`bridge::BridgeSetUp`]); a missing parent
/// device is only reported (by [`check`]), since it may appear later.
pub fn setup(rtnl: &mut Rtnl, network: &Network) -> Result<Option<bridge::BridgeSetUp>> {
    match &network.driver {
        Driver::Bridge { .. } => bridge::setup_bridge(rtnl, network).map(Some),
        _ => {
            if let Some(reason) = check(rtnl, network)? {
                log::warn!("network {}: {reason}", network.name);
            }
            Ok(None)
        }
    }
}

/// Enables IPv4 and IPv6 forwarding in the calling thread's (host) netns.
pub fn enable_forwarding() -> Result<()> {
    sysctl::enable_forwarding().map_err(|e| Error::kernel("enable forwarding", e))
}

/// Why a network's node side is not ready, if it is not: a bridge missing, not a bridge, down,
/// or lacking a gateway address; a parent device missing or down.
pub fn check(rtnl: &mut Rtnl, network: &Network) -> Result<Option<String>> {
    if let Some(parent) = network.parent() {
        return Ok(
            match rtnl
                .link_by_name(parent)
                .map_err(|e| Error::kernel(format!("look up parent {parent}"), e))?
            {
                None => Some(format!("parent device {parent} is missing")),
                Some(link) if !link.up => Some(format!("parent device {parent} is down")),
                Some(_) => None,
            },
        );
    }
    let Some(name) = network.bridge() else {
        return Ok(None);
    };
    let found = rtnl
        .link_by_name(name)
        .map_err(|e| Error::kernel(format!("look up bridge {name}"), e))?;
    let link = match bridge::usable_bridge(name, found) {
        Ok(link) => link,
        Err(problem) => return Ok(Some(problem)),
    };
    let addrs = rtnl
        .addresses(Some(link.index))
        .map_err(|e| Error::kernel(format!("list addresses of {name}"), e))?;
    for (_, gateway) in &network.subnets {
        if !addrs.iter().any(|a| a.net.addr() == *gateway) {
            return Ok(Some(format!("bridge {name} lacks gateway {gateway}")));
        }
    }
    Ok(None)
}

/// Changes the plan with `change`, then applies it (see [`apply`]). Returns what
/// `change` returned.
pub(crate) fn update_plan<T>(
    ctx: &Context,
    change: impl FnOnce(&mut plan::Plan) -> T,
) -> Result<T> {
    update_plan_with(ctx, None, change)
}

/// [`update_plan`] with what start-up read and listed (see [`apply`]).
pub(crate) fn update_plan_with<T>(
    ctx: &Context,
    start: Option<AtStart>,
    change: impl FnOnce(&mut plan::Plan) -> T,
) -> Result<T> {
    let mut plan = ctx.plan.acquire();
    let out = change(&mut plan);
    let networks = plan.networks();
    apply(ctx, networks, start)?;
    Ok(out)
}
