//! The signals knid acts on. signal-hook's handlers write a byte on a socket; so do the periodic
//! jobs when one is woken (the same socket's "bell"). The API server watches it in its epoll
//! wait, and the thread that runs knid's chores then reads what came ([`Signals::take`]).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::backend::{Handle, SignalDelivery};
use signal_hook::iterator::exfiltrator::SignalOnly;

/// What came since the last look.
pub enum Seen {
    /// Nothing for knid: a job was woken, or nothing at all.
    Nothing,
    /// SIGHUP: reload.
    Reload,
    /// SIGTERM or SIGINT (the number), or the delivery was closed (`None`): stop.
    Stop(Option<i32>),
}

/// SIGTERM, SIGINT and SIGHUP, registered for as long as this lives.
pub struct Signals {
    delivery: SignalDelivery<UnixStream, SignalOnly>,
    /// Another handle on the write end, for the jobs' wake-ups.
    bell: UnixStream,
}

impl Signals {
    /// Registers the handlers: from here on these signals are queued, not fatal.
    pub fn new() -> std::io::Result<Self> {
        let (read, write) = UnixStream::pair()?;
        let bell = write.try_clone()?;
        let delivery =
            SignalDelivery::with_pipe(read, write, SignalOnly, [SIGTERM, SIGINT, SIGHUP])?;
        Ok(Self { delivery, bell })
    }

    /// A handle whose `close` reads as a stop (as SIGTERM would, with no signal) and rings.
    pub fn handle(&self) -> Handle {
        self.delivery.handle()
    }

    /// The write end for the jobs' wake-ups (see [`knid_core::Runtime::ring_jobs_on`]).
    pub fn bell(&self) -> std::io::Result<OwnedFd> {
        Ok(self.bell.try_clone()?.into())
    }

    /// The read end: readable once a signal or a wake-up came.
    pub fn readable(&self) -> BorrowedFd<'_> {
        self.delivery.get_read().as_fd()
    }

    /// What came, without waiting; reads the socket empty.
    pub fn take(&mut self) -> Seen {
        if self.delivery.handle().is_closed() {
            return Seen::Stop(None);
        }
        let mut seen = Seen::Nothing;
        for signal in self.delivery.pending() {
            match signal {
                SIGHUP => seen = Seen::Reload,
                other => return Seen::Stop(Some(other)),
            }
        }
        seen
    }
}
