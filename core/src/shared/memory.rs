//! Handing back the memory a burst of work left: what sled retired during it, then the heap
//! glibc keeps free. [`give_back`] when a big pass ends (start-up recovery and its sweep, a
//! reconciler round, the reaper's drain); [`give_back_code`] too once start-up or a burst is
//! over; [`thread_ends_idle`] when a worker thread ends.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Frees what sled retired ([`knid_store::reclaim_retired`]), then returns free heap to the
/// kernel ([`knid_netops::malloc::give_back`]): in that order, so the trim sees the freed memory.
pub fn give_back() {
    knid_store::reclaim_retired();
    knid_netops::malloc::give_back();
}

/// A thread that used the store ends for want of work: what its calls had sled retire is freed
/// now, not whenever another thread next collects.
pub fn thread_ends_idle() {
    knid_store::reclaim_retired();
}

/// The least time between two releases of knid's code pages after bursts
/// ([`give_back_code_after_burst`]): each one costs the code that runs next a minor fault per
/// 64 KiB, so a load that starts and ends threads all the time (clients polling over fresh
/// connections) must not pay that at every end.
const BURST_RELEASE_EVERY: Duration = Duration::from_secs(30);

/// When the code was last released, in milliseconds since the first release plus one; 0: never.
static CODE_RELEASED: AtomicU64 = AtomicU64::new(0);

/// Milliseconds since the first call, plus one (never 0).
fn now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let elapsed = EPOCH.get_or_init(Instant::now).elapsed().as_millis();
    u64::try_from(elapsed).unwrap_or(u64::MAX - 1) + 1
}

/// [`give_back_code`] after a burst (its last surplus thread ends), unless the code was released
/// less than [`BURST_RELEASE_EVERY`] ago; [`give_back`] in any case.
pub fn give_back_code_after_burst() {
    let last = CODE_RELEASED.load(Ordering::Relaxed);
    let every = u64::try_from(BURST_RELEASE_EVERY.as_millis()).unwrap_or(u64::MAX);
    if last != 0 && now_ms().saturating_sub(last) < every {
        give_back();
        return;
    }
    give_back_code();
}

/// [`give_back`], and the mappings of knid's own code and constants
/// ([`knid_netops::code_pages::release`]), once start-up (or cluster mode's first list of
/// Nodes) is over: what it ran once (configuration, recovery, the sweep) leaves knid's RSS;
/// what knid runs next maps back from the page cache on first use. Not after every pass: a
/// reconciler round runs again.
pub fn give_back_code() {
    give_back();
    CODE_RELEASED.store(now_ms(), Ordering::Relaxed);
    let released = knid_netops::code_pages::release();
    log::debug!(
        "released {} mapping(s) of knid's binary, {} KiB resident",
        released.mappings,
        released.kib
    );
}
