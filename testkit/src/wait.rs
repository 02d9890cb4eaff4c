//! Waiting for what happens asynchronously (link deletion by the reaper, an address released
//! after the reply): poll a condition until it holds, with a deadline.

use std::time::{Duration, Instant};

/// How long asynchronous kernel effects (link deletion) may take to show.
pub const SETTLE: Duration = Duration::from_secs(10);

/// Polls `condition` until it holds; panics naming `what` after `timeout`.
pub fn wait_for(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Polls `condition` every `every` until it holds (true) or `timeout` passes (false).
pub fn wait_until(timeout: Duration, every: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while !condition() {
        if started.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(every);
    }
    true
}
