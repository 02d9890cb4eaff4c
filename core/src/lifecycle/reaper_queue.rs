//! The reaper's queue as the shared context holds it: the messages the reaper thread takes, the
//! length of its backlog, and the thread itself, which runs only while there is work. The first
//! message starts it; after a while without one it parks its channel and netlink socket here
//! and ends, so an idle knid holds no reaper thread.
//!
//! While the thread gathers a batch ([`Queue::gathering`]) a message that only adds links does
//! not wake it: under churn every detach would, for nothing but a look at the queue. It wakes
//! at the end of its gathering time, or at once for a [`Msg::Flush`], a [`Msg::Stop`] or a
//! queue of [`GATHER_BATCH`] messages.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;

use crossbeam_channel::{unbounded, Receiver, Sender};
use knid_netops::Rtnl;
use knid_store::AttachmentRecord;

use crate::locks::LockExt;
use crate::shared::relay::Relay;

/// Links the reaper gathers before it deletes them without waiting longer (and queued messages
/// that wake a gathering reaper).
pub(crate) const GATHER_BATCH: usize = 128;

/// Messages to the reaper thread.
pub(crate) enum Msg {
    /// Attachments in state Reaping whose host links are in the reaper's group.
    Reap(Vec<AttachmentRecord>),
    /// Reply once everything queued before this message is reaped (or has failed a round).
    Flush(Sender<()>),
    /// Finish what is queued, then exit.
    Stop,
}

/// The reaper's queue length, for [`wait_idle`] and the metrics.
///
/// [`wait_idle`]: super::reaper::wait_idle
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Attachments handed to the reaper and not yet reaped.
    pub queued: AtomicU64,
}

/// What the reaper thread takes when it starts and parks when it ends idle.
pub(crate) struct Parked {
    pub rx: Receiver<Msg>,
    /// A netlink socket of the host netns (a thread started later may be in another).
    pub host: Rtnl,
}

/// What a starting thread runs with what it takes: `None` once the context it would run with is
/// gone. The reaper binds it ([`super::reaper::bind`]), so the queue, a part of the context,
/// does not hold the context.
pub(crate) type Starter = Box<dyn Fn() -> Option<Box<dyn FnOnce(Parked) + Send>> + Send + Sync>;

/// The reaper's queue and thread.
pub(crate) struct Queue {
    tx: Sender<Msg>,
    state: Mutex<State>,
    /// Set once the context exists ([`Queue::bind`]).
    starter: OnceLock<Starter>,
}

struct State {
    /// `None` while a thread runs.
    parked: Option<Parked>,
    /// The reaper's threads, one at a time.
    thread: Relay,
    /// Stopped: nothing is taken any more.
    closed: bool,
    /// The reaper thread while it gathers a batch.
    gatherer: Option<Thread>,
}

impl Queue {
    /// A queue with no thread yet; `host` must be a netlink socket of the host netns.
    pub fn new(host: Rtnl) -> Self {
        let (tx, rx) = unbounded();
        Self {
            tx,
            state: Mutex::new(State {
                parked: Some(Parked { rx, host }),
                thread: Relay::new("knid-reaper"),
                closed: false,
                gatherer: None,
            }),
            starter: OnceLock::new(),
        }
    }

    /// Gives the queue what its threads run: from here on a message starts a thread, and so
    /// does what was queued before.
    pub fn bind(&self, starter: Starter) {
        let _ = self.starter.set(starter);
        self.start_if_needed(&mut self.state.acquire());
    }

    /// Queues `msg`, starting the thread if none runs (once bound). Gives it back once the
    /// reaper has stopped.
    pub fn send(&self, msg: Msg) -> Result<(), Msg> {
        let mut state = self.state.acquire();
        if state.closed {
            return Err(msg);
        }
        // A gathering reaper takes more links when its time is up, anything else at once.
        let wake = !matches!(msg, Msg::Reap(_)) || self.tx.len() + 1 >= GATHER_BATCH;
        // A running thread looks at the queue under this lock before it ends.
        let _ = self.tx.send(msg);
        if wake {
            state.wake_gatherer();
        }
        self.start_if_needed(&mut state);
        Ok(())
    }

    /// The calling thread (the reaper) gathers a batch (`true`, then it waits with
    /// [`std::thread::park_timeout`]), or is done gathering (`false`): see the module docs.
    pub fn gathering(&self, on: bool) {
        self.state.acquire().gatherer = on.then(std::thread::current);
    }

    /// Starts a thread if none runs, the queue holds work and the queue is bound. If none can
    /// start, the work waits in the queue for the next message to try again.
    fn start_if_needed(&self, state: &mut State) {
        if state.closed || self.tx.is_empty() {
            return;
        }
        let Some(run) = self.starter.get().and_then(|starter| starter()) else {
            return;
        };
        let Some(parked) = state.parked.take() else {
            return;
        };
        // std drops the work of a thread that could not start: the slot keeps `parked`.
        let slot = Arc::new(Mutex::new(Some(parked)));
        let taken = Arc::clone(&slot);
        let started = state.thread.start(move || {
            if let Some(parked) = taken.acquire().take() {
                run(parked);
            }
        });
        if let Err(e) = started {
            log::error!("cannot start the reaper: {e}");
            state.parked = slot.acquire().take();
        }
    }

    /// Parks an idle thread's channel and socket, unless a message came meanwhile (then the
    /// thread goes on with them).
    pub fn park(&self, parked: Parked) -> Result<(), Parked> {
        let mut state = self.state.acquire();
        if !parked.rx.is_empty() {
            return Err(parked);
        }
        state.parked = Some(parked);
        Ok(())
    }

    /// Lets a running thread finish what it was handed, and waits for it; nothing is taken
    /// afterwards (those records stay Reaping for the next start-up).
    pub fn stop(&self) {
        let last = {
            let mut state = self.state.acquire();
            state.closed = true;
            if state.parked.is_none() {
                let _ = self.tx.send(Msg::Stop);
                state.wake_gatherer();
            }
            state.thread.take()
        };
        last.join();
    }
}

impl State {
    fn wake_gatherer(&self) {
        if let Some(thread) = &self.gatherer {
            thread.unpark();
        }
    }
}

#[cfg(test)]
mod tests;
