//! Detach, run on the sandbox's shard worker: record Detaching, delete the links, then drop the
//! records and release the addresses in one commit. Unknown sandboxes and interfaces are success
//! (the CNI DEL rule); a repeated or interrupted detach simply runs again.

use knid_netops::Rtnl;
use knid_store::{AttachmentState as RecState, Batch, SandboxRecord};
use protobuf::EnumOrUnknown;

use crate::engine::{now_ms, Context};
use crate::error::Result;
use crate::model::{IfName, SandboxId};
use crate::teardown::{self, SandboxAfter};

pub(crate) fn run(
    ctx: &Context,
    host: &mut Rtnl,
    id: &SandboxId,
    ifname: Option<&IfName>,
) -> Result<()> {
    let Some(sandbox) = ctx.store.sandbox(id.as_str())? else {
        return Ok(());
    };
    let (going, staying): (Vec<_>, Vec<_>) = ctx
        .store
        .attachments(id.as_str())?
        .into_iter()
        .partition(|a| ifname.is_none_or(|n| a.ifname == n.as_str()));
    if going.is_empty() && !staying.is_empty() {
        return Ok(());
    }

    // Durable before the first kernel call, so an interrupted detach is finished, not forgotten.
    let mut batch = Batch::new();
    let now = now_ms();
    let going: Vec<_> = going
        .into_iter()
        .map(|mut a| {
            a.state = EnumOrUnknown::new(RecState::DETACHING);
            a.updated_at_ms = now;
            batch.put_attachment(a.clone());
            a
        })
        .collect();
    if !batch.is_empty() {
        ctx.store.commit(&batch)?;
    }
    teardown::delete_links(host, &going)?;
    let after = if staying.is_empty() {
        SandboxAfter::Delete(id.to_string())
    } else {
        SandboxAfter::Put(Box::new(SandboxRecord {
            generation: sandbox.generation + 1,
            updated_at_ms: now,
            ..sandbox
        }))
    };
    teardown::forget(ctx, &going, Some(after))?;
    log::debug!("{id}: detached {} interface(s)", going.len());
    Ok(())
}
