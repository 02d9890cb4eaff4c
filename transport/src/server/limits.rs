//! What the server and each connection may hold, and how long a peer may keep them waiting.

use std::time::Duration;

use super::conn::Limits;

/// Most threads running requests at once; requests beyond them wait their connection's turn.
/// One more thread keeps the I/O role meanwhile.
pub const MAX_HANDLER_THREADS: usize = 64;
/// Requests one connection may have unanswered; past them it is not read until one is answered.
pub const MAX_IN_FLIGHT_PER_CONNECTION: usize = 128;
/// How long a peer may read none of its waiting answers before it is disconnected.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a peer may take to finish a frame it began.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// What one connection may hold before it stops being read.
pub(super) const LIMITS: Limits = Limits {
    in_flight: MAX_IN_FLIGHT_PER_CONNECTION,
    in_flight_bytes: 4 << 20,
    unread_answers: 1 << 20,
};

/// The deadlines of peers that stop reading or writing ([`WRITE_TIMEOUT`], [`READ_TIMEOUT`];
/// shorter in tests).
#[derive(Debug, Clone, Copy)]
pub(super) struct Timeouts {
    pub(super) write: Duration,
    pub(super) read: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            write: WRITE_TIMEOUT,
            read: READ_TIMEOUT,
        }
    }
}
