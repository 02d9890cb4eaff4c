//! Garbage collection (docs/operations.md#garbage-collection): what callers forgot and crashes left behind.
//!
//! Per sandbox (always on the sandbox's shard, so it never races an attach or detach of it):
//! attachments not in the caller's valid list, attachments whose netns is gone, leftovers of
//! interrupted operations, sandbox records without attachments and, when a caller asks
//! ([`Corrupt::Collect`]), records knid cannot use. Node-wide sweeps: host links with knid's
//! names or link group, knid's mark and no record (those without the mark are reported, never
//! removed), and reservations whose owner has no record.
//!
//! The sweeps read the kernel (or the reservations) before the records, and the invariants make
//! that safe: a host link exists only while its record does (records are written before links
//! are created and forgotten after they are deleted), and a reservation is written and released
//! in the same transaction as its record. Orphaned links are removed by index, never by name, so
//! a newer link that reuses the name is never touched; orphaned reservations are released only
//! if their owner is still without a record inside the releasing transaction.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use knid_netops::Rtnl;
use knid_store::{AttachmentRecord, SandboxRecord};

use crate::error::{Error, Result};
use crate::lifecycle::{self, detach};
use crate::model::{
    AttachmentState, GcFinding, GcKeep, GcObject, GcReason, GcReport, GcRequest, SandboxId,
};
use crate::records::corrupt;
use crate::shared::context::{Context, Reply};
pub(crate) use sweeps::{sweep_dan_files, sweep_links, sweep_reservations};

pub(crate) mod interface_audit;
pub(crate) mod reconciler;
pub(crate) mod sweeps;

/// What a collection does with records knid cannot use, which may still describe a live
/// interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Corrupt {
    /// Garbage, unless the keep list keeps them: a GarbageCollect someone asked for.
    Collect,
    /// Left alone: the reconciler and start-up, which nobody asked to judge them.
    Leave,
}

/// Where GC runs the removals of one sandbox, or of one netns: on the shard that owns it, so
/// they never race an attach or detach of it. The runtime's shards implement it.
pub(crate) trait OnShard: Send + Sync {
    /// Whether new work is taken (false once shutting down).
    fn accepting(&self) -> bool;
    /// Queues the GC of sandbox `id` (its findings re-checked there, removed unless `dry_run`).
    fn gc_sandbox(
        &self,
        id: &SandboxId,
        keep: Option<Arc<GcKeep>>,
        corrupt: Corrupt,
        dry_run: bool,
        deadline: Option<Instant>,
    ) -> Result<Reply<Vec<GcFinding>>>;
    /// Queues the removal of a netns GC found, on its owner's shard.
    fn remove_netns(
        &self,
        owner: &SandboxId,
        finding: GcFinding,
        deadline: Option<Instant>,
    ) -> Result<Reply<()>>;
}

/// Refuses a keep list that leaves none of the Attached attachments it judges valid: most likely
/// a list of the wrong ids, or a client that sent none (`allow_detach_all` says it is meant).
fn refuse_detaching_all(ctx: &Context, keep: &GcKeep) -> Result<()> {
    let (mut judged, mut kept) = (0usize, 0usize);
    for read in corrupt::each_attachment(&ctx.store) {
        let corrupt::AttachmentRead::Usable(rec) = read? else {
            continue;
        };
        let in_scope = keep.network.as_deref().is_none_or(|n| n == rec.network);
        if !in_scope || crate::lifecycle::state_of(&rec)? != AttachmentState::Attached {
            continue;
        }
        judged += 1;
        kept += usize::from(keep.keeps(&rec.sandbox_id, &rec.ifname, &rec.network));
    }
    if judged > 0 && kept == 0 {
        let scope = keep
            .network
            .as_deref()
            .map_or("on the node".to_owned(), |n| format!("of network {n}"));
        return Err(Error::FailedPrecondition(format!(
            "GarbageCollect: the valid lists keep none of the {judged} attached interface(s) \
             {scope}, so every one would be detached; check the lists, or set allow_detach_all \
             to mean it"
        )));
    }
    Ok(())
}

/// One collection: every sandbox with something to collect goes through its shard (all shards
/// in parallel), then the node-wide sweeps run. Failures are reported per object, not fatal.
pub(crate) fn collect(
    ctx: &Context,
    shards: &dyn OnShard,
    req: &GcRequest,
    corrupt: Corrupt,
    deadline: Option<Instant>,
) -> Result<GcReport> {
    let mut report = GcReport {
        dry_run: req.dry_run,
        ..GcReport::default()
    };
    let keep = req.keep.clone().map(Arc::new);
    if let Some(keep) = keep.as_deref().filter(|k| !k.allow_detach_all) {
        refuse_detaching_all(ctx, keep)?;
    }
    let mut queued = Vec::new();
    for id in sandbox_ids(ctx)? {
        // A cheap look first, so only sandboxes with findings occupy a shard.
        match sandbox_findings(ctx, &id, keep.as_deref(), corrupt) {
            Ok(found) if found.is_empty() => continue,
            Ok(_) => {}
            Err(e) => {
                report.errors.push(format!("sandbox {id}: {}", e.chain()));
                continue;
            }
        }
        let sid = match SandboxId::parse(&id) {
            Ok(sid) => sid,
            Err(e) => {
                report
                    .errors
                    .push(format!("sandbox {id:?} has an invalid id: {}", e.rule));
                continue;
            }
        };
        let keep = keep.clone();
        match shards.gc_sandbox(&sid, keep, corrupt, req.dry_run, deadline) {
            Ok(rx) => queued.push((id, rx)),
            Err(e) => report.errors.push(format!("sandbox {id}: {}", e.chain())),
        }
    }
    for (id, rx) in queued {
        match rx.wait() {
            Ok(found) => report.removed.extend(found),
            Err(e) => report.errors.push(format!("sandbox {id}: {}", e.chain())),
        }
    }
    collect_netns(ctx, shards, req, deadline, keep.as_deref(), &mut report);
    let mut host = crate::node::host_rtnl()?;
    match sweep_links(ctx, &mut host, req.dry_run) {
        Ok(found) => report.add(found),
        Err(e) => report.errors.push(format!("orphaned links: {}", e.chain())),
    }
    match sweep_reservations(ctx, req.dry_run) {
        Ok(found) => report.removed.extend(found),
        Err(e) => report
            .errors
            .push(format!("orphaned reservations: {}", e.chain())),
    }
    match sweep_dan_files(ctx, req.dry_run) {
        Ok(found) => report.removed.extend(found),
        Err(e) => report
            .errors
            .push(format!("stale DAN files: {}", e.chain())),
    }
    if !req.dry_run {
        match cni_gc(ctx) {
            Ok(errors) => report.errors.extend(errors),
            Err(e) => report.errors.push(format!("cni GC: {}", e.chain())),
        }
    }
    report.removed.sort();
    report.left.sort();
    Ok(report)
}

/// The namespaces knid created that must go (see [`crate::netns::findings`]), each removed on
/// its owner's shard.
fn collect_netns(
    ctx: &Context,
    shards: &dyn OnShard,
    req: &GcRequest,
    deadline: Option<Instant>,
    keep: Option<&GcKeep>,
    report: &mut GcReport,
) {
    let found = match crate::netns::findings(ctx, keep) {
        Ok(found) => found,
        Err(e) => {
            report.errors.push(format!("netns: {}", e.chain()));
            return;
        }
    };
    if req.dry_run {
        report.removed.extend(found);
        return;
    }
    let mut queued = Vec::new();
    for finding in found {
        let owner = match SandboxId::parse(&finding.sandbox_id) {
            Ok(owner) => owner,
            Err(e) => {
                report.errors.push(format!(
                    "netns owner {:?} is invalid: {}",
                    finding.sandbox_id, e.rule
                ));
                continue;
            }
        };
        match shards.remove_netns(&owner, finding.clone(), deadline) {
            Ok(rx) => queued.push((finding, rx)),
            Err(e) => report
                .errors
                .push(format!("netns of {owner}: {}", e.chain())),
        }
    }
    for (finding, rx) in queued {
        match rx.wait() {
            Ok(()) => report.removed.push(finding),
            Err(e) => report
                .errors
                .push(format!("netns of {}: {}", finding.sandbox_id, e.chain())),
        }
    }
}

/// The CNI GC verb on every cni network (CNI 1.1.0 lists), after stale attachments were
/// detached (their DEL chains are libcni's "synthesised DELs"): every attachment still recorded
/// on the network, in any state, is valid, so the plugins drop what only they remember.
fn cni_gc(ctx: &Context) -> Result<Vec<String>> {
    let networks: Vec<_> = ctx
        .networks()
        .into_values()
        .filter(|n| n.cni().is_some())
        .collect();
    if networks.is_empty() {
        return Ok(Vec::new());
    }
    let read = corrupt::all_attachments(&ctx.store)?;
    let mut errors = Vec::new();
    for network in networks {
        // A corrupt record is valid on its network, and on every one when that cannot be read.
        let valid: Vec<(String, String)> = read
            .usable
            .iter()
            .filter(|r| r.network == network.name)
            .map(|r| (r.sandbox_id.clone(), r.ifname.clone()))
            .chain(
                read.corrupt
                    .iter()
                    .filter(|b| b.record.as_ref().is_none_or(|r| r.network == network.name))
                    .map(|b| (b.sandbox_id.clone(), b.ifname.clone())),
            )
            .collect();
        errors.extend(crate::drivers::cni::gc(ctx, &network, &valid));
    }
    Ok(errors)
}

/// What GC would remove from sandbox `id` (reads only). Records knid cannot use are findings
/// (reason `corrupt`) only with [`Corrupt::Collect`], and only where `keep` does not keep them:
/// an attachment whose network cannot be read is kept by a keep list limited to one network.
/// A sandbox record knid cannot use takes every attachment of its sandbox with it.
pub(crate) fn sandbox_findings(
    ctx: &Context,
    id: &str,
    keep: Option<&GcKeep>,
    corrupt: Corrupt,
) -> Result<Vec<GcFinding>> {
    let read = corrupt::attachments(&ctx.store, id)?;
    let record = match corrupt::sandbox(&ctx.store, id) {
        Ok(record) => Ok(record),
        Err(Error::Corrupt { detail, .. }) => Err(detail),
        Err(e) => return Err(e),
    };
    let sandbox = match &record {
        Ok(record) => SandboxRead::Usable(record.as_ref()),
        Err(detail) => SandboxRead::Corrupt(detail),
    };
    findings_of(id, &read.usable, &read.corrupt, sandbox, keep, corrupt)
}

/// The sandbox record of one sandbox, as [`findings_of`] takes it.
pub(crate) enum SandboxRead<'r> {
    /// The record, or none.
    Usable(Option<&'r SandboxRecord>),
    /// A record knid cannot use: what is wrong with it.
    Corrupt(&'r str),
}

/// [`sandbox_findings`] of records already read: `usable` and `corrupt` are every attachment
/// record of sandbox `id`, sorted by ifname, and `sandbox` its sandbox record. Start-up reads
/// the store once for all sandboxes and judges each from that read.
pub(crate) fn findings_of(
    id: &str,
    usable: &[AttachmentRecord],
    corrupt_atts: &[corrupt::CorruptAttachment],
    sandbox: SandboxRead<'_>,
    keep: Option<&GcKeep>,
    corrupt: Corrupt,
) -> Result<Vec<GcFinding>> {
    let (sandbox, sandbox_corrupt) = match sandbox {
        SandboxRead::Usable(sandbox) => (sandbox, None),
        SandboxRead::Corrupt(detail) => (None, Some(detail)),
    };
    let finding = |ifname: &str, what, reason, detail: String| GcFinding {
        sandbox_id: id.to_owned(),
        ifname: ifname.to_owned(),
        what,
        reason,
        detail,
    };
    let collect = corrupt == Corrupt::Collect;
    let mut out = Vec::new();
    if collect {
        for bad in corrupt_atts {
            let network = bad.record.as_ref().map_or("", |r| r.network.as_str());
            if keep.is_none_or(|k| !k.keeps(id, &bad.ifname, network)) {
                out.push(finding(
                    &bad.ifname,
                    GcObject::Attachment,
                    GcReason::Corrupt,
                    bad.detail.clone(),
                ));
            }
        }
    }
    let sandbox_is_corrupt = sandbox_corrupt.is_some();
    // The whole sandbox goes with its sandbox record, unless it is kept.
    if let Some(detail) = sandbox_corrupt.filter(|_| collect) {
        if keep.is_none_or(|k| !k.keeps_sandbox(id)) {
            out.push(finding(
                "",
                GcObject::Sandbox,
                GcReason::Corrupt,
                detail.to_owned(),
            ));
            out.extend(
                usable
                    .iter()
                    .filter(|rec| !matches!(lifecycle::state_of(rec), Ok(AttachmentState::Reaping)))
                    .map(|rec| {
                        finding(
                            &rec.ifname,
                            GcObject::Attachment,
                            GcReason::Corrupt,
                            "its sandbox record is corrupt".to_owned(),
                        )
                    }),
            );
            return Ok(out);
        }
    }
    let atts = usable;
    if atts.is_empty() {
        if corrupt_atts.is_empty() {
            out.extend(sandbox.map(|_| {
                finding(
                    "",
                    GcObject::Sandbox,
                    GcReason::Interrupted,
                    "sandbox record without attachments".into(),
                )
            }));
        }
        return Ok(out);
    }
    let mut states = Vec::with_capacity(atts.len());
    for rec in atts {
        states.push(lifecycle::state_of(rec)?);
    }
    let valid =
        |rec: &AttachmentRecord| keep.is_none_or(|k| k.keeps(id, &rec.ifname, &rec.network));
    // The netns is looked at only when a valid Attached interface depends on it.
    let needs_netns = atts
        .iter()
        .zip(&states)
        .any(|(rec, state)| *state == AttachmentState::Attached && valid(rec));
    let gone = match (&sandbox, needs_netns) {
        (_, false) => None,
        (Some(s), true) => crate::netns::recorded::gone(
            std::path::Path::new(&s.netns_path),
            s.netns_dev,
            s.netns_ino,
        )?,
        // A sandbox record that is there but cannot be read says nothing about the netns.
        (None, true) if sandbox_is_corrupt => None,
        (None, true) => Some("no sandbox record".to_owned()),
    };
    for (rec, state) in atts.iter().zip(states) {
        let host_link = || format!("host link {}", rec.host_ifname);
        let (reason, detail) = match (state, &gone) {
            (AttachmentState::Reaping, _) => continue,
            (AttachmentState::Attached, _) if !valid(rec) => (GcReason::NotValid, host_link()),
            (AttachmentState::Attached, Some(why)) => (GcReason::NetnsGone, why.clone()),
            (AttachmentState::Attached, None) => continue,
            _ => (GcReason::Interrupted, host_link()),
        };
        out.push(finding(&rec.ifname, GcObject::Attachment, reason, detail));
    }
    Ok(out)
}

/// Removes what [`sandbox_findings`] found: the attachments are detached (leftovers of an
/// interrupted attach rolled back), a bare sandbox record deleted. Run on the sandbox's shard.
pub(crate) fn remove_sandbox_findings(
    ctx: &Context,
    host: &mut Rtnl,
    id: &str,
    findings: &[GcFinding],
) -> Result<()> {
    if findings.is_empty() {
        return Ok(());
    }
    let ifnames: BTreeSet<&str> = findings.iter().map(|f| f.ifname.as_str()).collect();
    detach::run(ctx, host, id, |ifname| ifnames.contains(ifname))
}

/// Every sandbox id with a record or an attachment, usable or not, each record read one at a
/// time.
pub(crate) fn sandbox_ids(ctx: &Context) -> Result<BTreeSet<String>> {
    let mut ids = BTreeSet::new();
    for read in ctx.store.each_sandbox() {
        // A record that does not decode is named by its key, as `corrupt::sandboxes` names it.
        ids.insert(read?.map_or_else(|bad| bad.key, |rec| rec.id));
    }
    for read in corrupt::each_attachment(&ctx.store) {
        ids.insert(match read? {
            corrupt::AttachmentRead::Usable(rec) => rec.sandbox_id,
            corrupt::AttachmentRead::Corrupt(bad) => bad.sandbox_id,
        });
    }
    Ok(ids)
}

/// Logs and counts the outcome of one collection.
pub(crate) fn record(ctx: &Context, who: &str, report: &GcReport) {
    ctx.metrics.observe_gc(
        report.dry_run,
        report.removed.iter().map(|f| f.what.as_str()),
        report.errors.len(),
    );
    if report.dry_run {
        return;
    }
    for f in &report.removed {
        log::info!(
            "{who}: removed {} {} ({}){}",
            f.what.as_str(),
            if f.sandbox_id.is_empty() {
                f.detail.clone()
            } else if f.ifname.is_empty() {
                f.sandbox_id.clone()
            } else {
                format!("{}/{}", f.sandbox_id, f.ifname)
            },
            f.reason.as_str(),
            if f.sandbox_id.is_empty() {
                String::new()
            } else {
                format!(": {}", f.detail)
            }
        );
    }
    for f in &report.left {
        log::warn!(
            "{who}: left {} {} alone ({}): it does not carry this knid's mark",
            f.what.as_str(),
            f.detail,
            f.reason.as_str()
        );
    }
    for e in &report.errors {
        log::warn!("{who}: {e}");
    }
}
