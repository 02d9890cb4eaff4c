//! The lifecycle of one attachment (docs/architecture.md#the-attachment-lifecycle-attach--detach--gone),
//! and nothing else — its states, events and edges, what a crash in each state leads to, and
//! how a state is written in the record. The operations on it are the files beside this one.
//!
//! ```text
//!  Attach                       kernel + extensions ok (or, at start-up, found complete)
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
//! progress marks recovery does not depend on, is said at each [`Event`]. A record whose state
//! (or any other value) cannot be read has no place in the diagram: it is discarded
//! ([`discard`]) by Detach or GC, never advanced.

use knid_store::{AttachmentRecord, AttachmentState as RecState, Batch};
use protobuf::EnumOrUnknown;

use crate::error::{Error, Result};
use AttachmentState::*;

pub(crate) mod attach;
pub(crate) mod check;
pub(crate) mod detach;
pub(crate) mod discard;
pub(crate) mod reaper;
pub(crate) mod reaper_queue;
pub(crate) mod roll_forward;
pub(crate) mod rollback;
mod stopwatch;
pub(crate) mod teardown;

/// Lifecycle state of one attachment (docs/architecture.md#the-attachment-lifecycle-attach--detach--gone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttachmentState {
    /// Intent recorded (names and IPs reserved), no kernel object yet.
    Pending,
    /// Kernel objects being created.
    Provisioning,
    /// Fully attached and durable.
    Attached,
    /// Detach in progress.
    Detaching,
    /// Links handed to the reaper; IPs released once they are gone.
    Reaping,
    /// A failed attach being undone.
    RollingBack,
}

impl AttachmentState {
    /// Lower-case name used in the API and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Provisioning => "provisioning",
            Self::Attached => "attached",
            Self::Detaching => "detaching",
            Self::Reaping => "reaping",
            Self::RollingBack => "rolling-back",
        }
    }
}

/// The key an attachment is stored under, for messages.
pub fn attachment_key(rec: &AttachmentRecord) -> String {
    format!("{}/{}", rec.sandbox_id, rec.ifname)
}

/// Record form of a state.
pub fn state_to_record(state: AttachmentState) -> RecState {
    match state {
        AttachmentState::Pending => RecState::PENDING,
        AttachmentState::Provisioning => RecState::PROVISIONING,
        AttachmentState::Attached => RecState::ATTACHED,
        AttachmentState::Detaching => RecState::DETACHING,
        AttachmentState::Reaping => RecState::REAPING,
        AttachmentState::RollingBack => RecState::ROLLING_BACK,
    }
}

pub(crate) fn state_from_record(rec: &AttachmentRecord) -> Result<AttachmentState> {
    Ok(match rec.state.enum_value() {
        Ok(RecState::PENDING) => AttachmentState::Pending,
        Ok(RecState::PROVISIONING) => AttachmentState::Provisioning,
        Ok(RecState::ATTACHED) => AttachmentState::Attached,
        Ok(RecState::DETACHING) => AttachmentState::Detaching,
        Ok(RecState::REAPING) => AttachmentState::Reaping,
        Ok(RecState::ROLLING_BACK) => AttachmentState::RollingBack,
        other => {
            return Err(Error::Corrupt {
                key: attachment_key(rec),
                detail: format!("unknown state {other:?}"),
            })
        }
    })
}

/// What happens to an attachment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// Pending → Provisioning: the kernel work starts. Applied with the intent, before the
    /// intent's flush: an attach whose kernel work completed is therefore Provisioning on disk,
    /// never Pending, and only Provisioning is rolled forward. The first kernel call (the veth's
    /// creation) does not wait for it; every later one does.
    Provision,
    /// Provisioning → Attached: kernel work and extensions succeeded, the completion marks set.
    /// Durable before the reply unless the intent said recovery may roll the attach forward
    /// (`roll_forward`): then it is applied and becomes durable with the next flush, the reply
    /// going out at once (docs/architecture.md#start-up-and-crash-recovery says why no
    /// answered attach is lost).
    Provisioned,
    /// Provisioning → Attached at start-up: an attach interrupted after its kernel work was
    /// complete and verified (every host link carrying the completion mark, the pod side as
    /// recorded, the netns the one it was attached in), whose intent allowed it
    /// ([`roll_forward`]). Durable before knid serves.
    RolledForward,
    /// Pending | Provisioning → RollingBack: a step failed, or recovery found the attach
    /// interrupted. Durable before the first undo, so a failed attach is never rolled forward
    /// (the flush is paid on failures only). A rollback that is itself retried stays
    /// RollingBack.
    Fail,
    /// RollingBack → gone: the kernel objects are deleted; record and addresses go together.
    RolledBack,
    /// Attached → Detaching: Detach, GC or a vanished netns. Durable before the reply, and for
    /// any kind but veths before the first kernel call, so an interrupted detach is finished,
    /// never forgotten. A detach of veths flushes it while it retires their host links into
    /// the reaper's group, its first kernel effect: a crash before the flush completed leaves
    /// Attached with such a link, which start-up recovery finds and finishes as a detach. A
    /// retried detach stays Detaching.
    Detach,
    /// Detaching → Reaping: the pod side is released (a veth's pod end down) and the host link
    /// is off its bridge and in the reaper's link group. A progress mark (recovery finishes
    /// Detaching and Reaping alike).
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
    /// An interrupted attach: undo it. Start-up recovery first rolls forward the one whose
    /// kernel work it finds complete, when its intent allows it ([`roll_forward`]); a running
    /// knid never does (a finished attach is Attached in its store).
    RollBack,
    /// An interrupted detach: finish it.
    FinishDetach,
    /// Attached: keep it if its netns is still the one it was attached in, else detach it; a
    /// veth whose host link is in the reaper's group is a detach that ran ahead of its lost
    /// mark: finish it.
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
        (Provisioning, RolledForward) => Next::State(Attached),
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
    state_from_record(rec)
}

/// Applies `event` to `rec`: sets the new state and `updated_at_ms`, or reports that the record
/// goes. An edge that is not in the diagram is an internal error naming the record.
pub(crate) fn advance(rec: &mut AttachmentRecord, event: Event, now_ms: i64) -> Result<Next> {
    let to = edge(rec, state_of(rec)?, event)?;
    if let Next::State(state) = to {
        rec.state = EnumOrUnknown::new(state_to_record(state));
        rec.updated_at_ms = now_ms;
    }
    Ok(to)
}

/// Where `event` leads `rec` from `from`; an edge that is not in the diagram is an internal
/// error naming the record.
fn edge(rec: &AttachmentRecord, from: AttachmentState, event: Event) -> Result<Next> {
    next(from, event).ok_or_else(|| Error::Corrupt {
        key: attachment_key(rec),
        detail: format!("no transition from {} on {event:?}", from.as_str()),
    })
}

/// Applies `event` to every record; [`writes`] gives the batch that writes them (committed
/// durably or applied as a progress mark by the caller, as the event's docs say).
pub(crate) fn advance_all(recs: &mut [AttachmentRecord], event: Event, now_ms: i64) -> Result<()> {
    for rec in recs.iter_mut() {
        advance(rec, event, now_ms)?;
    }
    Ok(())
}

/// The batch that writes `recs` as they are, borrowing them (no copy).
pub(crate) fn writes(recs: &[AttachmentRecord]) -> Batch<'_> {
    let mut batch = Batch::new();
    for rec in recs {
        batch.put_attachment(rec);
    }
    batch
}

/// Checks, without changing `rec`, that `events` applied in order end it: the record may be
/// forgotten.
pub(crate) fn check_ends(rec: &AttachmentRecord, events: &[Event]) -> Result<()> {
    let mut state = state_of(rec)?;
    let mut last = Next::State(state);
    for event in events {
        last = edge(rec, state, *event)?;
        if let Next::State(to) = last {
            state = to;
        }
    }
    match last {
        Next::Gone => Ok(()),
        Next::State(state) => Err(Error::Corrupt {
            key: attachment_key(rec),
            detail: format!("{events:?} leave it {}", state.as_str()),
        }),
    }
}

#[cfg(test)]
mod tests;
