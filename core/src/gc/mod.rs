//! Garbage collection (docs/operations.md#garbage-collection): what callers forgot and crashes left behind.
//!
//! Per sandbox (always on the sandbox's shard, so it never races an attach or detach of it):
//! attachments not in the caller's valid list, attachments whose netns is gone, leftovers of
//! interrupted operations, and sandbox records without attachments. Node-wide sweeps: host
//! links with knid's names or link group, knid's mark and no record (those without the mark
//! are reported, never removed), and reservations whose owner has no record.
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
use knid_store::AttachmentRecord;

use crate::context::{Context, Reply};
use crate::error::Result;
use crate::lifecycle::{self, detach};
use crate::model::{
    AttachmentState, GcFinding, GcKeep, GcObject, GcReason, GcReport, GcRequest, SandboxId,
};
pub(crate) use sweeps::{sweep_dan_files, sweep_links, sweep_reservations};

pub(crate) mod interface_audit;
pub(crate) mod reconciler;
pub(crate) mod sweeps;

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

/// One collection: every sandbox with something to collect goes through its shard (all shards
/// in parallel), then the node-wide sweeps run. Failures are reported per object, not fatal.
pub(crate) fn collect(
    ctx: &Context,
    shards: &dyn OnShard,
    req: &GcRequest,
    deadline: Option<Instant>,
) -> Result<GcReport> {
    let mut report = GcReport {
        dry_run: req.dry_run,
        ..GcReport::default()
    };
    let keep = req.keep.clone().map(Arc::new);
    let mut queued = Vec::new();
    for id in sandbox_ids(ctx)? {
        // A cheap look first, so only sandboxes with findings occupy a shard.
        match sandbox_findings(ctx, &id, keep.as_deref()) {
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
        match shards.gc_sandbox(&sid, keep, req.dry_run, deadline) {
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
    let records = ctx.store.all_attachments()?;
    let mut errors = Vec::new();
    for network in networks {
        let valid: Vec<(String, String)> = records
            .iter()
            .filter(|r| r.network == network.name)
            .map(|r| (r.sandbox_id.clone(), r.ifname.clone()))
            .collect();
        errors.extend(crate::drivers::cni::gc(ctx, &network, &valid));
    }
    Ok(errors)
}

/// What GC would remove from sandbox `id` (reads only).
pub(crate) fn sandbox_findings(
    ctx: &Context,
    id: &str,
    keep: Option<&GcKeep>,
) -> Result<Vec<GcFinding>> {
    let atts = ctx.store.attachments(id)?;
    let sandbox = ctx.store.sandbox(id)?;
    let finding = |ifname: &str, what, reason, detail: String| GcFinding {
        sandbox_id: id.to_owned(),
        ifname: ifname.to_owned(),
        what,
        reason,
        detail,
    };
    if atts.is_empty() {
        return Ok(sandbox
            .map(|_| {
                finding(
                    "",
                    GcObject::Sandbox,
                    GcReason::Interrupted,
                    "sandbox record without attachments".into(),
                )
            })
            .into_iter()
            .collect());
    }
    let mut states = Vec::with_capacity(atts.len());
    for rec in &atts {
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
        (None, true) => Some("no sandbox record".to_owned()),
    };
    let mut out = Vec::new();
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
    detach::run(ctx, host, id, |rec| ifnames.contains(rec.ifname.as_str()))
}

/// Every sandbox id with a record or an attachment.
pub(crate) fn sandbox_ids(ctx: &Context) -> Result<BTreeSet<String>> {
    let mut ids: BTreeSet<String> = ctx.store.sandboxes()?.into_iter().map(|s| s.id).collect();
    ids.extend(
        ctx.store
            .all_attachments()?
            .into_iter()
            .map(|a| a.sandbox_id),
    );
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
