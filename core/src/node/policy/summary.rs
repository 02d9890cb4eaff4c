//! Where policy stands ([`Summary`]): written by the engine, read by the status answers, the
//! metrics and `knictl policy`.

use std::collections::BTreeMap;
use std::sync::Arc;

use knid_netops::nft::Direction;

use super::objects::{Key, World};

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
