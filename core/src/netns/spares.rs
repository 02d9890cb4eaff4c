//! Spare network namespaces, made ahead by a background thread: creating one (unshare on a
//! scoped thread) costs more than the rest of CreateNetns together, so a few are kept ready,
//! pinned by fd and mounted nowhere (a crash loses them with the process).
//!
//! The refiller runs only while spares are missing: started at start-up and whenever a spare is
//! taken, it ends once the pool is full, so an idle knid holds no thread for it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use knid_netops::NetnsHandle;

use crate::error::{Error, Result};
use crate::locks::LockExt;
use crate::shared::relay::Relay;

/// How long the refiller waits after a spare was taken.
const REFILL_DELAY: Duration = Duration::from_millis(2);

/// Spare namespaces, refilled by a background thread.
pub(crate) struct Spares {
    target: usize,
    pool: Arc<Mutex<Pool>>,
}

struct Pool {
    ready: Vec<NetnsHandle>,
    /// A refiller runs (or is about to).
    refilling: bool,
    /// The refiller threads, one at a time.
    refiller: Relay,
    stopped: bool,
}

impl Spares {
    /// Keeps `target` spare namespaces (none, and no thread, when 0).
    pub fn start(target: usize) -> Result<Self> {
        let spares = Self {
            target,
            pool: Arc::new(Mutex::new(Pool {
                ready: Vec::with_capacity(target),
                refilling: false,
                refiller: Relay::new("knid-netns-spares"),
                stopped: false,
            })),
        };
        if target > 0 {
            let mut pool = spares.pool.acquire();
            spares
                .refill(&mut pool, Duration::ZERO)
                .map_err(|e| Error::Unavailable(format!("spawn netns refiller: {e}")))?;
        }
        Ok(spares)
    }

    /// A fresh namespace: a spare when there is one, else made now.
    pub(crate) fn take(&self) -> Result<NetnsHandle> {
        let spare = {
            let mut pool = self.pool.acquire();
            let spare = pool.ready.pop();
            if self.target > 0 && !pool.refilling && !pool.stopped {
                // Making a namespace takes a core for ~0.4 ms: the refiller lets the
                // CreateNetns that took the spare answer first instead of competing with it.
                if let Err(e) = self.refill(&mut pool, REFILL_DELAY) {
                    log::warn!("cannot start the netns refiller: {e}");
                }
            }
            spare
        };
        match spare {
            Some(ns) => Ok(ns),
            None => knid_netops::netns::create_unbound().map_err(|source| Error::Netns {
                path: PathBuf::from("(new netns)"),
                source,
            }),
        }
    }

    /// Starts a refiller that fills the pool after `delay`, then ends.
    fn refill(&self, pool: &mut Pool, delay: Duration) -> std::io::Result<()> {
        let (shared, target) = (Arc::clone(&self.pool), self.target);
        pool.refiller.start(move || {
            std::thread::sleep(delay);
            fill(&shared, target);
        })?;
        pool.refilling = true;
        Ok(())
    }

    /// Stops the refiller and drops the spares (their namespaces die with their fds).
    pub fn stop(&self) {
        let refiller = {
            let mut pool = self.pool.acquire();
            pool.stopped = true;
            pool.refiller.take()
        };
        refiller.join();
        self.pool.acquire().ready.clear();
    }
}

/// The refiller's work: namespaces made until the pool holds `target`, or until a creation
/// fails (CreateNetns makes its own meanwhile; the next take tries again).
fn fill(shared: &Mutex<Pool>, target: usize) {
    loop {
        {
            let mut pool = shared.acquire();
            if pool.stopped || pool.ready.len() >= target {
                pool.refilling = false;
                return;
            }
        }
        match knid_netops::netns::create_unbound() {
            Ok(ns) => shared.acquire().ready.push(ns),
            Err(e) => {
                log::warn!("prepare a spare netns: {e}");
                shared.acquire().refilling = false;
                return;
            }
        }
    }
}
