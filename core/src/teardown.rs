//! Removing attachments: their kernel objects first, then their records and reservations in one
//! store transaction, then the addresses in memory. Shared by detach and by the rollback of a
//! failed attach, so both leave exactly the same nothing behind.

use std::net::IpAddr;
use std::sync::atomic::Ordering;

use ipnet::IpNet;
use knid_netops::Rtnl;
use knid_store::{AttachmentRecord, Batch, SandboxRecord};

use crate::bridge;
use crate::engine::Context;
use crate::error::{Error, Result};
use crate::records::attachment_key;

/// What happens to the sandbox record once its attachments are forgotten.
pub(crate) enum SandboxAfter {
    /// No attachment remains: the record goes.
    Delete(String),
    /// Some remain: the record is rewritten (generation bumped by the caller).
    Put(Box<SandboxRecord>),
}

/// Addresses an attachment record holds.
pub(crate) fn addresses(rec: &AttachmentRecord) -> Result<Vec<IpAddr>> {
    rec.ips
        .iter()
        .map(|ip| {
            ip.address
                .parse::<IpNet>()
                .map(|n| n.addr())
                .map_err(|_| Error::Corrupt {
                    key: attachment_key(rec),
                    detail: format!("invalid address {:?}", ip.address),
                })
        })
        .collect()
}

/// Deletes the host link of every attachment (the pod end goes with it). Every link is tried;
/// the first error is returned.
pub(crate) fn delete_links(host: &mut Rtnl, atts: &[AttachmentRecord]) -> Result<()> {
    let mut first_error = None;
    for att in atts {
        match bridge::remove(host, &att.host_ifname) {
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
    first_error.map_or(Ok(()), Err)
}

/// Deletes the records of `atts`, releases their reservations and applies `after` to the sandbox
/// record, in one durable commit; then frees the addresses in memory.
pub(crate) fn forget(
    ctx: &Context,
    atts: &[AttachmentRecord],
    after: Option<SandboxAfter>,
) -> Result<()> {
    let mut batch = Batch::new();
    let mut freed: Vec<(String, Vec<IpAddr>)> = Vec::new();
    for att in atts {
        let addrs = addresses(att)?;
        for addr in &addrs {
            batch.release(&att.network, *addr);
        }
        batch.delete_attachment(&att.sandbox_id, &att.ifname);
        freed.push((att.network.clone(), addrs));
    }
    let deleted = match after {
        Some(SandboxAfter::Delete(id)) => {
            batch.delete_sandbox(&id);
            true
        }
        Some(SandboxAfter::Put(rec)) => {
            batch.put_sandbox(*rec);
            false
        }
        None => false,
    };
    ctx.store.commit(&batch)?;
    for (network, addrs) in freed {
        ctx.ipam.release(&network, &addrs);
    }
    if deleted {
        // Saturating: a sandbox record without a count (never counted) must not wrap.
        let _ = ctx
            .sandbox_count
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                Some(n.saturating_sub(1))
            });
    }
    Ok(())
}
