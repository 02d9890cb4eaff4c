//! The guard chains listed ahead: at start-up, on a thread of their own while recovery runs on
//! the main thread, so that the rebuild that follows only compares. A listing taken before
//! recovery says what the kernel has after it only when recovery changed nothing, which is
//! the one case start-up gives it to [`super::apply`] ([`crate::node::AtStart`]).

use std::thread::JoinHandle;

use knid_netops::nft::GuardChain;

use crate::error::Result;

/// The listing's thread; see the module docs.
pub(crate) struct Listing(Option<JoinHandle<Result<Option<Vec<GuardChain>>>>>);

impl Listing {
    /// Starts listing the chains of knid's guard tables on a thread of its own (`knid-guard-list`,
    /// in the calling thread's network namespace, which a new thread shares). A thread that
    /// cannot start leaves the listing to [`super::apply`].
    pub(crate) fn start() -> Self {
        let spawned = std::thread::Builder::new()
            .name("knid-guard-list".into())
            .spawn(super::read);
        match spawned {
            Ok(handle) => Listing(Some(handle)),
            Err(e) => {
                log::debug!("source guards: spawn the listing: {e}");
                Listing(None)
            }
        }
    }

    /// The chains listed (none: no guard table), once the thread is over; `None` when it
    /// failed (logged), for the caller to list them itself.
    pub(crate) fn join(self) -> Option<Vec<GuardChain>> {
        match self.0?.join() {
            Ok(Ok(found)) => Some(found.unwrap_or_default()),
            Ok(Err(e)) => {
                log::debug!("source guards: the listing ahead failed: {}", e.chain());
                None
            }
            Err(_) => {
                log::debug!("source guards: the listing ahead panicked");
                None
            }
        }
    }
}
