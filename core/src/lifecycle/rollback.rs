//! Rolling back attachments an attach did not finish (RollingBack in docs/architecture.md#the-attachment-lifecycle-attach--detach--gone): mark them,
//! delete their host links now, then forget them with their reservations. Used by a failed
//! attach, and for leftovers of an interrupted one found by a later attach, detach, GC or
//! start-up recovery.

use knid_netops::Rtnl;
use knid_store::AttachmentRecord;

use crate::error::Result;
use crate::failpoint;
use crate::lifecycle::teardown::{self, SandboxAfter};
use crate::lifecycle::{self, Event};
use crate::model::now_ms;
use crate::shared::Context;

/// Rolls back `recs` (Pending, Provisioning or RollingBack) and applies `after` to the sandbox
/// record in the same commit that forgets them.
pub(crate) fn run(
    ctx: &Context,
    host: &mut Rtnl,
    mut recs: Vec<AttachmentRecord>,
    after: Option<SandboxAfter>,
) -> Result<()> {
    if recs.is_empty() {
        teardown::forget(ctx, &recs, after)?;
        return Ok(());
    }
    let now = now_ms();
    // An attach whose kernel work may have completed could be rolled forward by recovery (see
    // `roll_forward`): its failure is made durable before the first undo, so a crash while
    // undoing it never turns it into an attached one. A flush on failures only.
    let may_roll_forward = recs.iter().any(|rec| {
        rec.roll_forward
            && matches!(
                lifecycle::state_of(rec),
                Ok(crate::model::AttachmentState::Provisioning)
            )
    });
    lifecycle::advance_all(&mut recs, Event::Fail, now)?;
    let marks = lifecycle::writes(&recs);
    // A store refusing the mark (full, read-only) does not keep the kernel objects alive: they
    // go, then its error is returned with the records left as they were for recovery (which
    // rolls back: what they name is gone or incomplete).
    let marked = ctx.store.apply(&marks).and_then(|_| {
        if may_roll_forward {
            ctx.store.flush()
        } else {
            Ok(())
        }
    });
    failpoint::hit("rollback.rolling_back")?;

    teardown::delete_links(ctx, host, &recs)?;
    failpoint::hit("rollback.deleted")?;
    marked?;

    for rec in &recs {
        lifecycle::check_ends(rec, &[Event::RolledBack])?;
    }
    teardown::forget(ctx, &recs, after)?;
    Ok(())
}
