//! What sled retires is freed later: a replaced page, a log buffer written out, an old tree
//! node stay allocated until no thread can still be reading them (epoch-based reclamation,
//! crossbeam-epoch). Each thread gathers what it retires in a bag of its own; only a full bag,
//! or a thread's end, hands it on, and it is freed when some thread later collects. In an idle
//! knid that comes late: sled's 512 KiB log buffers, written out during a burst, stayed
//! resident for seconds after the burst's last thread ended (1.5 MiB with 5,000 sandboxes,
//! docs/performance-history.md). A thread ending idle, and a big pass ending, call [`reclaim`].

/// Collection rounds per [`reclaim`]. Something retired is freed once the global epoch moved on
/// twice; each round can move it once and frees up to eight bags (crossbeam-epoch's step), so
/// 32 rounds free up to 240 bags of 64 objects. Each costs a pin and a look at every thread's
/// epoch: microseconds in all.
const ROUNDS: usize = 32;

/// Hands this thread's retired objects on and frees what no thread can still read: everything
/// retired before the call, unless another thread stays pinned meanwhile (it is then freed by
/// a later collection, as without this call).
pub fn reclaim() {
    for _ in 0..ROUNDS {
        // A fresh pin each round: a guard pinned in the old epoch would hold the epoch back.
        crossbeam_epoch::pin().flush();
    }
}
