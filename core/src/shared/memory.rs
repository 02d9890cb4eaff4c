//! Handing back the memory a burst of work left: what sled retired during it, then the heap
//! glibc keeps free. [`give_back`] when a big pass ends (start-up recovery and its sweep, a
//! reconciler round, the reaper's drain); [`thread_ends_idle`] when a worker thread ends.

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
