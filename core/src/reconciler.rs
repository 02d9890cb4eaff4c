//! The reconciler: the GC sweep (netns gone, interrupted operations, orphaned links and
//! reservations) every `gc_interval`, on its own thread.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{bounded, RecvTimeoutError, Sender};

use crate::dispatch::Dispatch;
use crate::engine::Context;
use crate::error::{Error, Result};
use crate::gc;
use crate::model::GcRequest;

/// A running reconciler.
pub(crate) struct Reconciler {
    stop: Sender<()>,
    thread: JoinHandle<()>,
}

impl Reconciler {
    /// Starts sweeping every `interval`. Call from a thread in the host netns.
    pub fn spawn(ctx: Arc<Context>, dispatch: Arc<Dispatch>, interval: Duration) -> Result<Self> {
        let (stop, stopped) = bounded::<()>(1);
        let thread = std::thread::Builder::new()
            .name("knid-reconciler".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                    sweep(&ctx, &dispatch);
                }
            })
            .map_err(|e| Error::Unavailable(format!("spawn reconciler: {e}")))?;
        Ok(Self { stop, thread })
    }

    /// Stops the thread, waiting for a sweep in progress to end.
    pub fn stop(self) {
        let _ = self.stop.send(());
        if self.thread.join().is_err() {
            log::error!("the reconciler panicked");
        }
    }
}

fn sweep(ctx: &Context, dispatch: &Dispatch) {
    // A failed store refuses the writes a sweep makes until knid restarts.
    if !dispatch.accepting() || ctx.store.failure().is_some() {
        return;
    }
    let req = GcRequest {
        keep: None,
        dry_run: false,
    };
    match gc::collect(ctx, dispatch, &req, None) {
        Ok(report) => gc::record(ctx, "reconciler", &report),
        Err(e) => log::warn!("reconciler: {}", e.chain()),
    }
    crate::memory::give_back();
}
