//! The lifecycle of one attachment (docs/architecture.md#the-attachment-lifecycle-attach--detach--gone), and nothing else:
//!
//! ```text
//!  Attach                       kernel + extensions ok
//!  ───────► Pending ───► Provisioning ─────────────────► Attached
//!              │              │  error or crash              │ Detach / GC / netns gone
//!              ▼              ▼                              ▼
//!           RollingBack ◄─────┘                          Detaching ───► Reaping ───► (gone,
//!              │                                                                     IPs released)
//!              ▼
//!        (gone, IPs released, error returned)
//! ```
//!
//! Every state change of a record goes through [`advance`], so an edge that is not in the diagram
//! cannot happen silently. Which changes must be durable before their effect, and which are
//! progress marks recovery does not depend on, is said at each [`Event`].

use knid_store::{AttachmentRecord, Batch};
use protobuf::EnumOrUnknown;

use crate::error::{Error, Result};
use crate::model::AttachmentState::{self, *};
use crate::records::{self, attachment_key};

pub(crate) mod attach;
pub(crate) mod check;
pub(crate) mod detach;
pub(crate) mod reaper;
pub(crate) mod reaper_queue;
pub(crate) mod rollback;
mod stopwatch;
pub(crate) mod teardown;

/// What happens to an attachment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// Pending → Provisioning: the kernel work starts. A progress mark: recovery rolls back
    /// Pending and Provisioning alike, so it need not be durable first.
    Provision,
    /// Provisioning → Attached: kernel work and extensions succeeded. Durable before the reply.
    Provisioned,
    /// Pending | Provisioning → RollingBack: a step failed, or recovery found the attach
    /// interrupted. A progress mark (recovery rolls back all three alike). A rollback that is
    /// itself retried stays RollingBack.
    Fail,
    /// RollingBack → gone: the kernel objects are deleted; record and addresses go together.
    RolledBack,
    /// Attached → Detaching: Detach, GC or a vanished netns. Durable before the first kernel
    /// call, so an interrupted detach is finished, never forgotten. A retried detach stays
    /// Detaching.
    Detach,
    /// Detaching → Reaping: the host link is down, off its bridge and in the reaper's link
    /// group. A progress mark (recovery finishes Detaching and Reaping alike).
    Retired,
    /// Reaping → gone: the reaper saw the link gone; record and addresses go together.
    Reaped,
}

/// Where a record is after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// The record stays, in this state.
    State(AttachmentState),
    /// The record is deleted and its addresses released.
    Gone,
}

/// What start-up recovery does with a record found in a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recovery {
    /// An interrupted attach: undo it.
    RollBack,
    /// An interrupted detach: finish it.
    FinishDetach,
    /// Attached: keep it if its netns is still the one it was attached in, else detach it.
    Verify,
}

/// The state of a new attachment: its intent (names, reserved addresses) is recorded.
pub(crate) const INITIAL: AttachmentState = Pending;

/// The diagram, as a function. `None` for an edge that does not exist.
pub(crate) fn next(from: AttachmentState, event: Event) -> Option<Next> {
    use Event::*;
    Some(match (from, event) {
        (Pending, Provision) => Next::State(Provisioning),
        (Provisioning, Provisioned) => Next::State(Attached),
        (Pending | Provisioning | RollingBack, Fail) => Next::State(RollingBack),
        (RollingBack, RolledBack) => Next::Gone,
        (Attached | Detaching, Detach) => Next::State(Detaching),
        (Detaching, Retired) => Next::State(Reaping),
        (Reaping, Reaped) => Next::Gone,
        _ => return None,
    })
}

/// Start-up recovery of a record in `state`.
pub(crate) fn recovery(state: AttachmentState) -> Recovery {
    match state {
        Pending | Provisioning | RollingBack => Recovery::RollBack,
        Detaching | Reaping => Recovery::FinishDetach,
        Attached => Recovery::Verify,
    }
}

/// The state of a record; an unknown state is a corrupt record.
pub(crate) fn state_of(rec: &AttachmentRecord) -> Result<AttachmentState> {
    records::state_from_record(rec)
}

/// Applies `event` to `rec`: sets the new state and `updated_at_ms`, or reports that the record
/// goes. An edge that is not in the diagram is an internal error naming the record.
pub(crate) fn advance(rec: &mut AttachmentRecord, event: Event, now_ms: i64) -> Result<Next> {
    let from = state_of(rec)?;
    let to = next(from, event).ok_or_else(|| Error::Corrupt {
        key: attachment_key(rec),
        detail: format!("no transition from {} on {event:?}", from.as_str()),
    })?;
    if let Next::State(state) = to {
        rec.state = EnumOrUnknown::new(records::state_to_record(state));
        rec.updated_at_ms = now_ms;
    }
    Ok(to)
}

/// Applies `event` to every record; returns the batch that writes them (committed durably or
/// applied as a progress mark by the caller, as the event's docs say).
pub(crate) fn advance_all(
    recs: &mut [AttachmentRecord],
    event: Event,
    now_ms: i64,
) -> Result<Batch> {
    let mut batch = Batch::new();
    for rec in recs.iter_mut() {
        advance(rec, event, now_ms)?;
        batch.put_attachment(rec.clone());
    }
    Ok(batch)
}

/// Checks, without changing `rec`, that `events` applied in order end it: the record may be
/// forgotten.
pub(crate) fn check_ends(rec: &AttachmentRecord, events: &[Event]) -> Result<()> {
    let mut rec = rec.clone();
    let mut last = Next::State(state_of(&rec)?);
    for event in events {
        last = advance(&mut rec, *event, 0)?;
    }
    match last {
        Next::Gone => Ok(()),
        Next::State(state) => Err(Error::Corrupt {
            key: attachment_key(&rec),
            detail: format!("{events:?} leave it {}", state.as_str()),
        }),
    }
}

#[cfg(test)]
mod tests;
