//! Rolling back attachments an attach did not finish (ARCHITECTURE §5, RollingBack): mark them,
//! delete their host links now, then forget them with their reservations. Used by a failed
//! attach, and for leftovers of an interrupted one found by a later attach, detach, GC or
//! start-up recovery.

use knid_netops::Rtnl;
use knid_store::{AttachmentRecord, Batch};

use crate::engine::{now_ms, Context};
use crate::error::{Error, Result};
use crate::failpoint;
use crate::lifecycle::{self, Event, Next};
use crate::records::attachment_key;
use crate::teardown::{self, SandboxAfter};

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
    let mut marks = Batch::new();
    for rec in &mut recs {
        lifecycle::advance(rec, Event::Fail, now)?;
        marks.put_attachment(rec.clone());
    }
    ctx.store.apply(&marks)?;
    failpoint::hit("rollback.rolling_back")?;

    teardown::delete_links(host, &recs)?;
    failpoint::hit("rollback.deleted")?;

    for rec in &recs {
        if lifecycle::advance(&mut rec.clone(), Event::RolledBack, now)? != Next::Gone {
            return Err(Error::Corrupt {
                key: attachment_key(rec),
                detail: "rolled back but not gone".into(),
            });
        }
    }
    teardown::forget(ctx, &recs, after)?;
    Ok(())
}
