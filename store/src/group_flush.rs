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
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Barrier};
    use std::thread;
    use std::time::Duration;

    use super::*;

    #[test]
    fn lone_caller_flushes_every_time() {
        let group = GroupFlush::default();
        for _ in 0..3 {
            group.sync(|| Ok::<(), ()>(())).unwrap();
        }
        assert_eq!(group.flushes(), 3);
    }

    #[test]
    fn callers_arriving_during_a_flush_share_the_next_one() {
        const THREADS: usize = 8;
        let group = Arc::new(GroupFlush::default());
        let ran = Arc::new(AtomicU64::new(0));
        let start = Arc::new(Barrier::new(THREADS));
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let (group, ran, start) = (group.clone(), ran.clone(), start.clone());
                thread::spawn(move || {
                    start.wait();
                    group
                        .sync(|| {
                            ran.fetch_add(1, Ordering::SeqCst);
                            thread::sleep(Duration::from_millis(100));
                            Ok::<(), ()>(())
                        })
                        .unwrap();
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let flushes = ran.load(Ordering::SeqCst);
        assert_eq!(group.flushes(), flushes);
        assert!(
            flushes < THREADS as u64,
            "{flushes} flushes for {THREADS} callers"
        );
    }

    #[test]
    fn failed_flush_is_reported_and_the_next_caller_flushes_again() {
        let group = GroupFlush::default();
        assert_eq!(group.sync(|| Err("disk")), Err("disk"));
        assert_eq!(group.flushes(), 0);
        let mut ran = false;
        group
            .sync(|| {
                ran = true;
                Ok::<(), &str>(())
            })
            .unwrap();
        assert!(ran);
        assert_eq!(group.flushes(), 1);
    }
}
