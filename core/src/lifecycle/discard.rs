//! Discarding attachment records knid cannot use ([`crate::records::corrupt`]): Detach of their
//! sandbox and GC remove them like any other, with less to go on. The host link the record's key
//! names (and the one the record names, when it decodes and the name is knid's) is deleted; then
//! the records, every reservation their owners hold, and the sandbox record when asked, go in one
//! durable commit; then those addresses are freed in memory. What only the record could say how
//! to undo — a device moved into the pod, a plugin's own state — is logged as left behind: it
//! goes with the pod's netns, or the next GC's sweeps.

use knid_netops::Rtnl;
use knid_store::{Batch, Reservation};

use crate::drivers::{names, veth};
use crate::error::Result;
use crate::lifecycle::teardown::{self, SandboxAfter};
use crate::model::InterfaceKind;
use crate::records::corrupt::CorruptAttachment;
use crate::shared::Context;

/// Discards `bad` (all of one sandbox) and applies `after` to the sandbox record in the same
/// commit. A host link that cannot be deleted is logged, not fatal: the record still goes, and
/// the link sweep removes a link left without a record.
pub(crate) fn run(
    ctx: &Context,
    host: &mut Rtnl,
    bad: &[CorruptAttachment],
    after: Option<SandboxAfter>,
) -> Result<()> {
    let (bad, stuck): (Vec<_>, Vec<_>) = bad.iter().partition(|b| b.deletable());
    for rec in stuck {
        log::error!(
            "{}: its key cannot be deleted through the store",
            rec.error()
        );
    }
    for rec in &bad {
        delete_links(host, rec);
    }
    let held = reservations(ctx, &bad)?;
    let mut batch = Batch::new();
    for rec in &bad {
        batch.delete_attachment(&rec.sandbox_id, &rec.ifname);
    }
    for r in &held {
        batch.release_held_by(&r.network, r.addr, r.owner.clone());
    }
    let deleted = after.is_some_and(|a| a.add_to(&mut batch));
    ctx.store.commit(&batch)?;
    // Read before the commit, on the sandbox's shard: nothing else releases an address whose
    // owner still has a record, so each was still held when the commit released it.
    for r in &held {
        ctx.ipam.release(&r.network, &[r.addr]);
    }
    if deleted {
        teardown::sandbox_gone(ctx);
    }
    for rec in &bad {
        let addrs: Vec<String> = held
            .iter()
            .filter(|r| r.owner == rec.owner())
            .map(|r| format!("{}/{}", r.network, r.addr))
            .collect();
        log::warn!(
            "{}: discarded; released {}{}",
            rec.error(),
            if addrs.is_empty() {
                "no address".to_owned()
            } else {
                addrs.join(", ")
            },
            left_behind(rec)
        );
    }
    Ok(())
}

/// The host links that can be told from the record: the names its key gives (the host end, and
/// the IFB an egress limit would have), and the one it records when that is one of knid's
/// names.
pub(crate) fn host_links(rec: &CorruptAttachment) -> Vec<String> {
    let mut out = vec![
        names::host_ifname(&rec.sandbox_id, &rec.ifname),
        names::ifb_ifname(&rec.sandbox_id, &rec.ifname),
    ];
    if let Some(recorded) = rec.record.as_ref().map(|r| &r.host_ifname) {
        if names::is_host_ifname(recorded) && !out.contains(recorded) {
            out.push(recorded.clone());
        }
    }
    out
}

fn delete_links(host: &mut Rtnl, rec: &CorruptAttachment) {
    for name in host_links(rec) {
        match veth::remove(host, &name) {
            Ok(true) => log::info!("{}: host link {name} deleted", rec.error()),
            Ok(false) => {}
            Err(e) => log::warn!(
                "{}: host link {name} not deleted ({}); the link sweep removes it once the \
                 record is gone",
                rec.error(),
                e.chain()
            ),
        }
    }
}

/// Every reservation the owners of `bad` hold, in any network.
fn reservations(ctx: &Context, bad: &[&CorruptAttachment]) -> Result<Vec<Reservation>> {
    let owners: Vec<_> = bad.iter().map(|b| b.owner()).collect();
    let mut out = Vec::new();
    for network in ctx.store.networks_with_reservations()? {
        out.extend(
            ctx.store
                .reservations(&network)?
                .into_iter()
                .filter(|r| owners.contains(&r.owner)),
        );
    }
    Ok(out)
}

/// What may be left of the attachment that only its record could say how to undo.
fn left_behind(rec: &CorruptAttachment) -> String {
    let kind = rec
        .record
        .as_ref()
        .and_then(|r| InterfaceKind::parse(&r.kind).ok());
    match kind {
        Some(InterfaceKind::Veth) => String::new(),
        Some(kind) => format!(
            "; its {} pod side is left to the removal of the pod's netns",
            kind.as_str()
        ),
        None => "; whatever it held in the pod's netns is left to that netns's removal".to_owned(),
    }
}
