//! The store's flusher: makes applied changes durable in the background while the caller goes
//! on with work that needs them durable only later ([`crate::Store::flush_soon`]). Its thread
//! exists only while there is work: the first request starts it, and it ends after
//! [`IDLE_EXIT`] without one (an idle knid holds no flusher thread).

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::group_flush::GroupFlush;

/// How long the thread waits for another request before it ends: as long as the API keeps its
/// warm thread after a call. Only attaches and detaches ask, and a kubelet's pods come seconds
/// apart: starting the thread on the request's path cost such an attach 58–128 µs where a
/// running one takes the request in 9–16 µs (docs/performance-history.md). An idle knid still
/// holds none.
const IDLE_EXIT: Duration = Duration::from_secs(30);

/// The queue of tickets to make durable, and the thread while it runs.
#[derive(Debug)]
pub(crate) struct Flusher {
    db: sled::Db,
    group: Arc<GroupFlush>,
    state: Arc<Mutex<State>>,
    idle_exit: Duration,
}

#[derive(Debug)]
struct State {
    /// `None` once stopped.
    tx: Option<Sender<u64>>,
    /// The queue's end, while no thread holds it.
    rx: Option<Receiver<u64>>,
    /// The last thread started; joined when the next starts, or on stop.
    thread: Option<JoinHandle<()>>,
}

impl Flusher {
    /// A flusher with no thread yet. It holds a handle on `db` until dropped; its thread holds
    /// one until [`Flusher::stop`].
    pub(crate) fn new(db: sled::Db, group: Arc<GroupFlush>) -> Flusher {
        Flusher::ending_after(db, group, IDLE_EXIT)
    }

    /// [`Flusher::new`] whose thread ends after `idle_exit` without a request.
    fn ending_after(db: sled::Db, group: Arc<GroupFlush>, idle_exit: Duration) -> Flusher {
        let (tx, rx) = mpsc::channel::<u64>();
        Flusher {
            db,
            group,
            state: Arc::new(Mutex::new(State {
                tx: Some(tx),
                rx: Some(rx),
                thread: None,
            })),
            idle_exit,
        }
    }

    /// Asks for `ticket` to be made durable, starting the thread if none runs. After
    /// [`Flusher::stop`], or if no thread can start, nothing is asked: the waiter flushes
    /// itself.
    pub(crate) fn request(&self, ticket: u64) {
        let mut state = lock(&self.state);
        let Some(tx) = state.tx.as_ref() else {
            return;
        };
        // A send fails only if no receiver is left, which `state` prevents.
        let _ = tx.send(ticket);
        // Under the lock a thread ending sees this ticket in the queue, or has given the queue
        // back (and so this starts the next one).
        if let Some(rx) = state.rx.take() {
            if let Some(ended) = state.thread.take() {
                let _ = ended.join();
            }
            let (db, group, shared, idle_exit) = (
                self.db.clone(),
                Arc::clone(&self.group),
                Arc::clone(&self.state),
                self.idle_exit,
            );
            match std::thread::Builder::new()
                .name("knid-store-flush".into())
                .spawn(move || run(&db, &group, &shared, rx, idle_exit))
            {
                Ok(thread) => state.thread = Some(thread),
                Err(e) => {
                    // The ticket's waiter flushes itself. The queue is lost with the closure, so
                    // later requests find neither queue nor thread and do nothing either.
                    log::warn!("cannot start the store's flusher thread: {e}");
                    state.tx = None;
                }
            }
        }
    }

    /// Ends the thread once it has served what it was asked, and waits for it.
    pub(crate) fn stop(&self) {
        let thread = {
            let mut state = lock(&self.state);
            state.tx = None;
            state.thread.take()
        };
        if thread.is_some_and(|thread| thread.join().is_err()) {
            log::error!("the store's flusher thread panicked");
        }
    }
}

/// The thread: flushes until no request comes for `idle_exit` or the flusher stops, then gives
/// the queue back.
fn run(
    db: &sled::Db,
    group: &GroupFlush,
    state: &Mutex<State>,
    rx: Receiver<u64>,
    idle_exit: Duration,
) {
    loop {
        let mut ticket = match rx.recv_timeout(idle_exit) {
            Ok(ticket) => ticket,
            Err(RecvTimeoutError::Timeout) => {
                let mut state = lock(state);
                // A request made before this lock is in the queue: serve it first.
                match rx.try_recv() {
                    Ok(ticket) => ticket,
                    Err(_) => {
                        state.rx = Some(rx);
                        drop(state);
                        crate::retired::reclaim();
                        return;
                    }
                }
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
        // Tickets queued meanwhile share this flush.
        while let Ok(later) = rx.try_recv() {
            ticket = ticket.max(later);
        }
        if let Err(e) = group.wait(ticket, || db.flush().map(drop)) {
            // Whoever waits on the ticket runs the flush again and gets the error.
            log::warn!("background flush failed: {e}");
        }
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
