//! Check (CNI CHECK semantics, run on the sandbox's shard): every attached interface asked for
//! must be Attached, and is then verified against the kernel by its driver
//! ([`drivers::verify`]).

use knid_netops::Rtnl;
use knid_store::AttachmentRecord;

use crate::context::Context;
use crate::drivers;
use crate::error::{Error, Result};
use crate::lifecycle;
use crate::model::AttachmentState;

/// Checks the attached interfaces of sandbox `id` (only `ifname` when given); `host` looks up
/// their host links.
pub(crate) fn run(ctx: &Context, host: &mut Rtnl, id: &str, ifname: Option<&str>) -> Result<()> {
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
        drivers::verify(ctx, host, rec)?;
    }
    Ok(())
}
