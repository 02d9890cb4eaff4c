//! Detach, run on the sandbox's shard worker (docs/architecture.md#the-path-of-one-request): call the pre-detach extensions,
//! apply Detaching and start its flush, retire the host links into the reaper's group while it
//! runs (a detach of other kinds than veths waits for it first), wait for what is left of it,
//! mark Reaping, hand them to the reaper and reply. The ~20 ms per-link deletion happens later,
//! batched, off the caller's path.
//!
//! Unknown sandboxes and interfaces are success (the CNI DEL rule); a repeated or interrupted
//! detach simply runs again. Leftovers of an interrupted attach among the selected interfaces
//! are rolled back on the spot, records knid cannot use discarded.

use knid_netops::Rtnl;
use knid_store::{AttachmentRecord, SandboxRecord};

use super::{discard, reaper_queue, rollback};
use crate::drivers::{self, Intent};
use crate::error::{Error, Result};
use crate::extension::Phase;
use crate::failpoint;
use crate::lifecycle::stopwatch::Stopwatch;
use crate::lifecycle::teardown::{self, SandboxAfter};
use crate::lifecycle::{self, Event, Recovery};
use crate::model::now_ms;
use crate::model::AttachmentState;
use crate::records::corrupt;
use crate::records::sandbox_from_records;
use crate::shared::Context;

/// The sandbox record as a detach finds it.
enum Recorded {
    Usable(Box<SandboxRecord>),
    /// There, but knid cannot use it.
    Corrupt,
    Missing,
}

/// Detaches the attachments of sandbox `id` whose ifname `select` picks. Records knid cannot
/// use among them are discarded ([`discard`]); a sandbox record knid cannot use goes once no
/// attachment of it stays.
pub(crate) fn run(
    ctx: &Context,
    host: &mut Rtnl,
    id: &str,
    select: impl Fn(&str) -> bool,
) -> Result<()> {
    let mut phases = Stopwatch::start();
    let read = corrupt::attachments(&ctx.store, id)?;
    let mut detach = Vec::new();
    let mut undo = Vec::new();
    let mut requeue = Vec::new();
    let (discarded, staying): (Vec<_>, Vec<_>) =
        read.corrupt.into_iter().partition(|b| select(&b.ifname));
    // A corrupt record that stays may be a live interface: the sandbox stays with it.
    let mut live_staying = !staying.is_empty();
    for rec in read.usable {
        let state = lifecycle::state_of(&rec)?;
        if !select(&rec.ifname) {
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
    let sandbox = match corrupt::sandbox(&ctx.store, id) {
        Ok(Some(rec)) => Recorded::Usable(Box::new(rec)),
        Ok(None) => Recorded::Missing,
        Err(e @ Error::Corrupt { .. }) => {
            log::warn!("{}", e.chain());
            Recorded::Corrupt
        }
        Err(e) => return Err(e),
    };
    let mut after = match (&sandbox, live_staying) {
        (Recorded::Usable(_) | Recorded::Corrupt, false) => {
            Some(SandboxAfter::Delete(id.to_owned()))
        }
        (Recorded::Usable(rec), true) => Some(SandboxAfter::Put(Box::new(SandboxRecord {
            generation: rec.generation + 1,
            updated_at_ms: now,
            ..(**rec).clone()
        }))),
        // A record knid cannot read is not rewritten: it goes with the last attachment.
        (Recorded::Corrupt, true) | (Recorded::Missing, _) => None,
    };
    if !discarded.is_empty() {
        // With nothing else to remove, the sandbox record changes with the discarded ones.
        let with = (detach.is_empty() && undo.is_empty())
            .then(|| after.take())
            .flatten();
        discard::run(ctx, host, &discarded, with)?;
    }
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
    phases.end("lookup");
    if ctx.extensions.has(Phase::PreDetach) {
        match &sandbox {
            Recorded::Usable(rec) => run_pre_detach(ctx, rec, &detach),
            Recorded::Corrupt => log::error!(
                "{id}: pre-detach extensions not called, the sandbox record cannot be read"
            ),
            Recorded::Missing => {}
        }
        phases.end("extensions");
    }

    // The Detaching marks and the sandbox record's change, written one key at a time, the marks
    // first, without the transaction that would cost sled a log buffer sealed and written twice
    // over: a crash that keeps only a prefix (another thread's flush between two keys) leaves
    // Detaching records with the sandbox record unchanged, which recovery finishes like any
    // interrupted detach, the sandbox record's change included (tests/crash.rs). Durable before
    // the reply, so once Detach returns the sandbox (or the interface) is gone from Inspect and
    // List for good, even though the reaper has not run yet.
    //
    // A detach of veths only (a pod tap beside one included) flushes them in the background
    // while its kernel work runs (or leaves the flush to the first wait of the operations
    // whose flushes are outstanding beside it), and waits for what is left of that flush after
    // it. A crash in
    // between may leave the interface Attached on disk with its host link already in the
    // reaper's group (retire_links moves it there before anything else): recovery looks for
    // such links when `meta/detach_overlap` says a detach may have run ahead of its marks, and
    // finishes that detach. Any other kind (a DAN tap, a macvlan or ipvlan, a host device, a
    // CNI DEL) releases its pod side in a way recovery could not find again: durable before
    // its first kernel call, so an interrupted detach is finished, not forgotten
    // (docs/architecture.md#start-up-and-crash-recovery).
    let overlap = detach.iter().all(drivers::has_veth_end);
    lifecycle::advance_all(&mut detach, Event::Detach, now)?;
    let mut batch = lifecycle::writes(&detach);
    let deleted = after.is_some_and(|a| a.add_to(&mut batch));
    if overlap {
        // Once per knid run (and at once when start-up found it): the mark recovery looks for.
        ctx.store.record_detach_overlap()?;
    }
    ctx.store.apply_in_order(&batch)?;
    let mut marks = Intent::default();
    if overlap {
        marks.pending = Some(ctx.store.flush_soon());
    } else {
        ctx.store.flush()?;
    }
    phases.end("commit");
    if deleted {
        teardown::sandbox_gone(ctx);
    }
    failpoint::hit("detach.detaching")?;

    // Kata must not find a DAN tap that is going away.
    teardown::sync_dan_files(ctx, &detach);
    let retired = teardown::retire_links(ctx, host, &detach);
    phases.end("kernel");
    // After the kernel work, before the marks are known durable: the window a crash leaves
    // Attached records with retired links in (tests/crash.rs rewinds the store to make it).
    failpoint::hit("detach.retired")?;
    // Waited for even when the kernel work failed: a retried detach finds Detaching either way.
    let durable = marks.durable();
    phases.end("commit-wait");
    retired?;
    durable?;

    lifecycle::advance_all(&mut detach, Event::Retired, now)?;
    let marks = lifecycle::writes(&detach);
    ctx.store.apply(&marks)?;
    failpoint::hit("detach.reaping")?;

    log::debug!("{id}: {} interface(s) handed to the reaper", detach.len());
    hand_to_reaper(ctx, detach);
    phases.end("mark");
    log::debug!("detach {id}: {phases}");
    Ok(())
}

/// Calls the pre-detach extensions with the sandbox as it still is (every interface attached or
/// being detached) and the names of the `leaving` interfaces. Nothing here stops the detach: a
/// sandbox that cannot be shown is logged and the extensions are not called.
fn run_pre_detach(ctx: &Context, rec: &SandboxRecord, leaving: &[AttachmentRecord]) {
    let shown = corrupt::attachments(&ctx.store, &rec.id).map(|read| {
        read.usable
            .into_iter()
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
