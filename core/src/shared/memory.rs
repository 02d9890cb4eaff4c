//! Handing back the memory a burst of work left: what sled retired during it, then the heap
//! glibc keeps free. [`give_back`] when a big pass ends (start-up recovery and its sweep, a
//! reconciler round, the reaper's drain); [`give_back_code`] too once start-up or a burst is
//! over; [`thread_ends_idle`] when a worker thread ends.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::locks::LockExt;

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
/// 64 KiB (~30 for what a light load runs) and the release a read of `/proc/self/smaps`, so a
/// load that starts and ends threads all the time (clients polling over fresh connections) must
/// not pay that at every end. Short enough that a burst's code goes when its last surplus thread
/// ends, even with a surplus thread that ended within the burst a moment before (30 s kept the
/// abuse bench's code mapped for good).
const BURST_RELEASE_EVERY: Duration = Duration::from_secs(5);

/// When knid's code was last released; `None`: never.
static CODE_RELEASED: Mutex<Option<Instant>> = Mutex::new(None);

/// [`give_back_code`] after a burst (its last surplus thread ends), unless the code was released
/// less than [`BURST_RELEASE_EVERY`] ago; [`give_back`] in any case.
pub fn give_back_code_after_burst() {
    let recent = CODE_RELEASED
        .acquire()
        .is_some_and(|at| at.elapsed() < BURST_RELEASE_EVERY);
    if recent {
        give_back();
    } else {
        give_back_code();
    }
}

/// [`give_back`], and the mappings of knid's own code and constants
/// ([`knid_netops::code_pages::release`]), once start-up (or cluster mode's first list of
/// Nodes) is over: what it ran once (configuration, recovery, the sweep) leaves knid's RSS;
/// what knid runs next maps back from the page cache on first use. Not after every pass: a
/// reconciler round runs again.
pub fn give_back_code() {
    give_back();
    *CODE_RELEASED.acquire() = Some(Instant::now());
    let released = knid_netops::code_pages::release();
    log::debug!(
        "released {} mapping(s) of knid's binary, {} KiB resident",
        released.mappings,
        released.kib
    );
}
