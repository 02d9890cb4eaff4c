//! The reaper's queue as the shared context holds it: the messages the reaper thread takes and
//! the length of its backlog.

use std::sync::atomic::AtomicU64;

use crossbeam_channel::Sender;
use knid_store::AttachmentRecord;

/// Messages to the reaper thread.
pub(crate) enum Msg {
    /// Attachments in state Reaping whose host links are in the reaper's group.
    Reap(Vec<AttachmentRecord>),
    /// Reply once everything queued before this message is reaped (or has failed a round).
    Flush(Sender<()>),
    /// Finish what is queued, then exit.
    Stop,
}

/// The reaper's queue length, for [`wait_idle`] and the metrics.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Attachments handed to the reaper and not yet reaped.
    pub queued: AtomicU64,
}
