//! The store after a failed write (docs/operations.md#store-failures). sled 0.34 keeps the first I/O error of a
//! database and fails every later write and flush with it, even once the disk has room again or
//! is writable again; only opening the database anew clears it (`Store::failure`). So knid does
//! not try to recover in-process: it reports itself not ready ([`CONDITION`] false), refuses
//! work that writes (Unavailable), keeps serving reads, and once the filesystem takes writes
//! again asks the daemon to exit, so that its supervisor restarts it and start-up recovery
//! reconciles the store — as durable before the failure — with the kernel.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use knid_store::Store;

use super::periodic::{Periodic, Then};
use crate::locks::LockExt;

/// The Status condition: false once a store write failed.
pub(crate) const CONDITION: &str = "StoreReady";
/// How often the filesystem under a failed store is probed (a healthy store is not).
const PROBE_EVERY: Duration = Duration::from_secs(1);
/// Room the filesystem must have before knid trusts it again: a few of sled's 512 KiB segments.
const MIN_FREE_BYTES: u64 = 2 << 20;
/// Bytes the probe writes and syncs.
const PROBE_BYTES: usize = 4096;

/// What to run, once, when a failed store's filesystem takes writes again (the daemon's exit).
pub(crate) type OnWritable = Mutex<Option<Box<dyn FnOnce() + Send>>>;

/// Watches `store` on the periodic jobs' thread; `on_writable` runs once its failed filesystem
/// takes writes. The job sleeps until the store reports a failed write, then probes every
/// [`PROBE_EVERY`].
pub(crate) fn start(periodic: &Periodic, store: Arc<Store>, on_writable: Arc<OnWritable>) {
    let mut last_reason = String::new();
    let watched = Arc::clone(&store);
    let wake = periodic.when_woken("the store watch", PROBE_EVERY, move |_| {
        // The hook fires only once `failure()` holds the error.
        let Some(failure) = watched.failure() else {
            return Then::Sleep;
        };
        match probe(watched.path()) {
            Err(reason) => {
                if reason != last_reason {
                    log::warn!(
                        "store {} failed ({}); knid stays not ready: {reason}",
                        watched.path().display(),
                        crate::error::chain(&failure)
                    );
                    last_reason = reason;
                }
            }
            Ok(()) => {
                let run = on_writable.acquire().take();
                if let Some(run) = run {
                    log::error!(
                        "store {} failed ({}) and its filesystem takes writes again: knid \
                         must be restarted to open it anew",
                        watched.path().display(),
                        crate::error::chain(&failure)
                    );
                    run();
                }
            }
        }
        Then::Again
    });
    let hook = wake.clone();
    store.on_failure(move || hook.wake());
    // A failure before the hook was set is already in `failure()`.
    if store.failure().is_some() {
        wake.wake();
    }
}

/// Whether the filesystem holding the store directory `store` takes writes: not read-only,
/// [`MIN_FREE_BYTES`] free, and a small file beside the store written, synced and removed (an
/// ext4 that failed turns read-only without saying so in statvfs). Never fills the disk itself.
pub(crate) fn probe(store: &Path) -> std::result::Result<(), String> {
    use std::io::Write;
    let dir = store.parent().unwrap_or(store);
    let st =
        nix::sys::statvfs::statvfs(dir).map_err(|e| format!("statvfs {}: {e}", dir.display()))?;
    if st.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY) {
        return Err(format!("{} is read-only", dir.display()));
    }
    let free = st.blocks_available().saturating_mul(st.fragment_size());
    if free < MIN_FREE_BYTES {
        return Err(format!(
            "{} has {free} bytes free, {MIN_FREE_BYTES} needed",
            dir.display()
        ));
    }
    let path = probe_path(store);
    let written = std::fs::File::create(&path).and_then(|mut file| {
        file.write_all(&[0u8; PROBE_BYTES])?;
        file.sync_all()
    });
    let removed = std::fs::remove_file(&path);
    written
        .and(removed)
        .map_err(|e| format!("write {}: {e}", path.display()))
}

/// The probe's file: beside the store directory, not in it (sled owns that).
fn probe_path(store: &Path) -> PathBuf {
    let mut name = store.file_name().unwrap_or_default().to_os_string();
    name.push(".write-probe");
    store.with_file_name(name)
}

#[cfg(test)]
mod tests;
