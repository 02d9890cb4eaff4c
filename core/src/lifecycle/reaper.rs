//! The reaper (docs/architecture.md#the-path-of-one-request): deleting a veth costs the kernel ~20 ms of RCU waits, so detach
//! only retires host links into a link group and replies. This thread deletes the whole group
//! with one RTM_DELLINK (the waits are paid once per batch), checks the links are gone, and only
//! then forgets their records and releases their addresses, in one transaction: an address is
//! never handed out again while its old link exists. Last it removes their source guards, now
//! cheap (no device to unhook), but not one a re-attach of the same interface has made its own
//! since (`antispoof::remove_reaped`).

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{RecvTimeoutError, Sender};
use knid_netops::Rtnl;
use knid_store::AttachmentRecord;

use super::reaper_queue::{Msg, Parked, GATHER_BATCH};
use crate::error::{Error, Result};
use crate::failpoint;
use crate::lifecycle::teardown;
use crate::lifecycle::{self, Event};
use crate::node::antispoof;
use crate::shared::Context;

/// A group deletion costs the kernel ~20 ms whatever its size, plus ~0.4–0.6 ms per link
/// (measured), and each round adds its own look-ups, transaction and guard removal: the reaper
/// waits up to this long for a batch of [`GATHER_BATCH`] links, so under churn it deletes about a
/// hundred links per round instead of one. The fixed part is mostly waited out after the RTNL lock
/// is released (the lock is held ~0.3 ms per bare veth pair): a longer round delays other
/// operations, more rounds cost the node CPU. On a node whose detaches came at ~350/s its rounds
/// held ~125 links (measured); at 100 ms they held ~60, and its churn was ~6% slower
/// (docs/performance-history.md, round three's twenty-third session). An attach short of
/// addresses cuts the wait short (see [`wait_idle`]).
const GATHER_MAX: Duration = Duration::from_millis(250);
/// Most links deleted per batch.
const MAX_BATCH: usize = 512;
/// Pause after a failed batch before trying again.
const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// Failed rounds after which a stopping reaper leaves the rest to the next start-up.
const STOP_ATTEMPTS: usize = 3;

/// If the reaper has work, asks it to do it now and waits (at most `timeout`) until it is done.
/// Returns whether there was work (so something may have been released).
pub(crate) fn wait_idle(ctx: &Context, timeout: Duration) -> bool {
    if ctx.reaper_stats.queued.load(Ordering::SeqCst) == 0 {
        return false;
    }
    let (tx, rx) = crossbeam_channel::bounded(1);
    if ctx.reaper.send(Msg::Flush(tx)).is_err() {
        return false;
    }
    let _ = rx.recv_timeout(timeout);
    true
}

/// How long an idle reaper thread waits for work before it ends ([`Queue`]): as long as the
/// API keeps its warm thread after a call, so that a kubelet's next detach, seconds later, does
/// not start it again on its own path (docs/performance-history.md).
///
/// [`Queue`]: super::reaper_queue::Queue
const IDLE_EXIT: Duration = Duration::from_secs(30);

/// Binds the reaper's queue to `ctx`: a thread the queue starts runs [`run`] with it, while it
/// lives.
pub(crate) fn bind(ctx: &Arc<Context>) {
    let weak = Arc::downgrade(ctx);
    ctx.reaper.bind(Box::new(move || {
        let ctx = weak.upgrade()?;
        let run: Box<dyn FnOnce(Parked) + Send> = Box::new(move |parked| run(&ctx, parked));
        Some(run)
    }));
}

/// The reaper thread's work, started by its [`Queue`] with the queue's channel and socket; it
/// parks them back there when it ends idle.
///
/// [`Queue`]: super::reaper_queue::Queue
pub(crate) fn run(ctx: &Context, parked: Parked) {
    let Parked { rx, mut host } = parked;
    let mut rx = rx;
    let mut pending: Vec<AttachmentRecord> = Vec::new();
    let mut waiters: Vec<Sender<()>> = Vec::new();
    let mut stopping = false;
    let mut failed_rounds = 0;
    loop {
        if pending.is_empty() {
            for w in waiters.drain(..) {
                let _ = w.send(());
            }
            if stopping {
                break;
            }
            match rx.recv_timeout(IDLE_EXIT) {
                Ok(msg) => take(msg, &mut pending, &mut waiters, &mut stopping),
                Err(RecvTimeoutError::Timeout) => match ctx.reaper.park(Parked { rx, host }) {
                    Ok(()) => {
                        // The end of a burst of detaches (thousands, draining a node): what
                        // their records and rounds held goes back to the kernel.
                        crate::memory::give_back();
                        return;
                    }
                    Err(back) => (rx, host) = (back.rx, back.host),
                },
                Err(RecvTimeoutError::Disconnected) => stopping = true,
            }
            continue;
        }
        // Batch with what arrives shortly, unless someone waits for the reaper (an attach short
        // of addresses) or knid stops. Those messages wake it; more links do not, until
        // GATHER_BATCH of them wait (reaper_queue).
        let until = Instant::now() + GATHER_MAX;
        ctx.reaper.gathering(true);
        loop {
            while let Ok(msg) = rx.try_recv() {
                take(msg, &mut pending, &mut waiters, &mut stopping);
            }
            let now = Instant::now();
            if pending.len() >= GATHER_BATCH || !waiters.is_empty() || stopping || now >= until {
                break;
            }
            std::thread::park_timeout(until - now);
        }
        ctx.reaper.gathering(false);
        while pending.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(msg) => take(msg, &mut pending, &mut waiters, &mut stopping),
                Err(_) => break,
            }
        }
        let split = pending.len().min(MAX_BATCH);
        let batch: Vec<AttachmentRecord> = pending.drain(..split).collect();
        match reap(ctx, &mut host, &batch) {
            Ok(left) => {
                failed_rounds = 0;
                // Addresses came free: cluster mode may take a full pod network's taint off.
                if left.len() < batch.len() {
                    if let Some(view) = &ctx.cluster {
                        view.nudge();
                    }
                    // A freed address keeps no isolation for the next pod that gets it.
                    if let Some(policies) = &ctx.policies {
                        policies.nudge();
                    }
                }
                pending.extend(left);
            }
            Err(e) => {
                failed_rounds += 1;
                log::error!(
                    "reaper: {} link(s) not reaped (attempt {failed_rounds}): {}",
                    batch.len(),
                    e.chain()
                );
                pending.extend(batch);
                if ctx.store.failure().is_some() {
                    // sled refuses every write until knid restarts: retrying cannot succeed.
                    log::error!(
                        "reaper: the store failed; {} attachment(s) stay Reaping for the next start",
                        pending.len()
                    );
                    let dropped = pending.len() as u64;
                    let _ = ctx.reaper_stats.queued.fetch_update(
                        Ordering::SeqCst,
                        Ordering::SeqCst,
                        |q| Some(q.saturating_sub(dropped)),
                    );
                    pending.clear();
                    continue;
                }
                if stopping && failed_rounds >= STOP_ATTEMPTS {
                    log::error!(
                        "reaper: stopping with {} attachment(s) left Reaping; the next start finishes them",
                        pending.len()
                    );
                    break;
                }
                // Waiters learn that the round failed rather than wait forever.
                for w in waiters.drain(..) {
                    let _ = w.send(());
                }
                std::thread::sleep(RETRY_PAUSE);
            }
        }
    }
}

fn take(
    msg: Msg,
    pending: &mut Vec<AttachmentRecord>,
    waiters: &mut Vec<Sender<()>>,
    stopping: &mut bool,
) {
    match msg {
        Msg::Reap(recs) => pending.extend(recs),
        Msg::Flush(w) => waiters.push(w),
        Msg::Stop => *stopping = true,
    }
}

/// One round: delete the group, confirm, forget. Returns the attachments whose links are still
/// there, to retry; on error the caller keeps the whole batch.
fn reap(
    ctx: &Context,
    host: &mut Rtnl,
    batch: &[AttachmentRecord],
) -> Result<Vec<AttachmentRecord>> {
    let started = Instant::now();
    let (gone, left) = delete_and_confirm(ctx, host, batch)?;
    let forgotten = forget_reaped(ctx, &gone)?;
    // Their links gone, their guards go cheaply; a chain left by a failure here holds no hook
    // and goes with the next rebuild of the table.
    if let Err(e) = antispoof::remove_reaped(&ctx.store, &ctx.networks(), &gone) {
        log::warn!("reaper: {}", e.chain());
    }
    ctx.metrics.observe_reaper_batch(batch.len(), forgotten);
    let _ = ctx
        .reaper_stats
        .queued
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |q| {
            Some(q.saturating_sub(gone.len() as u64))
        });
    log::debug!(
        "reaper: {} link(s) gone, {forgotten} record(s) forgotten, {} left, in {:?}",
        gone.len(),
        left.len(),
        started.elapsed()
    );
    Ok(left)
}

/// Deletes the reaper's group and splits `batch` into links gone and links still present. When
/// every link is gone (the usual round), the first is `batch` itself, not a copy of it.
fn delete_and_confirm<'b>(
    ctx: &Context,
    host: &mut Rtnl,
    batch: &'b [AttachmentRecord],
) -> Result<(Cow<'b, [AttachmentRecord]>, Vec<AttachmentRecord>)> {
    host.delete_group(ctx.reaper_group)
        .map_err(|e| Error::kernel("delete the reaper's link group", e))?;
    failpoint::hit("reaper.deleted")?;
    let mut present = Vec::with_capacity(batch.len());
    for rec in batch {
        let link = host
            .link_by_name(&rec.host_ifname)
            .map_err(|e| Error::kernel(format!("look up {}", rec.host_ifname), e))?;
        // Still in the group: not deleted yet (e.g. retired while the group was deleted). Any
        // other link of the name is a newer one that a re-attach created after taking the old
        // one over (that take-over forgot this record already): this one is gone.
        present.push(link.is_some_and(|link| link.group == ctx.reaper_group));
    }
    Ok(split_gone(batch, &present))
}

/// `batch` split by `present` (one flag per record: its link is still there) into the records
/// whose links are gone, and the others, each in batch order: the first is `batch` itself when
/// every link is gone.
fn split_gone<'b>(
    batch: &'b [AttachmentRecord],
    present: &[bool],
) -> (Cow<'b, [AttachmentRecord]>, Vec<AttachmentRecord>) {
    if !present.contains(&true) {
        return (Cow::Borrowed(batch), Vec::new());
    }
    let (mut gone, mut left) = (Vec::new(), Vec::new());
    for (rec, present) in batch.iter().zip(present) {
        if *present {
            left.push(rec.clone());
        } else {
            gone.push(rec.clone());
        }
    }
    (Cow::Owned(gone), left)
}

/// Forgets reaped attachments in one transaction; returns how many were still recorded.
fn forget_reaped(ctx: &Context, gone: &[AttachmentRecord]) -> Result<usize> {
    if gone.is_empty() {
        return Ok(0);
    }
    for rec in gone {
        lifecycle::check_ends(rec, &[Event::Reaped])?;
    }
    let n = teardown::forget(ctx, gone, None)?;
    failpoint::hit("reaper.forgotten")?;
    Ok(n)
}

#[cfg(test)]
mod tests;
