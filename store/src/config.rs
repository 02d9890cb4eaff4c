//! How to open a [`crate::Store`].

use std::path::PathBuf;

/// Default sled page cache: the store holds a few thousand records under 1 KiB each.
const DEFAULT_CACHE_CAPACITY_BYTES: u64 = 4 << 20;
/// Default period of sled's background flusher, which also drives its segment GC.
const DEFAULT_FLUSH_EVERY_MS: u64 = 1000;

/// Where the store lives and how much memory sled may use.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Directory of the sled database (created if missing). Must be on persistent storage.
    pub path: PathBuf,
    /// sled page-cache size. This is not an RSS cap: sled's RSS is often several times this.
    pub cache_capacity_bytes: u64,
    /// Period of sled's background flusher; `None` disables it, and with it sled's space reclamation.
    pub flush_every_ms: Option<u64>,
    /// Called at each step of a schema migration ([`crate::migrate::STEPS`]), for crash tests.
    pub on_migration_step: Option<fn(&'static str)>,
}

impl StoreConfig {
    /// A config for `path` with a 4 MiB cache and a background flush every second.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        StoreConfig {
            path: path.into(),
            cache_capacity_bytes: DEFAULT_CACHE_CAPACITY_BYTES,
            flush_every_ms: Some(DEFAULT_FLUSH_EVERY_MS),
            on_migration_step: None,
        }
    }
}
