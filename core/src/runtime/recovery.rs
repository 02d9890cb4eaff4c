//! Start-up recovery (docs/architecture.md#start-up-and-crash-recovery): before knid serves, every record is brought to a state
//! that matches the kernel. Interrupted attaches are rolled back (or forward, when their kernel
//! work was complete and their intent allows it: `lifecycle::roll_forward`), interrupted detaches finished
//! (their links handed to the reaper, which starts right after; a detach whose kernel work ran
//! ahead of its lost Detaching marks is found by its host link in the reaper's group), attachments whose netns is gone
//! detached, orphaned links and reservations removed, namespaces knid created that are gone
//! (or were being deleted) forgotten (or deleted). After a reboot (a new boot id) nothing
//! recorded exists any more: every record and reservation is released and leftovers deleted.
//!
//! Runs single-threaded, before the shard workers start, so nothing races it. The orphan sweeps
//! ([`sweep`]) come after, once knid serves: nothing recorded depends on them.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use knid_store::{AttachmentRecord, Batch};

use crate::error::{Error, Result};
use crate::failpoint;
use crate::gc;
use crate::lifecycle::{self, detach, roll_forward};
use crate::model::{AttachmentState, GcFinding, GcObject, GcReason, GcReport};
use crate::records::corrupt::{self, Attachments, CorruptAttachment, CorruptSandbox, Sandboxes};
use crate::shared::Context;

/// What [`run`] leaves start-up.
pub(crate) struct Recovered {
    /// It may have changed a sandbox or attachment record (what was read before is then stale).
    pub(crate) changed: bool,
    /// Every usable attachment record, as read, when it changed none: for the network set-up
    /// that follows before anything serves, which would otherwise read them all again.
    pub(crate) attachments: Option<Vec<AttachmentRecord>>,
    /// How many sandbox records there are, decodable or not, when it changed none: counting
    /// them again is another pass over the store.
    pub(crate) sandboxes: Option<usize>,
}

/// Recovers the store against the kernel and records `boot_id` as the boot it now matches,
/// loading the host ports recorded (before its rollbacks remove some).
pub(crate) fn run(ctx: &Context, boot_id: &str) -> Result<Recovered> {
    let started = std::time::Instant::now();
    let mut host = crate::node::host_rtnl()?;
    let mut report = GcReport::default();
    let mut changed = false;
    let previous = ctx.store.boot_id()?;
    match previous.as_deref() {
        Some(prev) if !boot_id.is_empty() && prev != boot_id => {
            log::warn!("boot id changed ({prev} -> {boot_id}): every recorded attachment died with the reboot");
            release_everything(ctx)?;
            changed = true;
        }
        _ if boot_id.is_empty() => {
            log::warn!("boot id unknown: cannot tell a reboot; recovering against the kernel");
        }
        _ => {}
    }

    // One read of the records serves every sandbox below, unless something changes them first.
    let mut recorded = Recorded::read(ctx)?;
    // Already the reaper's: handed back to it below. Records knid cannot use are left alone,
    // named in the log: Detach of their sandbox or a GarbageCollect removes them.
    let usable = &recorded.attachments.usable;
    // Sandboxes with an attach interrupted after its intent was durable: a roll-forward may
    // finish them.
    let provisioning: BTreeSet<String> = usable
        .iter()
        .filter(|rec| matches!(lifecycle::state_of(rec), Ok(AttachmentState::Provisioning)))
        .map(|rec| rec.sandbox_id.clone())
        .collect();
    let reaping: Vec<_> = usable
        .iter()
        .filter(|rec| matches!(lifecycle::state_of(rec), Ok(AttachmentState::Reaping)))
        .cloned()
        .collect();
    warn_corrupt(&recorded.attachments.corrupt, &recorded.sandboxes.corrupt);
    // Before any rollback, which removes the host ports of what it rolls back.
    let decoded = recorded
        .sandboxes
        .corrupt
        .iter()
        .filter_map(|c| c.record.as_ref());
    ctx.host_ports
        .load_from(&ctx.store, recorded.sandboxes.usable.iter().chain(decoded))?;
    // Namespaces first: attachments inside one that goes are then found with their netns gone.
    match crate::netns::findings(ctx, None) {
        Ok(found) => {
            changed |= !found.is_empty();
            for finding in found {
                match crate::netns::remove_finding(ctx, &mut host, &finding) {
                    Ok(()) => report.removed.push(finding),
                    Err(e) => report.errors.push(format!(
                        "netns of {}: {}",
                        finding.sandbox_id,
                        e.chain()
                    )),
                }
            }
        }
        Err(e) => report.errors.push(format!("netns: {}", e.chain())),
    }
    if changed {
        // A namespace removed took its sandbox's attachments along.
        recorded = Recorded::read(ctx)?;
    }
    // Before the reaper's first round, which deletes its whole link group.
    let mut ran_ahead = match retired_links(ctx, &mut host) {
        Ok(retired) => ran_ahead(&recorded.attachments.usable, &retired),
        Err(e) => {
            report.errors.push(e.chain());
            BTreeMap::new()
        }
    };
    for (id, records) in recorded.by_sandbox() {
        // An attach that replied before its Attached was durable is finished, not undone; its
        // sandbox is read again after.
        let found = if provisioning.contains(id) {
            changed = true;
            roll_forward::run(ctx, &mut host, id)
                .and_then(|_| gc::sandbox_findings(ctx, id, None, gc::Corrupt::Leave))
        } else if !recorded.in_place {
            gc::sandbox_findings(ctx, id, None, gc::Corrupt::Leave)
        } else {
            gc::findings_of(
                id,
                records.usable,
                records.corrupt,
                records.sandbox,
                None,
                gc::Corrupt::Leave,
            )
        };
        let found = found.map(|mut found| {
            for f in ran_ahead.remove(id).unwrap_or_default() {
                if !found.iter().any(|g| g.ifname == f.ifname) {
                    found.push(f);
                }
            }
            found
        });
        let outcome = found.and_then(|found| {
            gc::remove_sandbox_findings(ctx, &mut host, id, &found)?;
            Ok(found)
        });
        match outcome {
            Ok(found) => {
                changed |= !found.is_empty();
                report.removed.extend(found);
            }
            Err(e) => {
                changed = true;
                report.errors.push(format!("sandbox {id}: {}", e.chain()));
            }
        }
    }
    let sandboxes =
        (!changed).then(|| recorded.sandboxes.usable.len() + recorded.sandboxes.corrupt.len());
    let attachments = (!changed).then_some(recorded.attachments.usable);
    // Links and records of Reaping attachments: the reaper's first round deletes its group.
    detach::hand_to_reaper(ctx, reaping);
    gc::record(ctx, "recovery", &report);
    // Its flush is an fsync (~25 ms of start-up here): skipped when recovery wrote nothing and
    // the boot id recorded, durable already, is this one.
    if changed || previous.as_deref() != Some(boot_id) {
        ctx.store.set_boot_id(boot_id)?;
    }
    log::info!(
        "recovery: {} object(s) removed, {} error(s), {} attachment(s) left to the reaper, in {:?}",
        report.removed.len(),
        report.errors.len(),
        ctx.reaper_stats
            .queued
            .load(std::sync::atomic::Ordering::SeqCst),
        started.elapsed()
    );
    Ok(Recovered {
        changed,
        attachments,
        sandboxes,
    })
}

/// The sandbox and attachment records, read once for every sandbox recovery judges.
struct Recorded {
    sandboxes: Sandboxes,
    attachments: Attachments,
    /// Whether every record sits at its own key, so that grouping the records by their
    /// sandbox id field gives what a read of one sandbox gives; else each sandbox is read on
    /// its own.
    in_place: bool,
}

/// The records of one sandbox in a [`Recorded`].
struct SandboxRecords<'r> {
    usable: &'r [AttachmentRecord],
    corrupt: &'r [CorruptAttachment],
    sandbox: gc::SandboxRead<'r>,
}

impl Recorded {
    fn read(ctx: &Context) -> Result<Self> {
        let (sandboxes, sandboxes_in_place) = corrupt::sandboxes_in_place(&ctx.store)?;
        let (attachments, attachments_in_place) = corrupt::all_attachments_in_place(&ctx.store)?;
        Ok(Recorded {
            sandboxes,
            attachments,
            in_place: sandboxes_in_place && attachments_in_place,
        })
    }

    /// Every sandbox id with a record or an attachment, usable or not (as [`gc::sandbox_ids`]),
    /// sorted, with its records. The attachments of one sandbox are adjacent in both lists:
    /// keys order the usable ones, and the corrupt ones are sorted by sandbox id.
    fn by_sandbox(&self) -> BTreeMap<&str, SandboxRecords<'_>> {
        fn entry<'m, 'r>(
            out: &'m mut BTreeMap<&'r str, SandboxRecords<'r>>,
            id: &'r str,
        ) -> &'m mut SandboxRecords<'r> {
            out.entry(id).or_insert_with(|| SandboxRecords {
                usable: &[],
                corrupt: &[],
                sandbox: gc::SandboxRead::Usable(None),
            })
        }
        let mut out = BTreeMap::new();
        for rec in &self.sandboxes.usable {
            entry(&mut out, rec.id.as_str()).sandbox = gc::SandboxRead::Usable(Some(rec));
        }
        for bad in &self.sandboxes.corrupt {
            entry(&mut out, bad.id.as_str()).sandbox = gc::SandboxRead::Corrupt(&bad.detail);
        }
        for run in self
            .attachments
            .usable
            .chunk_by(|a, b| a.sandbox_id == b.sandbox_id)
        {
            entry(&mut out, run[0].sandbox_id.as_str()).usable = run;
        }
        for run in self
            .attachments
            .corrupt
            .chunk_by(|a, b| a.sandbox_id == b.sandbox_id)
        {
            entry(&mut out, run[0].sandbox_id.as_str()).corrupt = run;
        }
        out
    }
}

/// The names of the host links in the reaper's group, when `meta/detach_overlap` says a detach
/// may have retired links before its Detaching marks were durable (knid did not stop cleanly
/// after such a detach); else none, without asking the kernel: the dump costs time quadratic in
/// the number of pod namespaces (~0.3 s with 3,000), paid only after such a crash.
fn retired_links(ctx: &Context, host: &mut knid_netops::Rtnl) -> Result<HashSet<String>> {
    if !ctx.store.detach_overlap() {
        return Ok(HashSet::new());
    }
    let links = host
        .links()
        .map_err(|e| Error::kernel("list host links for detaches ahead of their marks", e))?;
    Ok(links
        .into_iter()
        .filter(|l| l.group == ctx.reaper_group)
        .map(|l| l.name)
        .collect())
}

/// The Attached veths among `atts` whose host link is among `retired` (in the reaper's group),
/// by sandbox: a detach retired them and knid died before its Detaching marks were durable
/// (docs/architecture.md#start-up-and-crash-recovery). Nothing but a detach puts an attached
/// interface's host link there, and its retirement is the detach's first kernel effect, so each
/// is a detach recovery finishes (reason `interrupted`), as if its marks had been durable.
fn ran_ahead(
    atts: &[AttachmentRecord],
    retired: &HashSet<String>,
) -> BTreeMap<String, Vec<GcFinding>> {
    let mut out: BTreeMap<String, Vec<GcFinding>> = BTreeMap::new();
    if retired.is_empty() {
        return out;
    }
    let found = atts.iter().filter(|rec| {
        matches!(lifecycle::state_of(rec), Ok(AttachmentState::Attached))
            && crate::drivers::has_veth_end(rec)
            && retired.contains(&rec.host_ifname)
    });
    for rec in found {
        out.entry(rec.sandbox_id.clone())
            .or_default()
            .push(GcFinding {
                sandbox_id: rec.sandbox_id.clone(),
                ifname: rec.ifname.clone(),
                what: GcObject::Attachment,
                reason: GcReason::Interrupted,
                detail: format!(
                    "host link {} retired by a detach whose Detaching mark was lost",
                    rec.host_ifname
                ),
            });
    }
    out
}

/// The orphan sweeps of start-up: links with knid's names and mark and no record (an attach whose intent
/// was lost, a link a crash left behind), reservations with no owner, DAN files with no tap.
/// Nothing recorded depends on them, so they run once knid serves, on their own thread (see
/// [`spawn_sweep`]): listing the host links costs the kernel time quadratic in the number of
/// pod namespaces (each veth's peer netns id is looked up in a list), ~0.3 s with 3,000 pods.
/// A failed sweep is not fatal: the reconciler and GC run the same sweeps later.
pub(crate) fn sweep(ctx: &Context) {
    let started = std::time::Instant::now();
    let mut report = GcReport::default();
    let swept = failpoint::hit("recovery.sweep").and_then(|()| {
        let mut host = crate::node::host_rtnl()?;
        let links = gc::sweep_links(ctx, &mut host, false);
        for sweep in [
            links,
            gc::sweep_reservations(ctx, false),
            gc::sweep_dan_files(ctx, false),
        ] {
            match sweep {
                Ok(found) => report.add(found),
                Err(e) => report.errors.push(e.chain()),
            }
        }
        Ok(())
    });
    if let Err(e) = swept {
        report.errors.push(e.chain());
    }
    gc::record(ctx, "start-up sweep", &report);
    log::info!(
        "start-up sweep: {} orphan(s) removed, {} link(s) not this knid's left alone, {} error(s), in {:?}",
        report.removed.len(),
        report.left.len(),
        report.errors.len(),
        started.elapsed()
    );
    // Last, once start-up's work is over: code that runs after the release maps back and stays.
    // The line above, when it came after, kept ~0.8 MiB of code mapped (64 KiB per page fault).
    crate::memory::give_back_code("start-up");
}

/// Runs [`sweep`] on a thread of its own; join it before the store is flushed at shutdown.
pub(crate) fn spawn_sweep(ctx: Arc<Context>) -> Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("knid-sweep".into())
        .spawn(move || sweep(&ctx))
        .map_err(|e| Error::Unavailable(format!("spawn the start-up sweep: {e}")))
}

/// Forgets every attachment and sandbox and releases every reservation, in one commit, records
/// knid cannot use included: nothing they described survived the reboot either. Kernel
/// leftovers (only possible when the "reboot" was not one) are removed by the link sweep after.
fn release_everything(ctx: &Context) -> Result<()> {
    let atts = corrupt::all_attachments(&ctx.store)?;
    let sandboxes = corrupt::sandboxes(&ctx.store)?;
    let mut batch = Batch::new();
    for rec in &atts.usable {
        batch.forget_attachment(rec.clone(), crate::records::addresses(rec)?);
    }
    for bad in atts.corrupt.iter().filter(|b| b.deletable()) {
        batch.delete_attachment(&bad.sandbox_id, &bad.ifname);
    }
    let ids = sandboxes.usable.iter().map(|s| &s.id);
    for id in ids.chain(sandboxes.corrupt.iter().map(|s| &s.id)) {
        batch.delete_sandbox(id);
    }
    for network in ctx.store.networks_with_reservations()? {
        for r in ctx.store.reservations(&network)? {
            batch.release_if_unowned(&r.network, r.addr, r.owner);
        }
    }
    ctx.store.commit(&batch)?;
    log::warn!(
        "released {} attachment(s) of {} sandbox(es) recorded before the reboot",
        atts.usable.len() + atts.corrupt.len(),
        sandboxes.usable.len() + sandboxes.corrupt.len()
    );
    Ok(())
}

/// Logs the records knid cannot use that start-up leaves alone, with what removes them.
fn warn_corrupt(atts: &[CorruptAttachment], sandboxes: &[CorruptSandbox]) {
    let errors = atts
        .iter()
        .map(CorruptAttachment::error)
        .chain(sandboxes.iter().map(CorruptSandbox::error));
    for e in errors {
        log::warn!(
            "recovery: {}; left alone, it may describe a live interface: {}",
            e.chain(),
            corrupt::REMOVED_BY
        );
    }
}

#[cfg(test)]
mod tests;
