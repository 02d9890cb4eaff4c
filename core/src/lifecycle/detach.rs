//! Detach, run on the sandbox's shard worker (docs/architecture.md#the-path-of-one-request): call the pre-detach extensions,
//! record Detaching durably, retire the host links into the reaper's group, mark Reaping, hand
//! them to the reaper and reply. The ~20 ms per-link deletion happens later, batched, off the
//! caller's path.
//!
//! Unknown sandboxes and interfaces are success (the CNI DEL rule); a repeated or interrupted
//! detach simply runs again. Leftovers of an interrupted attach among the selected interfaces
//! are rolled back on the spot.

use knid_netops::Rtnl;
use knid_store::{AttachmentRecord, SandboxRecord};

use super::{reaper_queue, rollback};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::extension::Phase;
use crate::failpoint;
use crate::lifecycle::teardown::{self, SandboxAfter};
use crate::lifecycle::{self, Event, Recovery};
use crate::model::now_ms;
use crate::model::AttachmentState;
use crate::records::sandbox_from_records;

/// Detaches the attachments of sandbox `id` that `select` picks.
pub(crate) fn run(
    ctx: &Context,
    host: &mut Rtnl,
    id: &str,
    select: impl Fn(&AttachmentRecord) -> bool,
) -> Result<()> {
    let all = ctx.store.attachments(id)?;
    let mut detach = Vec::new();
    let mut undo = Vec::new();
    let mut requeue = Vec::new();
    let mut live_staying = false;
    for rec in all {
        let state = lifecycle::state_of(&rec)?;
        if !select(&rec) {
            live_staying |= !matches!(state, AttachmentState::Detaching | AttachmentState::Reaping);
            continue;
        }
        match (state, lifecycle::recovery(state)) {
            // Already the reaper's; queued again in case an earlier detach failed between the
            // mark and the hand-over (a second reap of the same record is a no-op).
            (AttachmentState::Reaping, _) => requeue.push(rec),
            (_, Recovery::RollBack) => undo.push(rec),
            _ => detach.push(rec),
        }
    }
    hand_to_reaper(ctx, requeue);
    let now = now_ms();
    let sandbox = ctx.store.sandbox(id)?;
    let after = match (&sandbox, live_staying) {
        (Some(_), false) => Some(SandboxAfter::Delete(id.to_owned())),
        (Some(rec), true) => Some(SandboxAfter::Put(Box::new(SandboxRecord {
            generation: rec.generation + 1,
            updated_at_ms: now,
            ..rec.clone()
        }))),
        (None, _) => None,
    };
    if detach.is_empty() {
        // Only leftovers of an interrupted attach: the sandbox record changes with them.
        if !undo.is_empty() || matches!(after, Some(SandboxAfter::Delete(_))) {
            rollback::run(ctx, host, undo, after)?;
        }
        return Ok(());
    }
    if !undo.is_empty() {
        rollback::run(ctx, host, undo, None)?;
    }
    if let Some(rec) = sandbox
        .as_ref()
        .filter(|_| ctx.extensions.has(Phase::PreDetach))
    {
        run_pre_detach(ctx, rec, &detach);
    }

    // Durable before the first kernel call, so an interrupted detach is finished, not forgotten.
    // The sandbox record changes in the same commit: once Detach returns, the sandbox (or the
    // interface) is gone from Inspect and List even though the reaper has not run yet.
    let mut batch = lifecycle::advance_all(&mut detach, Event::Detach, now)?;
    let deleted = after.is_some_and(|a| a.add_to(&mut batch));
    ctx.store.commit(&batch)?;
    if deleted {
        teardown::sandbox_gone(ctx);
    }
    failpoint::hit("detach.detaching")?;

    // Kata must not find a DAN tap that is going away.
    teardown::sync_dan_files(ctx, &detach);
    teardown::retire_links(ctx, host, &detach)?;
    failpoint::hit("detach.retired")?;

    let marks = lifecycle::advance_all(&mut detach, Event::Retired, now)?;
    ctx.store.apply(&marks)?;
    failpoint::hit("detach.reaping")?;

    log::debug!("{id}: {} interface(s) handed to the reaper", detach.len());
    hand_to_reaper(ctx, detach);
    Ok(())
}

/// Calls the pre-detach extensions with the sandbox as it still is (every interface attached or
/// being detached) and the names of the `leaving` interfaces. Nothing here stops the detach: a
/// sandbox that cannot be shown is logged and the extensions are not called.
fn run_pre_detach(ctx: &Context, rec: &SandboxRecord, leaving: &[AttachmentRecord]) {
    let shown = ctx
        .store
        .attachments(&rec.id)
        .map_err(Error::from)
        .map(|all| {
            all.into_iter()
                .filter(|a| {
                    matches!(
                        lifecycle::state_of(a),
                        Ok(AttachmentState::Attached | AttachmentState::Detaching)
                    )
                })
                .collect()
        });
    match shown.and_then(|shown| sandbox_from_records(rec, shown)) {
        Ok(sandbox) => {
            let ifnames: Vec<String> = leaving.iter().map(|r| r.ifname.clone()).collect();
            ctx.extensions.pre_detach(&sandbox, &ifnames);
        }
        Err(e) => log::error!(
            "{}: pre-detach extensions not called, the sandbox cannot be read: {}",
            rec.id,
            e.chain()
        ),
    }
}

/// Queues Reaping records for the reaper.
pub(crate) fn hand_to_reaper(ctx: &Context, recs: Vec<AttachmentRecord>) {
    if recs.is_empty() {
        return;
    }
    ctx.reaper_stats
        .queued
        .fetch_add(recs.len() as u64, std::sync::atomic::Ordering::SeqCst);
    if ctx.reaper.send(reaper_queue::Msg::Reap(recs)).is_err() {
        // Only after shutdown: the records stay Reaping and the next start-up finishes them.
        log::warn!("reaper stopped; Reaping attachments are finished at the next start");
    }
}
