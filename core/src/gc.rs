//! Garbage collection (ARCHITECTURE §7): what callers forgot and crashes left behind.
//!
//! Per sandbox (always on the sandbox's shard, so it never races an attach or detach of it):
//! attachments not in the caller's valid list, attachments whose netns is gone, leftovers of
//! interrupted operations, and sandbox records without attachments. Node-wide sweeps: host
//! links with knid's names or link group and no record, and reservations whose owner has no
//! record.
//!
//! The sweeps read the kernel (or the reservations) before the records, and the invariants make
//! that safe: a host link exists only while its record does (records are written before links
//! are created and forgotten after they are deleted), and a reservation is written and released
//! in the same transaction as its record. Orphaned links are removed by index, never by name, so
//! a newer link that reuses the name is never touched; orphaned reservations are released only
//! if their owner is still without a record inside the releasing transaction.

use std::collections::{BTreeSet, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use knid_netops::{NetnsHandle, Rtnl};
use knid_store::{AttachmentRecord, Batch, SandboxRecord};

use crate::dispatch::{self, Dispatch};
use crate::engine::Context;
use crate::error::{Error, Result};
use crate::lifecycle;
use crate::model::{
    AttachmentState, GcFinding, GcKeep, GcObject, GcReason, GcReport, GcRequest, SandboxId,
};
use crate::worker::Job;
use crate::{detach, names};

/// One collection: every sandbox with something to collect goes through its shard (all shards
/// in parallel), then the node-wide sweeps run. Failures are reported per object, not fatal.
pub(crate) fn collect(
    ctx: &Context,
    dispatch: &Dispatch,
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
        match dispatch.send(&sid, deadline, |reply| Job::Gc {
            id: sid.clone(),
            keep,
            dry_run: req.dry_run,
            reply,
        }) {
            Ok(rx) => queued.push((id, rx)),
            Err(e) => report.errors.push(format!("sandbox {id}: {}", e.chain())),
        }
    }
    for (id, rx) in queued {
        match dispatch::wait(rx) {
            Ok(found) => report.removed.extend(found),
            Err(e) => report.errors.push(format!("sandbox {id}: {}", e.chain())),
        }
    }
    collect_netns(ctx, dispatch, req, deadline, keep.as_deref(), &mut report);
    let mut host = Rtnl::open().map_err(|e| Error::kernel("open host netlink socket", e))?;
    match sweep_links(ctx, &mut host, req.dry_run) {
        Ok(found) => report.removed.extend(found),
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
    Ok(report)
}

/// The namespaces knid created that must go (see [`crate::netns::findings`]), each removed on
/// its owner's shard.
fn collect_netns(
    ctx: &Context,
    dispatch: &Dispatch,
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
        let job = finding.clone();
        match dispatch.send(&owner, deadline, |reply| Job::DeleteNetns {
            owner: owner.clone(),
            gc: Some(job),
            reply,
        }) {
            Ok(rx) => queued.push((finding, rx)),
            Err(e) => report
                .errors
                .push(format!("netns of {owner}: {}", e.chain())),
        }
    }
    for (finding, rx) in queued {
        match dispatch::wait(rx) {
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
        errors.extend(crate::cni::chain::gc(ctx, &network, &valid));
    }
    Ok(errors)
}

/// Why the netns of `rec` no longer serves it, if it does not: missing, not a netns any more, or
/// another namespace mounted at the same path. Other errors (permissions) are errors, so a
/// sandbox is never detached because of a transient failure to look.
pub(crate) fn netns_gone(rec: &SandboxRecord) -> Result<Option<String>> {
    netns_gone_at(
        std::path::Path::new(&rec.netns_path),
        rec.netns_dev,
        rec.netns_ino,
    )
}

/// Why the namespace (`dev`, `ino`) is no longer at `path`, or `None` while it is.
pub(crate) fn netns_gone_at(path: &std::path::Path, dev: u64, ino: u64) -> Result<Option<String>> {
    match NetnsHandle::open(path) {
        Ok(ns) if (ns.id().dev, ns.id().ino) == (dev, ino) => Ok(None),
        Ok(_) => Ok(Some(format!("{} is another namespace now", path.display()))),
        Err(
            knid_netops::Error::NetnsMissing { .. }
            | knid_netops::Error::NotNetns { .. }
            | knid_netops::Error::NetnsSymlink { .. },
        ) => Ok(Some(format!("{} is gone", path.display()))),
        Err(source) => Err(Error::Netns {
            path: path.to_owned(),
            source,
        }),
    }
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
        (Some(s), true) => netns_gone(s)?,
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

/// Host links that are knid's by name or link group and have no record; removed (retired into
/// the reaper's group, which is then deleted) unless `dry_run`.
pub(crate) fn sweep_links(ctx: &Context, host: &mut Rtnl, dry_run: bool) -> Result<Vec<GcFinding>> {
    let links = host
        .links()
        .map_err(|e| Error::kernel("list host links", e))?;
    let candidates: Vec<_> = links
        .into_iter()
        .filter(|l| names::is_host_ifname(&l.name) || l.group == ctx.reaper_group)
        .collect();
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    // Read after the links: a link seen above had its record then, and still has it unless the
    // link was deleted since.
    let known: HashSet<String> = ctx
        .store
        .all_attachments()?
        .into_iter()
        .map(|a| a.host_ifname)
        .collect();
    let mut out = Vec::new();
    for link in candidates.into_iter().filter(|l| !known.contains(&l.name)) {
        // One deleted since the dump (with its record: the reaper) is no finding.
        let existed = if dry_run {
            host.link_by_index(link.index)
                .map_err(|e| Error::kernel(format!("look up orphaned link {}", link.name), e))?
                .is_some()
        } else {
            host.retire(link.index, ctx.reaper_group)
                .map_err(|e| Error::kernel(format!("retire orphaned link {}", link.name), e))?
        };
        if !existed {
            continue;
        }
        out.push(GcFinding {
            sandbox_id: String::new(),
            ifname: String::new(),
            what: GcObject::HostLink,
            reason: GcReason::NoRecord,
            detail: link.name,
        });
    }
    if !dry_run && !out.is_empty() {
        host.delete_group(ctx.reaper_group)
            .map_err(|e| Error::kernel("delete orphaned links", e))?;
    }
    Ok(out)
}

/// Reservations whose owner has no attachment record; released unless `dry_run`.
/// Removes DAN files of sandboxes without a DAN tap (and temp files of interrupted writes).
/// Files are listed before the records are read: a file is only written after its record.
pub(crate) fn sweep_dan_files(ctx: &Context, dry_run: bool) -> Result<Vec<GcFinding>> {
    let files = crate::dan::files(&ctx.dan_dir)?;
    if files.is_empty() {
        return Ok(Vec::new());
    }
    let holders: HashSet<String> = ctx
        .store
        .all_attachments()?
        .into_iter()
        .filter(crate::dan::is_dan)
        .map(|a| a.sandbox_id)
        .collect();
    let mut out = Vec::new();
    for file in files
        .into_iter()
        .filter(|f| f.temp || !holders.contains(&f.sandbox_id))
    {
        if !dry_run {
            match std::fs::remove_file(&file.path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(Error::FailedPrecondition(format!(
                        "remove {}: {e}",
                        file.path
                    )))
                }
            }
        }
        out.push(GcFinding {
            sandbox_id: file.sandbox_id,
            ifname: String::new(),
            what: GcObject::DanFile,
            reason: GcReason::NoRecord,
            detail: file.path,
        });
    }
    Ok(out)
}

pub(crate) fn sweep_reservations(ctx: &Context, dry_run: bool) -> Result<Vec<GcFinding>> {
    let mut candidates = Vec::new();
    for network in ctx.store.networks_with_reservations()? {
        candidates.extend(ctx.store.reservations(&network)?);
    }
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    // Read after the reservations (see the module docs).
    let owners: HashSet<(String, String)> = ctx
        .store
        .all_attachments()?
        .into_iter()
        .map(|a| (a.sandbox_id, a.ifname))
        .collect();
    candidates.retain(|r| !owners.contains(&(r.owner.sandbox_id.clone(), r.owner.ifname.clone())));
    let finding = |network: &str, addr: IpAddr, sandbox_id: &str, ifname: &str| GcFinding {
        sandbox_id: sandbox_id.to_owned(),
        ifname: ifname.to_owned(),
        what: GcObject::Reservation,
        reason: GcReason::NoOwner,
        detail: format!("{network}/{addr}"),
    };
    // Each candidate is checked again inside one transaction (still held by that owner, who
    // still has no record); a dry run evaluates the same transaction and writes nothing.
    let mut batch = Batch::new();
    for r in &candidates {
        batch.release_if_unowned(&r.network, r.addr, r.owner.clone());
    }
    let checked = if dry_run {
        ctx.store.evaluate(&batch)?
    } else {
        ctx.store.commit(&batch)?
    };
    let mut out = Vec::new();
    for (r, applied) in candidates.iter().zip(checked.applied) {
        if applied {
            if !dry_run {
                ctx.ipam.release(&r.network, &[r.addr]);
            }
            out.push(finding(
                &r.network,
                r.addr,
                &r.owner.sandbox_id,
                &r.owner.ifname,
            ));
        }
    }
    Ok(out)
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
    for e in &report.errors {
        log::warn!("{who}: {e}");
    }
}
