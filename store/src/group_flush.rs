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
    /// Tickets of [`GroupFlush::ticket_soon`] not yet waited for (or given up).
    soon: usize,
}

/// Coordinates flushes between committing threads.
#[derive(Debug, Default)]
pub(crate) struct GroupFlush {
    state: Mutex<State>,
    done: Condvar,
}

impl GroupFlush {
    /// A ticket like [`GroupFlush::ticket`], to be waited for later and then handed back with
    /// [`GroupFlush::done_soon`]; and whether it is the only one: no other such ticket is
    /// outstanding. Another one's wait makes this one durable too, so only a lone ticket is
    /// worth a flush started at once (after the one running, if any).
    pub(crate) fn ticket_soon(&self) -> (u64, bool) {
        let mut state = self.lock();
        state.issued += 1;
        let alone = state.soon == 0;
        state.soon += 1;
        (state.issued, alone)
    }

    /// Hands back a ticket of [`GroupFlush::ticket_soon`].
    pub(crate) fn done_soon(&self) {
        let mut state = self.lock();
        state.soon = state.soon.saturating_sub(1);
    }

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
