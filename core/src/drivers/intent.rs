//! An operation's intent on its way to durability: an attach's Pending records, which the drivers
//! wait for before their first kernel effect but for a veth's creation; a detach's Detaching
//! marks, which it waits for after its kernel work, before the Reaping marks and the reply.

use std::time::{Duration, Instant};

use crate::error::Result;

/// An intent (an attach's Pending records, a detach's Detaching marks) on its way to
/// durability: applied, and flushed in the background from then on, or by the first wait when
/// other operations' flushes are outstanding ([`knid_store::Store::flush_soon`]).
#[derive(Default)]
pub(crate) struct Intent<'s> {
    pub(crate) pending: Option<knid_store::Durable<'s>>,
    /// How long [`Intent::durable`] waited for the flush.
    pub(crate) waited: Duration,
}

impl Intent<'_> {
    /// Returns once the intent is durable (at once after the first call, or without a flush
    /// started). Every kernel effect of an attach waits for it, but for a veth's creation:
    /// recovery finds that by its deterministic name in the host netns and deletes it if the
    /// intent was lost, the pod end going with it.
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
