//! What the store's integration tests share: opening a store just dropped.

// Each test file uses part of it.
#![allow(dead_code)]

use knid_store::{Error, Store, StoreConfig};
use tempfile::TempDir;

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

/// Runs `open` until it does not fail on sled's file lock, for at most 5 s.
pub fn retry_busy_lock<T, E: std::error::Error + 'static>(
    mut open: impl FnMut() -> Result<T, E>,
) -> Result<T, E> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let busy = |e: &E| {
        std::iter::successors(Some(e as &dyn std::error::Error), |e| e.source())
            .any(|e| e.to_string().contains("could not acquire lock"))
    };
    loop {
        match open() {
            Err(e) if busy(&e) && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other,
        }
    }
}
