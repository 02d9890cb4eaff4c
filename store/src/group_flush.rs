//! Group commit: concurrent committers share one flush.
//!
//! Each committer takes a ticket after its writes are applied. A flush covers every ticket issued
//! before it started, so a committer that finds a flush in progress that started before its ticket
//! waits for the next one, which a single thread then runs on behalf of all who waited.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

#[derive(Debug, Default)]
struct State {
    /// Tickets handed out so far.
    issued: u64,
    /// Every ticket up to this one is durable.
    flushed: u64,
    /// A flush is running (outside the lock).
    flushing: bool,
    /// Flushes that succeeded.
    flushes: u64,
}

/// Coordinates flushes between committing threads.
#[derive(Debug, Default)]
pub(crate) struct GroupFlush {
    state: Mutex<State>,
    done: Condvar,
}

impl GroupFlush {
    /// Returns once everything applied before this call is durable, running `flush` itself only if
    /// no finished or running flush already covers the caller.
    pub(crate) fn sync<E>(&self, flush: impl FnOnce() -> Result<(), E>) -> Result<(), E> {
        let ticket = self.ticket();
        self.wait(ticket, flush)
    }

    /// A ticket for everything applied before this call: [`GroupFlush::wait`] on it later.
    pub(crate) fn ticket(&self) -> u64 {
        let mut state = self.lock();
        state.issued += 1;
        state.issued
    }

    /// Returns once `ticket` is durable, running `flush` itself only if no finished or running
    /// flush already covers it.
    pub(crate) fn wait<E>(
        &self,
        ticket: u64,
        flush: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), E> {
        let mut state = self.lock();
        loop {
            if state.flushed >= ticket {
                return Ok(());
            }
            if !state.flushing {
                break;
            }
            state = self
                .done
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.flushing = true;
        let mut in_flight = InFlight {
            group: self,
            covers: state.issued,
            ok: false,
        };
        drop(state);
        let result = flush();
        in_flight.ok = result.is_ok();
        drop(in_flight);
        result
    }

    /// Flushes that succeeded since the store was opened.
    pub(crate) fn flushes(&self) -> u64 {
        self.lock().flushes
    }

    // The counters stay consistent even if a holder panicked: every update is a single assignment.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A running flush; ends it (waking the waiters) even if the flush panics.
struct InFlight<'a> {
    group: &'a GroupFlush,
    covers: u64,
    ok: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut state = self.group.lock();
        state.flushing = false;
        if self.ok {
            state.flushed = state.flushed.max(self.covers);
            state.flushes += 1;
        }
        drop(state);
        // On failure a waiter retries the flush itself and gets its own error.
        self.group.done.notify_all();
    }
}

#[cfg(test)]
mod tests;
