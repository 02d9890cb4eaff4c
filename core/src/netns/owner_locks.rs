//! Per-owner mutual exclusion of netns operations, striped so it costs a fixed 32 mutexes.

use std::sync::Mutex;

use crate::locks::LockExt;

/// Mutual exclusion of the netns operations of one owner. CreateNetns and the KNI link run on
/// the caller's thread (a hop to a shard and back costs as much as the rest of CreateNetns);
/// DeleteNetns and GC, which detach, run on the owner's shard. All of them take the owner's
/// stripe here, so two operations on one netns never interleave.
pub(crate) struct OwnerLocks([Mutex<()>; 32]);

impl OwnerLocks {
    /// Unlocked stripes.
    pub fn new() -> Self {
        Self(std::array::from_fn(|_| Mutex::new(())))
    }

    fn stripe(&self, owner: &str) -> &Mutex<()> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        owner.hash(&mut hasher);
        &self.0[usize::try_from(hasher.finish() % self.0.len() as u64).unwrap_or(0)]
    }

    pub(crate) fn lock(&self, owner: &str) -> std::sync::MutexGuard<'_, ()> {
        self.stripe(owner).acquire()
    }
}

#[cfg(test)]
mod tests;
