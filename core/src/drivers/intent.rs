//! An attach's intent on its way to durability: the drivers wait for it before their first kernel
//! effect, but for a veth's creation.

use std::time::{Duration, Instant};

use crate::error::Result;

/// An attach's intent (Pending) on its way to durability: applied, and flushed in the
/// background from then on.
#[derive(Default)]
pub(crate) struct Intent<'s> {
    pub(crate) pending: Option<knid_store::Durable<'s>>,
    /// How long [`Intent::durable`] waited for the flush.
    pub(crate) waited: Duration,
}

impl Intent<'_> {
    /// Returns once the intent is durable (at once after the first call). Every kernel effect
    /// waits for it, but for a veth's creation: recovery finds that by its deterministic name in
    /// the host netns and deletes it if the intent was lost, the pod end going with it.
    pub(crate) fn durable(&mut self) -> Result<()> {
        let Some(pending) = self.pending.take() else {
            return Ok(());
        };
        let started = Instant::now();
        let durable = pending.wait();
        self.waited = started.elapsed();
        durable.map_err(Into::into)
    }
}
