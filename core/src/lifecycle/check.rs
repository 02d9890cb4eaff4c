//! Check (CNI CHECK semantics, run on the sandbox's shard): every attached interface asked for
//! is verified against the kernel — it exists in the sandbox netns, up, with its recorded MAC and
//! addresses — and a cni interface's plugins run their own CHECK with the cached result.

use knid_store::AttachmentRecord;

use super::podcheck;
use crate::context::Context;
use crate::drivers;
use crate::error::{Error, Result};
use crate::lifecycle;
use crate::model::{AttachmentState, InterfaceKind, MacAddr};
use crate::records::attachment_from_record;

/// Checks the attached interfaces of sandbox `id` (only `ifname` when given).
pub(crate) fn run(ctx: &Context, id: &str, ifname: Option<&str>) -> Result<()> {
    if ctx.store.sandbox(id)?.is_none() {
        return Err(Error::NotFound(id.to_owned()));
    }
    let recs: Vec<AttachmentRecord> = ctx
        .store
        .attachments(id)?
        .into_iter()
        .filter(|r| ifname.is_none_or(|n| r.ifname == n))
        .collect();
    if let (Some(name), true) = (ifname, recs.is_empty()) {
        return Err(Error::NotFound(format!("{id} interface {name}")));
    }
    for rec in &recs {
        let state = lifecycle::state_of(rec)?;
        if state != AttachmentState::Attached {
            return Err(Error::FailedPrecondition(format!(
                "sandbox {id} interface {} is {}, not attached",
                rec.ifname,
                state.as_str()
            )));
        }
        let iface = attachment_from_record(rec)?;
        // A DAN tap has nothing in the sandbox netns: the guest owns its addresses.
        let in_pod = !iface.tap.as_ref().is_some_and(|t| t.dan);
        if in_pod {
            let mac = (iface.mac != MacAddr::UNKNOWN).then_some(iface.mac.0);
            let addrs: Vec<_> = iface.ips.iter().map(|ip| ip.address).collect();
            podcheck::verify(
                std::path::Path::new(&rec.netns_path),
                &rec.ifname,
                mac,
                &addrs,
            )
            .map_err(|why| Error::FailedPrecondition(format!("sandbox {id}: {why}")))?;
        }
        if iface.kind == InterfaceKind::Cni {
            drivers::cni::check(ctx, rec)?;
        }
    }
    Ok(())
}
