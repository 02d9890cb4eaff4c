//! What knid does beside the API's requests, run by the API server's threads when it is due
//! ([`knid_transport::server::Chores`]): the signals (SIGHUP reloads, SIGTERM and SIGINT stop
//! knid, and so does the signals' handle once a failed store's filesystem takes writes again) and
//! the periodic jobs. Both sleep nearly all the time, so they take no thread of their own: an
//! idle knid is its main thread, in the server's epoll wait.

use std::ops::ControlFlow;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::Instant;

use knid_core::Runtime;

use crate::signals::{Seen, Signals};

/// The signals and the periodic jobs, as the API server's chores.
pub struct DaemonChores {
    signals: Signals,
    runtime: Arc<Runtime>,
    /// Re-reads the configuration and applies it (SIGHUP).
    reload: Box<dyn FnMut() + Send>,
}

impl DaemonChores {
    /// The chores of `runtime`, whose jobs ring `signals`' bell from here on; `reload` runs on
    /// SIGHUP.
    pub fn new(
        signals: Signals,
        runtime: Arc<Runtime>,
        reload: Box<dyn FnMut() + Send>,
    ) -> std::io::Result<Self> {
        runtime.ring_jobs_on(signals.bell()?);
        Ok(Self {
            signals,
            runtime,
            reload,
        })
    }

    /// Acts on what came; `Break` when knid stops.
    fn on_signals(&mut self) -> ControlFlow<()> {
        match self.signals.take() {
            Seen::Nothing => ControlFlow::Continue(()),
            Seen::Reload => {
                (self.reload)();
                ControlFlow::Continue(())
            }
            Seen::Stop(signal) => {
                // `None`: the store watch has said why.
                if let Some(signal) = signal {
                    log::info!("signal {signal}: shutting down");
                }
                ControlFlow::Break(())
            }
        }
    }
}

impl knid_transport::server::Chores for DaemonChores {
    fn bell(&self) -> BorrowedFd<'_> {
        self.signals.readable()
    }

    fn run(&mut self) -> ControlFlow<(), Option<Instant>> {
        self.on_signals()?;
        let next = self.runtime.run_due_jobs();
        // What came during the rounds: SIGTERM and SIGINT also set the jobs' stop flag, so a
        // long round (a health poll of extensions that do not answer) ended early for it.
        self.on_signals()?;
        ControlFlow::Continue(next)
    }
}
