//! Handing back the memory a burst of work left: what sled retired during it, then the heap
//! glibc keeps free. [`give_back`] when a big pass ends (start-up recovery and its sweep, the
//! reaper's drain); [`give_back_code`] too once start-up is over, and
//! [`give_back_code_unless_recent`] once a burst, a reconciler round or a big change's work is
//! ([`AfterBigChange`]); [`thread_ends_idle`] when a worker thread ends.

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

/// The least time between a release of knid's code pages and one that a load sets off (the end
/// of a burst, a big change's work over: [`give_back_code_unless_recent`]): each one costs the
/// code that runs next a minor fault per 64 KiB (~30 for what a light load runs), and reads
/// `/proc/self/smaps`, so a load that starts and ends threads all the time (clients polling over
/// fresh connections), or a cluster whose Nodes change all the time, must not pay that at every
/// end. Short enough that a burst's code goes when its last surplus thread ends, even with a
/// surplus thread that ended within the burst a moment before (30 s kept the abuse bench's code
/// mapped for good).
const RELEASE_EVERY: Duration = Duration::from_secs(5);

/// When knid's code was last released; `None`: never.
static CODE_RELEASED: Mutex<Option<Instant>> = Mutex::new(None);

/// When knid's code was last released ([`give_back_code`]); `None`: never.
pub fn code_released_at() -> Option<Instant> {
    *CODE_RELEASED.acquire()
}

/// [`give_back_code`] after `work`, unless the code was released less than [`RELEASE_EVERY`]
/// ago: then [`give_back`] alone, and the instant from which the code may be released again.
pub fn give_back_code_unless_recent(work: &str) -> Option<Instant> {
    let next = CODE_RELEASED
        .acquire()
        .map(|at| at + RELEASE_EVERY)
        .filter(|next| *next > Instant::now());
    match next {
        Some(_) => give_back(),
        None => give_back_code(work),
    }
    next
}

/// [`give_back`], and the mappings of knid's own code and constants
/// ([`knid_netops::code_pages::release`]), once `work` is over (start-up; cluster mode's first
/// list of Nodes): what it ran once (configuration, recovery, the sweep) leaves knid's RSS;
/// what knid runs next maps back from the page cache on first use.
pub fn give_back_code(work: &str) {
    give_back();
    *CODE_RELEASED.acquire() = Some(Instant::now());
    let released = knid_netops::code_pages::release();
    log::debug!(
        "released {} mapping(s) of knid's binary after {work}, {} KiB resident",
        released.mappings,
        released.kib
    );
}

/// How long the work of a big change must have been over before [`AfterBigChange`] releases
/// knid's code: a change that comes as a stream (a thousand Nodes created one by one) is
/// applied in many passes, and the release waits for the last.
const SETTLED_AFTER: Duration = Duration::from_secs(5);

/// A release of knid's code once the work that a big change set off is over: cluster mode's
/// controller counts the Nodes it applies (listed, added, changed, deleted) and its passes
/// (routes to every other node, the node side again); once `big` of them were applied since
/// the last release, the code is released [`SETTLED_AFTER`] the last pass, and no sooner than
/// [`RELEASE_EVERY`] after any release ([`give_back_code_unless_recent`]). Under constant churn
/// the release waits for a quiet moment, and a few changes now and then never set it off: the
/// code they run maps once and stays, as the route resync's does.
#[derive(Debug)]
pub struct AfterBigChange {
    /// How many changes make a big one.
    big: usize,
    /// Changes applied since the code was last released by this.
    changes: usize,
    /// When the code is released; `None`: not yet wanted.
    due: Option<Instant>,
}

impl AfterBigChange {
    /// Nothing applied yet; `big` changes make a big one.
    pub fn new(big: usize) -> AfterBigChange {
        AfterBigChange {
            big,
            changes: 0,
            due: None,
        }
    }

    /// A pass that applied `changes` ended at `now`: once the changes since the last release
    /// make a big one, the release is due when the work has settled (again, if it was due).
    pub fn applied(&mut self, changes: usize, now: Instant) {
        self.changes = self.changes.saturating_add(changes);
        if self.changes >= self.big {
            self.due = Some(now + SETTLED_AFTER);
        }
    }

    /// When [`AfterBigChange::run_due`] next has something to do.
    pub fn due(&self) -> Option<Instant> {
        self.due
    }

    /// Releases knid's code if that is due at `now` (`what`: the work, for the log), or puts it
    /// off until another release is at least [`RELEASE_EVERY`] old.
    pub fn run_due(&mut self, now: Instant, what: &str) {
        if self.due.is_none_or(|due| due > now) {
            return;
        }
        let work = format!("{} {what}", self.changes);
        self.due = give_back_code_unless_recent(&work);
        if self.due.is_none() {
            self.changes = 0;
        }
    }
}

#[cfg(test)]
mod tests;
