//! Work the server's threads do beside requests, for a program whose other work sleeps nearly
//! all the time (knid's periodic jobs and its signals): rather than a thread of its own that
//! waits for it, the I/O role watches its bell and its next due time in the same epoll wait, and
//! when either comes, a thread runs it as it would a request, after handing the I/O role on, so
//! reading, refusals and deadlines never wait for a chore however long it runs.

use std::ops::ControlFlow;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

/// What [`Server::with_chores`](super::Server::with_chores) runs beside the requests. One thread
/// at a time runs it.
pub trait Chores: Send {
    /// A socket or pipe that turns readable when the chores must run before they are due (a
    /// signal came, a job was woken). The server watches a copy of it; [`Chores::run`] must read
    /// what made it readable, or it runs again at once.
    fn bell(&self) -> BorrowedFd<'_>;

    /// Runs what is due. `Continue` with when they are next due (`None`: only when the bell
    /// rings); `Break` when the thread lent with [`Server::serve_here`](super::Server::serve_here)
    /// is to leave (the program stops): the chores run no more.
    fn run(&mut self) -> ControlFlow<(), Option<Instant>>;
}

/// The chores as the I/O role sees them: whether they run, and when they are due.
pub(super) struct Watch {
    /// The server's copy of [`Chores::bell`].
    pub(super) bell: OwnedFd,
    /// When they are due next, while they do not run.
    pub(super) next: Option<Instant>,
    /// A thread runs them (or is about to): neither the bell nor the time starts them again
    /// until it is done.
    pub(super) running: bool,
}

impl Watch {
    /// Watching `bell`; due at once, so that the first run says when they are due next.
    pub(super) fn new(bell: OwnedFd) -> Self {
        Self {
            bell,
            next: Some(Instant::now()),
            running: false,
        }
    }

    /// How long the I/O role may wait before they are due, rounded up to whole milliseconds (a
    /// round due in 0.4 ms must not make a 0 ms wait spin until it is).
    pub(super) fn wait(&self) -> Option<Duration> {
        let next = self.next.filter(|_| !self.running)?;
        let left = next.saturating_duration_since(Instant::now());
        Some(Duration::from_millis(
            u64::try_from(left.as_micros().div_ceil(1000)).unwrap_or(u64::MAX),
        ))
    }

    /// Whether they are to run now, after a wait in which the bell `rang` or not; when so, they
    /// count as running from here on.
    pub(super) fn start(&mut self, rang: bool) -> bool {
        let due = rang || self.next.is_some_and(|next| next <= Instant::now());
        if self.running || !due {
            return false;
        }
        self.running = true;
        self.next = None;
        true
    }
}
