//! What the attach path, the status answers and the metrics share with the policy thread:
//! where policy stands ([`Summary`]), and the channel an attach rings to wait for its pod's
//! isolation.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, Sender};
use knid_netops::nft::Direction;

use super::objects::{Key, World};
use crate::locks::LockExt;

/// Messages in flight from attaches and the reaper.
const QUEUE: usize = 1024;
/// Longest an attach waits for its pod's isolation.
const PODS_CHANGED_WAIT: Duration = Duration::from_secs(5);

/// A change of the pods on this node, with whom to tell once the table has it.
pub(super) type Change = Option<Sender<()>>;

/// Where policy stands, for status and `knictl policy`.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// The objects known.
    pub world: Arc<World>,
    /// Policies that cannot be enforced, and why.
    pub refused: Vec<(Key, String)>,
    /// Whether every watched kind has been listed since start.
    pub synced: bool,
    /// The last error applying the table, if the last try failed.
    pub error: Option<String>,
    /// When the table last changed, ms since the epoch.
    pub applied_at_ms: i64,
    /// Packets of new connections dropped, per isolating policy and direction, since start:
    /// a pod's drops count for every policy isolating it that way.
    pub denied: BTreeMap<(Key, Direction), u64>,
    /// Times the kernel's table was found different from what knid installed, and put back.
    pub repairs: u64,
    /// What knid last installed in the kernel's table (normalized), if anything.
    pub installed: Option<Arc<knid_netops::nft::PolicyState>>,
}

/// What the attach path and the status answers share with the policy thread.
pub struct Policies {
    summary: Mutex<Summary>,
    changed: Sender<Change>,
    changes: Mutex<Option<Receiver<Change>>>,
}

impl std::fmt::Debug for Policies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policies").finish_non_exhaustive()
    }
}

impl Policies {
    /// The handle before the thread starts.
    pub fn new() -> Policies {
        let (changed, changes) = bounded(QUEUE);
        Policies {
            summary: Mutex::new(Summary::default()),
            changed,
            changes: Mutex::new(Some(changes)),
        }
    }

    /// The pods on this node changed: returns once the table has them (or after a few
    /// seconds, if the policy thread is busy or gone), so an attached pod is isolated before
    /// its first packet.
    pub fn pods_changed(&self) {
        let (ack, acked) = bounded(1);
        if self.changed.try_send(Some(ack)).is_ok() {
            let _ = acked.recv_timeout(PODS_CHANGED_WAIT);
        }
    }

    /// The pods changed; does not wait.
    pub fn nudge(&self) {
        let _ = self.changed.try_send(None);
    }

    /// Where policy stands.
    pub fn summary(&self) -> Summary {
        self.summary.acquire().clone()
    }

    /// The receiving end of the changes, once: for the policy thread.
    pub(super) fn take_changes(&self) -> Option<Receiver<Change>> {
        self.changes.acquire().take()
    }

    pub(super) fn update(&self, f: impl FnOnce(&mut Summary)) {
        f(&mut self.summary.acquire());
    }
}

impl Default for Policies {
    fn default() -> Self {
        Policies::new()
    }
}
