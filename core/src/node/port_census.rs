//! How many ports each bridge has, as the kernel says: what Status, Networks and the metrics
//! report per bridge network (NetworkSchedulable is false once a bridge has all its 1,023).
//!
//! One look counts every bridge's ports ([`Rtnl::bridge_port_counts`]), but costs ~40 ms with
//! 5,000 ports, so its counts are kept and reused until knid changes a port (every attach,
//! detach, netns deletion or GC job, a network set-up, a sweep: [`PortCensus::changed`]) and
//! for at most [`MAX_AGE`], within which a port added or removed behind knid's back shows. A
//! start takes its look on a thread of its own ([`PortCensus::warm_up`]) while recovery runs,
//! and a network set-up that changed a bridge takes another while it goes on with the
//! firewall, so that the first Status after a start finds it taken; an answer that comes while
//! such a look is under way waits for it rather than taking one more beside it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use knid_netops::Rtnl;

use crate::error::{Error, Result};
use crate::locks::LockExt;
use crate::model::BridgePorts;

/// How long counts with no port change of knid's since are reused.
pub(crate) const MAX_AGE: Duration = Duration::from_secs(1);

/// The counts as last taken; see the module docs.
#[derive(Debug, Default)]
pub(crate) struct PortCensus {
    /// Moved by every change of a port knid makes, after the kernel made it.
    generation: AtomicU64,
    taken: Mutex<Option<Taken>>,
    /// A warm-up's thread is running; set to false under `taken`'s lock.
    warming: AtomicBool,
    /// Signalled when a warm-up's thread is over.
    warmed: Condvar,
}

/// How many looks a warm-up takes at most when knid changes ports while it looks.
const WARM_UP_LOOKS: usize = 3;

#[derive(Debug)]
struct Taken {
    /// When the look started.
    at: Instant,
    /// The generation read before it.
    generation: u64,
    counts: Arc<HashMap<u32, u64>>,
}

impl PortCensus {
    /// A port of a bridge may have changed: the counts taken before are not reused.
    pub(crate) fn changed(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// The kept counts, if no change of knid's came after them and they are younger than
    /// [`MAX_AGE`].
    fn kept(&self) -> Option<Arc<HashMap<u32, u64>>> {
        let generation = self.generation.load(Ordering::SeqCst);
        self.taken.acquire().as_ref().and_then(|t| {
            (t.generation == generation && t.at.elapsed() < MAX_AGE).then(|| Arc::clone(&t.counts))
        })
    }

    /// Every bridge's port count by its ifindex: the kept counts if still good, else those of
    /// a warm-up's look under way once it is over (if still good), else a look.
    fn counts(&self, rtnl: &mut Rtnl) -> Result<Arc<HashMap<u32, u64>>> {
        if let Some(counts) = self.kept().or_else(|| self.after_warm_up()) {
            return Ok(counts);
        }
        self.look(rtnl)
    }

    /// Waits for a warm-up's look under way (for at most [`MAX_AGE`]), then the kept counts.
    fn after_warm_up(&self) -> Option<Arc<HashMap<u32, u64>>> {
        if !self.warming.load(Ordering::SeqCst) {
            return None;
        }
        let until = Instant::now() + MAX_AGE;
        let mut taken = self.taken.acquire();
        while self.warming.load(Ordering::SeqCst) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            taken = self
                .warmed
                .wait_timeout(taken, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        drop(taken);
        self.kept()
    }

    /// A look at every bridge's ports, kept.
    fn look(&self, rtnl: &mut Rtnl) -> Result<Arc<HashMap<u32, u64>>> {
        let generation = self.generation.load(Ordering::SeqCst);
        let at = Instant::now();
        let counts = Arc::new(
            rtnl.bridge_port_counts()
                .map_err(|e| Error::kernel("count the bridges' ports", e))?,
        );
        *self.taken.acquire() = Some(Taken {
            at,
            generation,
            counts: Arc::clone(&counts),
        });
        Ok(counts)
    }

    /// The ports of bridge `name`; `None` when it is missing or not a bridge. `counts` holds
    /// the caller's counts from its first bridge on, so one answer reads them all at one time.
    pub(crate) fn ports(
        &self,
        rtnl: &mut Rtnl,
        name: &str,
        counts: &mut Option<Arc<HashMap<u32, u64>>>,
    ) -> Result<Option<BridgePorts>> {
        let found = rtnl
            .link_by_name(name)
            .map_err(|e| Error::kernel(format!("look up bridge {name}"), e))?;
        let Ok(link) = super::bridge::usable_bridge(name, found) else {
            return Ok(None);
        };
        let counts = match counts {
            Some(counts) => counts,
            None => counts.insert(self.counts(rtnl)?),
        };
        let used = counts.get(&link.index).copied().unwrap_or(0);
        Ok(Some(BridgePorts::of(name, used)))
    }

    /// Takes a fresh look on a thread of its own (from the calling thread's network namespace,
    /// which a new thread shares), unless one is running or the kept counts are still good; a
    /// look that a change of knid's overtook is taken again (at most [`WARM_UP_LOOKS`] in
    /// all). A failure is only logged: the next answer looks again.
    pub(crate) fn warm_up(self: &Arc<Self>) {
        if self.kept().is_some() || self.warming.swap(true, Ordering::SeqCst) {
            return;
        }
        let census = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("knid-census".into())
            .spawn(move || {
                let looked = Rtnl::open()
                    .map_err(|e| Error::kernel("open host netlink socket", e))
                    .and_then(|mut rtnl| {
                        for _ in 0..WARM_UP_LOOKS {
                            if census.kept().is_some() {
                                break;
                            }
                            census.look(&mut rtnl)?;
                        }
                        Ok(())
                    });
                if let Err(e) = looked {
                    log::debug!("bridge ports: {}", e.chain());
                }
                census.warm_up_over();
            });
        if let Err(e) = spawned {
            log::debug!("bridge ports: spawn a look: {e}");
            self.warm_up_over();
        }
    }

    /// Ends a warm-up: the answers waiting for it go on.
    fn warm_up_over(&self) {
        let _taken = self.taken.acquire();
        self.warming.store(false, Ordering::SeqCst);
        self.warmed.notify_all();
    }
}

#[cfg(test)]
mod tests;
