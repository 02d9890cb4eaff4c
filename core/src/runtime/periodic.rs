//! knid's background threads that run until the runtime stops: a named thread, a way to ask it
//! to stop that wakes it from its sleep, and a join that logs a panic instead of spreading it.

use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};

use crate::error::{Error, Result};

/// A running background thread.
pub(crate) struct Periodic {
    name: &'static str,
    /// Dropped to stop the thread: its [`Stop`] then reports a disconnect.
    stop: Sender<()>,
    thread: JoinHandle<()>,
}

/// The thread's side of [`Periodic::stop`].
pub(crate) struct Stop(Receiver<()>);

impl Stop {
    /// Whether the thread was asked to stop.
    pub fn asked(&self) -> bool {
        matches!(
            self.0.try_recv(),
            Err(crossbeam_channel::TryRecvError::Disconnected)
        )
    }

    /// Sleeps `interval` or until asked to stop; true if asked.
    pub fn wait(&self, interval: Duration) -> bool {
        !matches!(
            self.0.recv_timeout(interval),
            Err(RecvTimeoutError::Timeout)
        )
    }

    /// The channel that disconnects on stop, for a `select!` beside other channels.
    pub fn channel(&self) -> &Receiver<()> {
        &self.0
    }
}

impl Periodic {
    /// Runs `round` every `interval` on a thread named `name`, until stopped.
    pub fn every(
        name: &'static str,
        interval: Duration,
        mut round: impl FnMut(&Stop) + Send + 'static,
    ) -> Result<Self> {
        Self::run(name, move |stop| {
            while !stop.wait(interval) {
                round(stop);
            }
        })
    }

    /// Runs `body` on a thread named `name`; `body` returns once its [`Stop`] says so.
    pub fn run(name: &'static str, body: impl FnOnce(&Stop) + Send + 'static) -> Result<Self> {
        let (stop, stopped) = bounded::<()>(0);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || body(&Stop(stopped)))
            .map_err(|e| Error::Unavailable(format!("spawn {name}: {e}")))?;
        Ok(Self { name, stop, thread })
    }

    /// Asks the thread to stop and waits for it: a round in progress finishes first.
    pub fn stop(self) {
        let Self { name, stop, thread } = self;
        drop(stop);
        if thread.join().is_err() {
            log::error!("{name} panicked");
        }
    }
}

#[cfg(test)]
mod tests;
