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

/// Runs `open` until it does not fail on sled's file lock, for at most 5 s, and returns what
/// it last returned. A store just dropped may keep its lock for a moment: sled's I/O pool lets
/// go of its copy of the database after the write it was finishing. Any other error is
/// returned at once.
pub fn retry_busy_lock<T, E: std::error::Error + 'static>(
    mut open: impl FnMut() -> Result<T, E>,
) -> Result<T, E> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let busy = |e: &E| {
        std::iter::successors(Some(e as &dyn std::error::Error), |e| e.source())
            .any(|e| e.to_string().contains("could not acquire lock"))
    };
    loop {
        match open() {
            Err(e) if busy(&e) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests;
