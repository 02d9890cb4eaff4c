//! Handing back the memory a burst of work left: what sled retired during it, then the heap
//! glibc keeps free. [`give_back`] when a big pass ends (start-up recovery and its sweep, a
//! reconciler round, the reaper's drain); [`give_back_code`] too once start-up or a burst is
//! over; [`thread_ends_idle`] when a worker thread ends.

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

/// [`give_back`], and the mappings of knid's own code and constants
/// ([`knid_netops::code_pages::release`]), once start-up or a burst is over: what they ran once
/// (configuration, recovery, abuse handling) leaves knid's RSS; what knid runs next maps back
/// from the page cache on first use. Not after every pass: a reconciler round runs again.
pub fn give_back_code() {
    give_back();
    let released = knid_netops::code_pages::release();
    log::debug!(
        "released {} mapping(s) of knid's binary, {} KiB resident",
        released.mappings,
        released.kib
    );
}
