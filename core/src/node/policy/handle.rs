//! What the attach path, the status answers and the metrics share with the policy engine:
//! where policy stands ([`Summary`]), the queue of this node's pod changes, and the engine
//! itself, under a lock: it runs on whichever thread has work for it (the cluster thread, or an
//! attach waiting for its pod's isolation).

use std::sync::{Arc, Mutex, OnceLock};

use crossbeam_channel::{bounded, Receiver, Sender};
use knid_netops::nft::PolicyState;
use knid_store::Store;

use super::engine::{Change, Engine};
use super::objects::World;
use super::summary::Summary;
use crate::error::{Error, Result};
use crate::locks::LockExt;

/// Messages in flight from attaches and the reaper.
const QUEUE: usize = 1024;

/// What the attach path and the status answers share with the policy engine.
pub struct Policies {
    summary: Arc<Mutex<Summary>>,
    changed: Sender<Change>,
    changes: Receiver<Change>,
    engine: OnceLock<Mutex<Engine>>,
}

impl std::fmt::Debug for Policies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policies").finish_non_exhaustive()
    }
}

impl Policies {
    /// The handle before the engine starts.
    pub fn new() -> Policies {
        let (changed, changes) = bounded(QUEUE);
        Policies {
            summary: Arc::default(),
            changed,
            changes,
            engine: OnceLock::new(),
        }
    }

    /// The pods on this node changed: returns once the table has them, so an attached pod is
    /// isolated before its first packet. The engine runs here, on the caller's thread, as soon
    /// as no other thread runs it: an attach waits for a policy step in progress at most,
    /// never for the cluster thread's other work (a Node list applied to a thousand routes).
    /// Changes queued meanwhile by other attaches are applied in the same transaction, and
    /// theirs answered with it.
    pub fn pods_changed(&self) {
        let Some(engine) = self.engine.get() else {
            return;
        };
        let (ack, acked) = bounded(1);
        if self.changed.try_send(Some(ack)).is_err() {
            return;
        }
        let mut engine = engine.acquire();
        // Applied while this attach waited for the lock, with another's change.
        if acked.try_recv().is_err() {
            engine.serve(false);
        }
    }

    /// The pods changed; does not wait: the cluster thread applies it.
    pub fn nudge(&self) {
        let _ = self.changed.try_send(None);
    }

    /// Where policy stands.
    pub fn summary(&self) -> Summary {
        self.summary.acquire().clone()
    }

    /// Starts the engine, once, from what [`super::engine::restore`] installed.
    pub(crate) fn start_engine(
        &self,
        store: Arc<Store>,
        restored: Option<(World, PolicyState)>,
    ) -> Result<()> {
        let engine = Engine::new(
            store,
            Arc::clone(&self.summary),
            self.changes.clone(),
            restored,
        );
        self.engine
            .set(Mutex::new(engine))
            .map_err(|_| Error::Unavailable("the policy engine started twice".into()))
    }

    /// The engine, once started.
    pub(super) fn engine(&self) -> Option<&Mutex<Engine>> {
        self.engine.get()
    }

    /// Where the pod changes arrive, for the cluster thread to wait on (the engine takes them).
    pub(super) fn changes(&self) -> &Receiver<Change> {
        &self.changes
    }
}

impl Default for Policies {
    fn default() -> Self {
        Policies::new()
    }
}
