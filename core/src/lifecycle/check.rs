//! Check (CNI CHECK semantics, run on the sandbox's shard): every attached interface asked for
//! must be Attached, and is then verified against the kernel by its driver
//! ([`drivers::verify`]); with the first interface, the sandbox's host-port elements must be in
//! knid's nf_tables table; an interface knid guards must have its source guard.

use knid_netops::Rtnl;
use knid_store::AttachmentRecord;

use crate::drivers::{self, verify};
use crate::error::{Error, Result};
use crate::lifecycle;
use crate::model::{AttachmentState, MacAddr};
use crate::node::{antispoof, host_ports, nat};
use crate::records::corrupt;
use crate::shared::Context;

/// A record knid cannot use fails the check as a precondition: nothing of it can be verified.
fn unusable(err: Error) -> Error {
    match err {
        Error::Corrupt { .. } => {
            Error::FailedPrecondition(format!("{err}; {}", corrupt::REMOVED_BY))
        }
        other => other,
    }
}

/// Checks the attached interfaces of sandbox `id` (only `ifname` when given, then against
/// `expected_mac` instead of its recorded MAC when given); `host` looks up their host links.
pub(crate) fn run(
    ctx: &Context,
    host: &mut Rtnl,
    id: &str,
    ifname: Option<&str>,
    expected_mac: Option<MacAddr>,
) -> Result<()> {
    if corrupt::sandbox(&ctx.store, id)
        .map_err(unusable)?
        .is_none()
    {
        return Err(Error::NotFound(id.to_owned()));
    }
    let read = corrupt::attachments(&ctx.store, id)?;
    if let Some(bad) = read
        .corrupt
        .iter()
        .find(|b| ifname.is_none_or(|n| b.ifname == n))
    {
        return Err(unusable(bad.error()));
    }
    let recs: Vec<AttachmentRecord> = read
        .usable
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
        drivers::verify(ctx, host, rec, expected_mac)?;
        if let Some(want) = antispoof::expected(ctx.network(&rec.network).as_ref(), rec)? {
            if let Err(d) = verify::antispoof(&want, antispoof::read()?.as_deref()) {
                return Err(Error::FailedPrecondition(format!("sandbox {id}: {d}")));
            }
        }
    }
    // The host ports lead to the first interface: checked with it.
    if recs.iter().any(host_ports::is_target) {
        let expected = ctx.host_ports.elements_of(id);
        if !expected.is_empty() {
            if let Err(d) = verify::host_ports(&expected, nat::read()?.as_ref()) {
                return Err(Error::FailedPrecondition(format!("sandbox {id}: {d}")));
            }
        }
    }
    Ok(())
}
