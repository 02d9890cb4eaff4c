//! The reconciler's round: the GC sweep (netns gone, interrupted operations, orphaned links and
//! reservations) that the runtime runs every `gc_interval` on a thread of its own.

use super::OnShard;
use crate::context::Context;
use crate::model::GcRequest;

/// One round: a collection without a keep list (only what is certainly garbage), logged.
pub(crate) fn sweep(ctx: &Context, shards: &dyn OnShard) {
    // A failed store refuses the writes a sweep makes until knid restarts.
    if !shards.accepting() || ctx.store.failure().is_some() {
        return;
    }
    let req = GcRequest {
        keep: None,
        dry_run: false,
    };
    // Records knid cannot use are left to a GarbageCollect someone asks for: one may still
    // describe a live interface, and only its owner can tell.
    match super::collect(ctx, shards, &req, super::Corrupt::Leave, None) {
        Ok(report) => super::record(ctx, "reconciler", &report),
        Err(e) => log::warn!("reconciler: {}", e.chain()),
    }
    knid_netops::malloc::give_back();
}
