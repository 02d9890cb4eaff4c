//! What the store's integration tests share: opening a store just dropped.

// Each test file uses part of it.
#![allow(dead_code)]

use knid_store::{Error, Store, StoreConfig};
use tempfile::TempDir;
pub use testkit::wait::retry_busy_lock;

/// The store just dropped, opened again. sled's background threads may hold its file lock for
/// a moment after the last handle is dropped (a log write finishing on its thread pool), so a
/// busy lock is retried briefly; any other error is returned.
pub fn reopen(dir: &TempDir) -> Result<Store, Error> {
    retry_busy_lock(|| Store::open(&StoreConfig::new(dir.path().join("state"))))
}

/// The raw sled database under a store just dropped (the lock retried as [`reopen`] does).
pub fn open_raw(dir: &TempDir) -> sled::Db {
    retry_busy_lock(|| sled::open(dir.path().join("state"))).expect("open raw sled")
}
