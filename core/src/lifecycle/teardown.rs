//! Removing attachments, shared by rollback, detach, the reaper, GC and recovery so they all
//! leave the same nothing behind: kernel objects first, then records and reservations in one
//! store transaction, then the addresses in memory.
//!
//! Records are forgotten conditionally (only if still exactly as read), so two removers racing
//! over one record (the reaper and a shard taking over its name) release its addresses once.

use std::net::IpAddr;
use std::sync::atomic::Ordering;

use knid_netops::Rtnl;
use knid_store::{AttachmentRecord, Batch, SandboxRecord};

use crate::drivers::{self, dan, veth};
use crate::error::{Error, Result};
use crate::lifecycle::attachment_key;
use crate::node::{antispoof, host_ports, nat};
use crate::records::addresses;
use crate::shared::Context;

/// What happens to the sandbox record once its attachments are forgotten.
pub(crate) enum SandboxAfter {
    /// No attachment remains: the record goes.
    Delete(String),
    /// Some remain: the record is rewritten (generation bumped by the caller).
    Put(Box<SandboxRecord>),
}

impl SandboxAfter {
    /// Adds the change to `batch`; true when the record goes.
    pub(crate) fn add_to(self, batch: &mut Batch) -> bool {
        match self {
            SandboxAfter::Delete(id) => {
                batch.delete_sandbox(&id);
                true
            }
            SandboxAfter::Put(rec) => {
                batch.put_sandbox(*rec);
                false
            }
        }
    }
}

/// Deletes the host link of every attachment of one sandbox now (a veth's pod end goes with
/// it), after releasing their pod side, paying the kernel's per-link deletion cost: for
/// rollbacks and take-overs, not for the detach path. Every link is tried; the first error is
/// returned.
pub(crate) fn delete_links(
    ctx: &Context,
    host: &mut Rtnl,
    atts: &[AttachmentRecord],
) -> Result<()> {
    let mut first_error = withdraw_host_ports(ctx, atts).err();
    if let Err(e) = drivers::release(ctx, host, atts) {
        first_error.get_or_insert(e);
    }
    for att in atts {
        match veth::remove(host, &att.host_ifname) {
            Ok(existed) => log::debug!(
                "{}: host link {} {}",
                attachment_key(att),
                att.host_ifname,
                if existed { "deleted" } else { "already gone" }
            ),
            Err(e) => {
                log::warn!("{}: {}", attachment_key(att), e.chain());
                first_error.get_or_insert(e);
            }
        }
    }
    // Only once the links are gone: a guard never leaves a link that could still carry frames.
    if let Err(e) = antispoof::remove(&ctx.networks(), atts) {
        first_error.get_or_insert(e);
    }
    first_error.map_or(Ok(()), Err)
}

/// Takes the host links of attachments of one sandbox off their bridge and into the reaper's
/// link group, one request per link, no deletion cost; then releases their pod side. A veth's
/// host end stays up (once its pod end is down nothing flows through it, and closing it would
/// cost the kernel one more RCU grace period under the RTNL lock), unless its pod end could not
/// be set down; any other host link is also set down. The port is removed here rather than by
/// the reaper's group deletion, which would pay for every port of its batch (an RCU grace period
/// and a walk over the bridge's ports each) in one long hold of the RTNL lock that every attach
/// and detach waits behind. A link already gone is fine.
///
/// The host links go first: for a detach whose kernel work overlaps its Detaching marks' flush
/// (veths only), a host link in the reaper's group is how recovery tells a detach that ran ahead
/// of a lost mark from an attached interface; nothing else of it has changed in the kernel
/// before (the host-port elements, withdrawn first, are rebuilt from the records at start-up).
pub(crate) fn retire_links(
    ctx: &Context,
    host: &mut Rtnl,
    atts: &[AttachmentRecord],
) -> Result<()> {
    withdraw_host_ports(ctx, atts)?;
    let mut left_up = Vec::new();
    for att in atts {
        let name = att.host_ifname.as_str();
        let stays_up = drivers::has_veth_end(att);
        let existed = if stays_up {
            host.release_port_by_name(name, ctx.reaper_group)
        } else {
            host.retire_by_name(name, ctx.reaper_group)
        }
        .map_err(|e| Error::kernel(format!("retire {name}"), e))?;
        log::debug!(
            "{}: host link {name} {}",
            attachment_key(att),
            if existed { "retired" } else { "already gone" }
        );
        if existed && stays_up {
            left_up.push(name);
        }
    }
    let quiet = drivers::release(ctx, host, atts)?;
    for name in left_up.into_iter().filter(|n| !quiet.contains(*n)) {
        // Its pod end is out of reach or not the recorded one: the host end is closed instead.
        host.retire_by_name(name, ctx.reaper_group)
            .map_err(|e| Error::kernel(format!("retire {name}"), e))?;
    }
    // Off its bridge, and down or its pod end down: the link carries no frame any more. Its
    // guard stays on it until the reaper has deleted it (`antispoof::remove_reaped`): taken
    // out now, the chain would unhook a live device, the costliest part of a guarded detach.
    Ok(())
}

/// Forgets `atts` (each only if its record is still exactly as given), releasing their
/// reservations, and applies `after` to the sandbox record, in one durable commit; then frees
/// the addresses of the forgotten ones in memory. Returns how many were forgotten.
pub(crate) fn forget(
    ctx: &Context,
    atts: &[AttachmentRecord],
    after: Option<SandboxAfter>,
) -> Result<usize> {
    let mut batch = Batch::new();
    let mut freed: Vec<(&str, Vec<IpAddr>)> = Vec::with_capacity(atts.len());
    for att in atts {
        let addrs = addresses(att)?;
        batch.forget_attachment(att, addrs.clone());
        freed.push((&att.network, addrs));
    }
    let deleted = after.is_some_and(|a| a.add_to(&mut batch));
    let committed = ctx.store.commit(&batch)?;
    let mut forgotten = 0;
    for (((network, addrs), applied), att) in freed.into_iter().zip(committed.applied).zip(atts) {
        if applied {
            ctx.ipam.release(network, &addrs);
            forgotten += 1;
            if host_ports::is_target(att) {
                ctx.host_ports.release(&att.sandbox_id);
            }
        }
    }
    if deleted {
        sandbox_gone(ctx);
    }
    sync_dan_files(ctx, atts);
    Ok(forgotten)
}

/// Removes the host-port elements that lead to any of `atts` (a sandbox's first interface),
/// in one nf_tables transaction per sandbox; elements already gone are fine. The ports are
/// free from then on (a Detach replies before the reaper forgets the records). Costs nothing
/// to a sandbox without host ports.
fn withdraw_host_ports(ctx: &Context, atts: &[AttachmentRecord]) -> Result<()> {
    for att in atts.iter().filter(|a| host_ports::is_target(a)) {
        let elements = ctx.host_ports.elements_of(&att.sandbox_id);
        if elements.is_empty() {
            ctx.host_ports.release(&att.sandbox_id);
            continue;
        }
        nat::host_nft()?
            .remove_port_maps(nat::TABLE, &elements)
            .map_err(|e| Error::kernel(format!("remove host ports of {}", att.sandbox_id), e))?;
        ctx.host_ports.release(&att.sandbox_id);
        log::debug!(
            "{}: {} host port element(s) removed",
            att.sandbox_id,
            elements.len()
        );
    }
    Ok(())
}

/// Rewrites the DAN files of the sandboxes among `atts` that have DAN taps. A failure is logged:
/// the file is a view of the store, and GC removes a stale one.
pub(crate) fn sync_dan_files(ctx: &Context, atts: &[AttachmentRecord]) {
    let mut ids: Vec<&str> = atts
        .iter()
        .filter(|a| dan::is_dan(a))
        .map(|a| a.sandbox_id.as_str())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    for id in ids {
        if let Err(e) = dan::sync(ctx, id) {
            log::warn!("{id}: {}", e.chain());
        }
    }
}

/// Counts one sandbox record less. Saturating: a record never counted must not wrap.
pub(crate) fn sandbox_gone(ctx: &Context) {
    let _ = ctx
        .sandbox_count
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            Some(n.saturating_sub(1))
        });
}
