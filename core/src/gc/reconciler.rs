//! The reconciler's round: the GC sweep (netns gone, interrupted operations, orphaned links and
//! reservations) that the runtime runs every `gc_interval` on a thread of its own, then a look
//! at every attached interface against the kernel.

use std::collections::HashMap;

use super::interface_audit::Changed;
use super::OnShard;
use crate::drivers::{self, verify};
use crate::error::{Error, Result};
use crate::lifecycle;
use crate::model::{AttachmentState, GcRequest};
use crate::node::{host_ports, nat};
use crate::records::corrupt::{self, AttachmentRead};
use crate::shared::Context;

/// One round: a collection without a keep list (only what is certainly garbage), logged; then
/// [`audit_interfaces`], whose findings feed the `PodInterfacesReady` condition and the
/// `knid_pod_interfaces_changed` gauge.
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
    match audit_interfaces(ctx) {
        Ok(found) => {
            for c in &found {
                log::warn!(
                    "reconciler: {}/{} differs from its record: {}",
                    c.sandbox_id,
                    c.ifname,
                    c.difference
                );
            }
            ctx.metrics
                .set_changed_interfaces(found.iter().map(|c| c.difference.kind()));
            ctx.interface_audit.replace(found);
        }
        Err(e) => log::warn!("reconciler: look at the attached interfaces: {}", e.chain()),
    }
    // What the round ran (the audit's netns, netlink and nf_tables code: 2.3–2.8 MiB of knid's
    // text with 5,000 pods) would otherwise stay mapped until the next burst's end; the next
    // round maps it back from the page cache, a fault per 64 KiB. Before the round is counted,
    // so that a reader of the count finds it released.
    crate::memory::give_back_code_unless_recent("a reconciler round");
    ctx.metrics.observe_reconciler_round();
}

/// Every Attached interface whose sandbox netns still exists, against the kernel with
/// [`drivers::difference`] (the check Check makes, without a cni network's plugin CHECK): its
/// pod side gone, renamed, down or without an address (a MAC changed in place is not compared:
/// a chained CNI plugin changes it on purpose), or its host link (veth, tap) gone or down, or its
/// bandwidth limits not in force, or (its first interface) a sandbox's host-port element missing
/// from knid's table. An interface whose netns is gone is GC's, not reported here.
///
/// Reads only, off the shards, one record at a time. Cost per round, for N attached interfaces: one
/// scan of the store's attachments, one dump of the host's links (the kernel's cost grows with the
/// number of pod namespaces: ~0.3 s at 3,000 pods, the start-up sweep's dump), and per interface
/// but a DAN tap, opening its netns and a socket in it, one link request and one address dump, plus
/// a link dump in that netns only when its link is missing; a qdisc dump per limit (and a link
/// request and a filter dump for an egress limit) of an interface with bandwidth limits; one read
/// of knid's table when a sandbox has host ports, one of its guard table when an interface is
/// guarded; a netns identity check only for an interface that
/// differs.
pub(crate) fn audit_interfaces(ctx: &Context) -> Result<Vec<Changed>> {
    // The records are read one at a time, each judged as it is read.
    let mut records = corrupt::each_attachment(&ctx.store).peekable();
    if records.peek().is_none() {
        return Ok(Vec::new());
    }
    let mut host = crate::node::host_rtnl()?;
    let host_links: HashMap<String, knid_netops::Link> = host
        .links()
        .map_err(|e| Error::kernel("list host links", e))?
        .into_iter()
        .map(|l| (l.name.clone(), l))
        .collect();
    let mut found = Vec::new();
    // knid's table, read once a round, and only when some sandbox has host ports.
    let mut table: Option<Option<knid_netops::nft::TableContents>> = None;
    // The source guards, read once a round, when an interface has one.
    let mut guards: Option<Option<Vec<knid_netops::nft::GuardChain>>> = None;
    for read in records {
        // A corrupt record is reported by List and doctor, and removed by a GC someone runs.
        let AttachmentRead::Usable(rec) = read? else {
            continue;
        };
        if lifecycle::state_of(&rec)? != AttachmentState::Attached {
            continue;
        }
        let mut difference = drivers::difference(
            &rec,
            drivers::MacRule::Ignored,
            &mut host,
            Some(&host_links),
        )?;
        if difference.is_none() {
            let network = ctx.network(&rec.network);
            if let Some(want) = crate::node::antispoof::expected(network.as_ref(), &rec)? {
                if guards.is_none() {
                    guards = Some(crate::node::antispoof::read()?);
                }
                let now = guards.as_ref().and_then(Option::as_deref);
                difference = verify::antispoof(&want, now).err();
            }
        }
        if difference.is_none() && host_ports::is_target(&rec) {
            let expected = ctx.host_ports.elements_of(&rec.sandbox_id);
            if !expected.is_empty() {
                if table.is_none() {
                    table = Some(nat::read()?);
                }
                let now = table.as_ref().and_then(Option::as_ref);
                difference = verify::host_ports(&expected, now).err();
            }
        }
        let Some(difference) = difference else {
            continue;
        };
        let path = std::path::Path::new(&rec.netns_path);
        if crate::netns::recorded::gone(path, rec.netns_dev, rec.netns_ino)?.is_some() {
            continue;
        }
        found.push(Changed {
            sandbox_id: rec.sandbox_id,
            ifname: rec.ifname,
            difference,
        });
    }
    Ok(found)
}
