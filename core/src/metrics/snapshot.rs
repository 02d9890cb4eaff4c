//! The gauges that mirror the runtime's state, read from the shared context when the metrics are
//! rendered.

use std::sync::atomic::Ordering;

use super::Snapshot;
use crate::locks::RwLockExt;
use crate::shared::Context;

/// What [`Metrics::render`] mirrors of `ctx`: no kernel or plugin calls, one pass over the pools.
pub(crate) fn snapshot(ctx: &Context) -> Snapshot {
    let names: Vec<String> = ctx.networks.shared().keys().cloned().collect();
    Snapshot {
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
        reaper_queue: ctx.reaper_stats.queued.load(Ordering::Relaxed),
        store_bytes: ctx
            .store
            .size_on_disk()
            .map_err(|e| log::debug!("metrics: store size: {e}"))
            .ok(),
        cluster: ctx.cluster.as_deref().map(crate::cluster::View::info),
    }
}
