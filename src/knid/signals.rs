//! The signals knid acts on, delivered to the main thread between the periodic jobs' rounds: the
//! main thread runs those jobs ([`knid_core::Runtime::run_jobs`]) and waits for both on one
//! socket. signal-hook's handlers write a byte on it; so do the jobs when one is woken.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::backend::{Handle, SignalDelivery};
use signal_hook::iterator::exfiltrator::SignalOnly;

/// What a wait saw.
pub enum Seen {
    /// Nothing for knid: the timeout passed, or a job was woken.
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

    /// A handle whose `close` ends the waiting (as SIGTERM would, with no signal).
    pub fn handle(&self) -> Handle {
        self.delivery.handle()
    }

    /// The write end for the jobs' wake-ups (see [`knid_core::Runtime::run_jobs`]).
    pub fn bell(&self) -> std::io::Result<OwnedFd> {
        Ok(self.bell.try_clone()?.into())
    }

    /// Waits up to `timeout` (`None`: for good) for a signal or a wake-up.
    pub fn wait(&mut self, timeout: Option<Duration>) -> Seen {
        let timeout = match timeout {
            // Rounded up: a round due in 0.4 ms must not make a 0 ms poll spin until it is.
            Some(t) => {
                PollTimeout::try_from(t.as_micros().div_ceil(1000)).unwrap_or(PollTimeout::MAX)
            }
            None => PollTimeout::NONE,
        };
        let mut fds = [PollFd::new(
            self.delivery.get_read().as_fd(),
            PollFlags::POLLIN,
        )];
        // EINTR and the like: one spurious wake-up, then the caller waits again.
        let _ = poll(&mut fds, timeout);
        if self.delivery.handle().is_closed() {
            return Seen::Stop(None);
        }
        let mut seen = Seen::Nothing;
        for signal in self.delivery.pending() {
            match signal {
                SIGHUP => {
                    if matches!(seen, Seen::Nothing) {
                        seen = Seen::Reload;
                    }
                }
                other => return Seen::Stop(Some(other)),
            }
        }
        seen
    }
}
