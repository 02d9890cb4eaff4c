//! The node-wide sweeps: what no record owns any more — host links with knid's names or link
//! group and knid's mark, reservations, DAN files. Each reads the kernel (or the files, or the
//! reservations) before the records, which the invariants in [`super`] make safe.

use std::collections::HashSet;
use std::net::IpAddr;

use knid_netops::Rtnl;
use knid_store::Batch;

use crate::drivers::mark::Owner;
use crate::drivers::{dan, names};
use crate::error::{Error, Result};
use crate::lifecycle::discard;
use crate::model::{GcFinding, GcObject, GcReason};
use crate::records::corrupt::{self, AttachmentRead};
use crate::shared::Context;

/// Host links with knid's name form or in the reaper's link group that have no record (a host
/// end, a DAN tap, or the IFB of an interface with an egress limit). Those
/// carrying this store's mark ([`crate::drivers::mark`]) are removed (retired into the
/// reaper's group, which is then deleted) unless `dry_run`, reason `no-record`; the others
/// (another knid's, someone else's, a knid's from before marks) are only reported, reason
/// `not-ours`, and never touched.
pub(crate) fn sweep_links(ctx: &Context, host: &mut Rtnl, dry_run: bool) -> Result<Vec<GcFinding>> {
    if !may_have_orphans(ctx, host)? {
        return Ok(Vec::new());
    }
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
    let known = recorded_host_links(ctx)?;
    let mut out = Vec::new();
    let mut retired = false;
    for link in candidates.into_iter().filter(|l| !known.contains(&l.name)) {
        let owner = Owner::of(&link, &ctx.link_mark);
        if owner != Owner::Us {
            log::debug!(
                "host link {} is not this knid's ({})",
                link.name,
                owner.describe()
            );
            out.push(GcFinding {
                sandbox_id: String::new(),
                ifname: String::new(),
                what: GcObject::HostLink,
                reason: GcReason::NotOurs,
                detail: link.name,
            });
            continue;
        }
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
        retired = !dry_run;
        out.push(GcFinding {
            sandbox_id: String::new(),
            ifname: String::new(),
            what: GcObject::HostLink,
            reason: GcReason::NoRecord,
            detail: link.name,
        });
    }
    if retired {
        ctx.port_census.changed();
        host.delete_group(ctx.reaper_group)
            .map_err(|e| Error::kernel("delete orphaned links", e))?;
    }
    Ok(out)
}

/// The host links the records name. A record knid cannot use keeps the links it may name: it
/// is removed with them, when asked.
fn recorded_host_links(ctx: &Context) -> Result<HashSet<String>> {
    let mut known: HashSet<String> = HashSet::new();
    for read in corrupt::each_attachment(&ctx.store) {
        match read? {
            AttachmentRead::Usable(rec) => {
                known.extend(crate::drivers::bandwidth::ifb_of(&rec));
                known.insert(rec.host_ifname);
            }
            AttachmentRead::Corrupt(bad) => known.extend(discard::host_links(&bad)),
        }
    }
    Ok(known)
}

/// Whether [`sweep_links`] has anything to look at, from the cheap look: the names of the host's
/// links from procfs (a link dump costs the kernel links × pod namespaces: ~0.5 s with 5,000
/// pods), then the records. A name no record holds that has knid's form, or whose link (looked
/// up alone) is in the reaper's group, means yes; so does a list procfs cannot give. Without
/// orphans, as on almost every start, no dump is made.
fn may_have_orphans(ctx: &Context, host: &mut Rtnl) -> Result<bool> {
    let names = match knid_netops::link_names() {
        Ok(names) => names,
        Err(e) => {
            log::debug!("sweep: {e}; listing the host links instead");
            return Ok(true);
        }
    };
    let known = recorded_host_links(ctx)?;
    for name in names.iter().filter(|n| !known.contains(n.as_str())) {
        if names::is_host_ifname(name) {
            return Ok(true);
        }
        let link = host
            .link_by_name(name)
            .map_err(|e| Error::kernel(format!("look up host link {name}"), e))?;
        if link.is_some_and(|l| l.group == ctx.reaper_group) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Removes DAN files of sandboxes without a DAN tap (and temp files of interrupted writes).
/// Files are listed before the records are read: a file is only written after its record.
pub(crate) fn sweep_dan_files(ctx: &Context, dry_run: bool) -> Result<Vec<GcFinding>> {
    let files = dan::files(&ctx.dan_dir)?;
    if files.is_empty() {
        return Ok(Vec::new());
    }
    // A record knid cannot use may be a DAN tap's: its sandbox's file stays while it does.
    let mut holders: HashSet<String> = HashSet::new();
    for read in corrupt::each_attachment(&ctx.store) {
        match read? {
            AttachmentRead::Usable(rec) if dan::is_dan(&rec) => holders.insert(rec.sandbox_id),
            AttachmentRead::Usable(_) => continue,
            AttachmentRead::Corrupt(bad) => holders.insert(bad.sandbox_id),
        };
    }
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

/// Reservations whose owner has no attachment record; released unless `dry_run`. Each is read,
/// then its owner's record looked up (see the module docs), one at a time.
pub(crate) fn sweep_reservations(ctx: &Context, dry_run: bool) -> Result<Vec<GcFinding>> {
    let mut candidates = Vec::new();
    for network in ctx.store.networks_with_reservations()? {
        for r in ctx.store.each_reservation(&network)? {
            let r = r?;
            // A record knid cannot use still owns what it holds: its key is looked up.
            if !ctx
                .store
                .has_attachment(&r.owner.sandbox_id, &r.owner.ifname)?
            {
                candidates.push(r);
            }
        }
    }
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
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
