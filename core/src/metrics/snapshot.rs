//! The gauges that mirror the runtime's state, read from the shared context when the metrics are
//! rendered.

use std::sync::atomic::Ordering;

use super::Snapshot;
use crate::locks::RwLockExt;
use crate::shared::Context;

/// What [`Metrics::render`] mirrors of `ctx`: one pass over the pools, and the bridges' port
/// counts (no plugin calls).
pub(crate) fn snapshot(ctx: &Context) -> Snapshot {
    let names: Vec<String> = ctx.networks.shared().keys().cloned().collect();
    let bridges: Vec<(String, String)> = ctx
        .networks
        .shared()
        .values()
        .filter_map(|n| n.bridge().map(|b| (n.name.clone(), b.to_owned())))
        .collect();
    Snapshot {
        ports: bridge_ports(ctx, &bridges),
        ipam: names
            .into_iter()
            .map(|name| {
                let capacity = ctx.ipam.capacity(&name);
                (name, capacity)
            })
            .collect(),
        sandboxes: ctx.sandbox_count.load(Ordering::Relaxed),
        host_ports: ctx.host_ports.mapping_count(),
        nat_elements: ctx.host_ports.element_count(),
        antispoof_drops: crate::node::antispoof::drops()
            .into_iter()
            .map(|(reason, n)| (reason.as_str(), n))
            .collect(),
        reaper_queue: ctx.reaper_stats.queued.load(Ordering::Relaxed),
        store_bytes: ctx
            .store
            .size_on_disk()
            .map_err(|e| log::debug!("metrics: store size: {e}"))
            .ok(),
        cluster: ctx.cluster.as_deref().map(crate::cluster::View::info),
        policy: ctx.policies.as_deref().map(policy_counts),
    }
}

/// What the NetworkPolicy metrics mirror.
fn policy_counts(policies: &crate::node::policy::Policies) -> super::PolicyCounts {
    let summary = policies.summary();
    super::PolicyCounts {
        objects: vec![
            ("networkpolicies", summary.world.policies.len()),
            ("namespaces", summary.world.namespaces.len()),
            ("pods", summary.world.pods.len()),
        ],
        denied: summary
            .denied
            .iter()
            .map(|((key, direction), n)| (format!("{}/{}", key.0, key.1), direction.as_str(), *n))
            .collect(),
        repairs: summary.repairs,
    }
}

/// The ports of each (network, bridge) whose bridge exists.
fn bridge_ports(
    ctx: &Context,
    bridges: &[(String, String)],
) -> Vec<(String, crate::model::BridgePorts)> {
    if bridges.is_empty() {
        return Vec::new();
    }
    let mut rtnl = match crate::node::host_rtnl() {
        Ok(rtnl) => rtnl,
        Err(e) => {
            log::debug!("metrics: {}", e.chain());
            return Vec::new();
        }
    };
    let mut counts = None;
    bridges
        .iter()
        .filter_map(|(network, bridge)| {
            ctx.port_census
                .ports(&mut rtnl, bridge, &mut counts)
                .map_err(|e| log::debug!("metrics: {}", e.chain()))
                .ok()
                .flatten()
                .map(|ports| (network.clone(), ports))
        })
        .collect()
}
