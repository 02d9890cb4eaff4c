//! Guard installs that meet at the guard lock share one nf_tables transaction.
//!
//! Linux (to 6.18 at least) validates every base chain of a table at the commit of a
//! transaction that adds a rule with a verdict or a named counter, and a guard's rules have
//! both: a transaction's cost grows with the guards already in the table (`strace -T` of one
//! guard's commit: 0.12–0.18 ms in an empty table, ~3 ms with 1,000 guards, 18–25 ms with
//! 5,000), and it holds the lock every other guard install waits for. Attaches that queue
//! behind one install therefore hand their guards to whichever of them takes the lock next,
//! which commits them all at once: one validation for the lot, not one each.

use std::sync::Mutex;

use crate::error::Result;
use crate::locks::LockExt;

/// The guards waiting for the lock, and what became of those a commit took.
pub(super) struct SharedCommit<T> {
    state: Mutex<State<T>>,
}

struct State<T> {
    next: u64,
    queued: Vec<(u64, T)>,
    /// Tickets a commit of others installed.
    done: Vec<u64>,
}

impl<T: Clone> SharedCommit<T> {
    pub const fn new() -> Self {
        Self {
            state: Mutex::new(State {
                next: 0,
                queued: Vec::new(),
                done: Vec::new(),
            }),
        }
    }

    /// Installs `item` with `commit`, holding `lock` as every other user of the table does:
    /// the first caller to hold it commits every item queued by then, its own among them. When
    /// a shared commit fails, each of its callers commits its own item alone, so an error is
    /// always the item's own; a caller whose item a commit it did not make took and never
    /// settled (that commit panicked) does the same.
    pub fn run(
        &self,
        lock: &Mutex<()>,
        item: T,
        commit: impl Fn(&[T]) -> Result<()>,
    ) -> Result<()> {
        let ticket = {
            let mut state = self.state.acquire();
            let ticket = state.next;
            state.next += 1;
            state.queued.push((ticket, item.clone()));
            ticket
        };
        let _held = lock.acquire();
        let batch = {
            let mut state = self.state.acquire();
            if let Some(at) = state.done.iter().position(|t| *t == ticket) {
                state.done.swap_remove(at);
                return Ok(());
            }
            if !state.queued.iter().any(|(t, _)| *t == ticket) {
                // Taken by a commit that failed or never finished: alone.
                Vec::new()
            } else {
                std::mem::take(&mut state.queued)
            }
        };
        if batch.len() < 2 {
            return commit(std::slice::from_ref(&item));
        }
        let items: Vec<T> = batch.iter().map(|(_, i)| i.clone()).collect();
        match commit(&items) {
            Ok(()) => {
                log::debug!("antispoof: {} guards in one transaction", items.len());
                let mut state = self.state.acquire();
                state
                    .done
                    .extend(batch.iter().map(|(t, _)| *t).filter(|t| *t != ticket));
                Ok(())
            }
            Err(e) => {
                log::debug!(
                    "antispoof: {} guards in one transaction failed ({}); each goes alone",
                    items.len(),
                    e.chain()
                );
                commit(std::slice::from_ref(&item))
            }
        }
    }

    /// How many items wait for the lock (tests).
    #[cfg(test)]
    pub fn queued(&self) -> usize {
        self.state.acquire().queued.len()
    }
}
