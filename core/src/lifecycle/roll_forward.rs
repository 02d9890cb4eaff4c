//! Rolling an interrupted attach forward at start-up (docs/architecture.md#start-up-and-crash-recovery).
//!
//! An attach whose intent says `roll_forward` replies once Attached is applied, before it is
//! durable (one flush per attach: the intent's). If knid dies before the next flush, the store
//! holds the intent, Provisioning, and the kernel holds the complete attach the reply described:
//! every name, address, MAC and route came from the intent, and the completion mark on every
//! host link says that every kernel step succeeded (it is the last one; `drivers::complete`).
//! Recovery finds it so and records Attached; anything short of it — an interrupted or failed
//! attach, a mark missing, a pod side or netns not as recorded — is rolled back as before.

use knid_netops::Rtnl;
use knid_store::AttachmentRecord;

use crate::drivers::{self, mark, MacRule};
use crate::error::{Error, Result};
use crate::lifecycle::{self, attachment_key, teardown, Event};
use crate::model::{now_ms, AttachmentState};
use crate::records::corrupt;
use crate::shared::Context;

/// Rolls the interrupted attach of sandbox `id` forward if it may be and its kernel work is
/// complete; returns whether it did. Its Provisioning records become Attached in one durable
/// commit. Run by start-up recovery only, before the sandbox's GC (which rolls back what is left).
pub(crate) fn run(ctx: &Context, host: &mut Rtnl, id: &str) -> Result<bool> {
    let read = corrupt::attachments(&ctx.store, id)?;
    if !read.corrupt.is_empty() {
        // An interface knid cannot read may be part of the same attach.
        return Ok(false);
    }
    let mut interrupted = Vec::new();
    for rec in read.usable {
        match lifecycle::state_of(&rec)? {
            AttachmentState::Provisioning => interrupted.push(rec),
            // Pending: the intent's flush never completed, so neither did the kernel work.
            AttachmentState::Pending | AttachmentState::RollingBack => return Ok(false),
            _ => {}
        }
    }
    if interrupted.is_empty() {
        return Ok(false);
    }
    if let Some(why) = incomplete(ctx, host, id, &interrupted)? {
        log::info!("recovery: {id}: the interrupted attach is rolled back: {why}");
        return Ok(false);
    }
    lifecycle::advance_all(&mut interrupted, Event::RolledForward, now_ms())?;
    let batch = lifecycle::writes(&interrupted);
    ctx.store.commit(&batch)?;
    teardown::sync_dan_files(ctx, &interrupted);
    let names: Vec<String> = interrupted.iter().map(attachment_key).collect();
    log::warn!(
        "recovery: {id}: the interrupted attach of {} was complete in the kernel: rolled forward \
         to attached",
        names.join(", ")
    );
    Ok(true)
}

/// Why the interrupted attach `recs` (sandbox `id`'s Provisioning records) cannot be rolled
/// forward, or `None` when it can: its intent allowed it, the sandbox record is there and its
/// netns is still the one attached in, every host link carries the completion mark, and every
/// interface is in the kernel as recorded ([`drivers::difference`]: pod side, tap, host link
/// up, bandwidth).
fn incomplete(
    ctx: &Context,
    host: &mut Rtnl,
    id: &str,
    recs: &[AttachmentRecord],
) -> Result<Option<String>> {
    if let Some(rec) = recs.iter().find(|r| !r.roll_forward) {
        return Ok(Some(format!(
            "{} was not recorded as one recovery may finish",
            attachment_key(rec)
        )));
    }
    let sandbox = match corrupt::sandbox(&ctx.store, id) {
        Ok(Some(sandbox)) => sandbox,
        Ok(None) => return Ok(Some("no sandbox record".to_owned())),
        Err(e @ Error::Corrupt { .. }) => return Ok(Some(e.to_string())),
        Err(e) => return Err(e),
    };
    let netns = std::path::Path::new(&sandbox.netns_path);
    if let Some(why) = crate::netns::recorded::gone(netns, sandbox.netns_dev, sandbox.netns_ino)? {
        return Ok(Some(why));
    }
    for rec in recs {
        let key = attachment_key(rec);
        if (rec.netns_dev, rec.netns_ino) != (sandbox.netns_dev, sandbox.netns_ino) {
            return Ok(Some(format!("{key} was attached in another netns")));
        }
        let link = host
            .link_by_name(&rec.host_ifname)
            .map_err(|e| Error::kernel(format!("look up {}", rec.host_ifname), e))?;
        if !link
            .as_ref()
            .is_some_and(|link| mark::is_complete(link, &ctx.link_mark))
        {
            return Ok(Some(format!(
                "host link {} lacks the completion mark",
                rec.host_ifname
            )));
        }
        if let Some(difference) = drivers::difference(rec, MacRule::Recorded, host, None)? {
            return Ok(Some(format!("{key}: {difference}")));
        }
    }
    Ok(None)
}
