//! The lookout: lets the I/O role wait unheld while the thread that read a lone request runs it
//! ([`super::pool`]), so that the request wakes no other thread. It is a second epoll instance
//! that one idle follower waits on. It watches:
//! - the role's own epoll instance, readable when events wait for the role: one-shot, and only
//!   while the role is parked;
//! - a timer set to the role's next deadline while it is parked (a connection's read or write
//!   timeout, the chores, accepts paused);
//! - a bell that wakes that follower for anything else (work in line, the server stopping).
//!
//! Parking costs the thread that parks two system calls and wakes no thread. The kernel wakes the
//! follower only when an event or the deadline comes before that thread takes the role back.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::time::Duration;

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};

const ROLE: u64 = 0;
const TIMER: u64 = 1;
const BELL: u64 = 2;

/// The shortest timer set: a zero would disarm it.
const SOONEST: Duration = Duration::from_micros(1);

/// See the module docs.
#[derive(Debug)]
pub(super) struct Lookout {
    epoll: Epoll,
    /// The role's epoll instance (a duplicate of its descriptor).
    role: OwnedFd,
    timer: TimerFd,
    bell: EventFd,
}

/// Why [`Lookout::wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sighted {
    /// The parked role has events waiting or a deadline due, or the bell rang.
    Something,
    /// The wait's time ran out.
    Nothing,
}

impl Lookout {
    /// A lookout over the role whose epoll instance is `role`, not watching it yet.
    pub(super) fn new(role: BorrowedFd<'_>) -> io::Result<Lookout> {
        let role = role.try_clone_to_owned()?;
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
        let timer = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_CLOEXEC | TimerFlags::TFD_NONBLOCK,
        )?;
        let bell = EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)?;
        epoll.add(&role, EpollEvent::new(EpollFlags::empty(), ROLE))?;
        epoll.add(&timer, EpollEvent::new(EpollFlags::EPOLLIN, TIMER))?;
        epoll.add(&bell, EpollEvent::new(EpollFlags::EPOLLIN, BELL))?;
        Ok(Lookout {
            epoll,
            role,
            timer,
            bell,
        })
    }

    /// Watches the role, parked now, until the next [`Lookout::unpark`]: its events, and its
    /// deadline `wakes_in` from now when it has one.
    pub(super) fn park(&self, wakes_in: Option<Duration>) -> io::Result<()> {
        if let Some(wait) = wakes_in {
            let at = TimeSpec::from_duration(wait.max(SOONEST));
            self.timer
                .set(Expiration::OneShot(at), TimerSetTimeFlags::empty())?;
        }
        let mut event = EpollEvent::new(EpollFlags::EPOLLIN | EpollFlags::EPOLLONESHOT, ROLE);
        self.epoll.modify(&self.role, &mut event)?;
        Ok(())
    }

    /// Stops watching the role: a thread holds it again.
    pub(super) fn unpark(&self) {
        let mut event = EpollEvent::new(EpollFlags::empty(), ROLE);
        let unwatched = self.epoll.modify(&self.role, &mut event);
        // Disarming also clears an expiry not read yet.
        let unset = self.timer.unset();
        if let Err(e) = unwatched.and(unset) {
            // The follower on the lookout wakes once for nothing, and looks again.
            log::debug!("api: lookout: {e}");
        }
    }

    /// Wakes the follower waiting on the lookout.
    pub(super) fn ring(&self) {
        if let Err(e) = self.bell.write(1) {
            // EAGAIN: the counter is full, so a ring is pending anyway.
            log::debug!("api: lookout bell: {e}");
        }
    }

    /// Waits up to `timeout` for the parked role or the bell; a ring is taken. An interrupted
    /// wait counts as something seen (the caller looks and waits again); an error is the
    /// lookout's own.
    pub(super) fn wait(&self, timeout: Duration) -> io::Result<Sighted> {
        let mut events = [EpollEvent::empty(); 3];
        let timeout = EpollTimeout::try_from(timeout).unwrap_or(EpollTimeout::MAX);
        match self.epoll.wait(&mut events, timeout) {
            Ok(0) => Ok(Sighted::Nothing),
            Ok(n) => {
                if events[..n].iter().any(|e| e.data() == BELL) {
                    // Drained: the bell is level-triggered.
                    let _ = self.bell.read();
                }
                Ok(Sighted::Something)
            }
            Err(nix::Error::EINTR) => Ok(Sighted::Something),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests;
