//! Spare network namespaces, made ahead by a background thread: creating one (unshare on a
//! scoped thread) costs more than the rest of CreateNetns together, so a few are kept ready,
//! pinned by fd and mounted nowhere (a crash loses them with the process).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};
use knid_netops::NetnsHandle;

use crate::error::{Error, Result};
use crate::locks::LockExt;

/// How long the refiller waits after a spare was taken.
const REFILL_DELAY: std::time::Duration = std::time::Duration::from_millis(2);

/// Spare namespaces, refilled by a background thread.
pub(crate) struct Spares {
    ready: Arc<Mutex<Vec<NetnsHandle>>>,
    /// Wakes the refiller; dropped to stop it.
    wake: Mutex<Option<Sender<()>>>,
    refiller: Mutex<Option<JoinHandle<()>>>,
}

impl Spares {
    /// Keeps `target` spare namespaces (none, and no thread, when 0).
    pub fn start(target: usize) -> Result<Self> {
        let ready = Arc::new(Mutex::new(Vec::with_capacity(target)));
        if target == 0 {
            return Ok(Self {
                ready,
                wake: Mutex::new(None),
                refiller: Mutex::new(None),
            });
        }
        let (wake, woken) = bounded(1);
        let pool = Arc::clone(&ready);
        let refiller = std::thread::Builder::new()
            .name("knid-netns-spares".into())
            .spawn(move || refill(&pool, target, &woken))
            .map_err(|e| Error::Unavailable(format!("spawn netns refiller: {e}")))?;
        Ok(Self {
            ready,
            wake: Mutex::new(Some(wake)),
            refiller: Mutex::new(Some(refiller)),
        })
    }

    /// A fresh namespace: a spare when there is one, else made now.
    pub(crate) fn take(&self) -> Result<NetnsHandle> {
        let spare = self.ready.acquire().pop();
        if let Some(tx) = self.wake.acquire().as_ref() {
            // Full means a wake-up is already pending.
            if let Err(TrySendError::Disconnected(())) = tx.try_send(()) {
                log::warn!("netns refiller stopped");
            }
        }
        match spare {
            Some(ns) => Ok(ns),
            None => knid_netops::netns::create_unbound().map_err(|source| Error::Netns {
                path: PathBuf::from("(new netns)"),
                source,
            }),
        }
    }

    /// Stops the refiller and drops the spares (their namespaces die with their fds).
    pub fn stop(&self) {
        drop(self.wake.acquire().take());
        if let Some(thread) = self.refiller.acquire().take() {
            if thread.join().is_err() {
                log::error!("the netns refiller panicked");
            }
        }
        self.ready.acquire().clear();
    }
}

fn refill(pool: &Mutex<Vec<NetnsHandle>>, target: usize, woken: &Receiver<()>) {
    loop {
        while pool.acquire().len() < target {
            match knid_netops::netns::create_unbound() {
                Ok(ns) => pool.acquire().push(ns),
                Err(e) => {
                    // CreateNetns makes its own meanwhile; try again at the next take.
                    log::warn!("prepare a spare netns: {e}");
                    break;
                }
            }
        }
        if woken.recv().is_err() {
            return;
        }
        // Making a namespace takes a core for ~0.4 ms: let the CreateNetns that took the spare
        // answer first instead of competing with it.
        std::thread::sleep(REFILL_DELAY);
    }
}
