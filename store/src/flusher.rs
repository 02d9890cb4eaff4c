//! The store's flusher thread: makes applied changes durable in the background while the
//! caller goes on with work that needs them durable only later ([`crate::Store::flush_soon`]).

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use crate::group_flush::GroupFlush;

/// The thread and the queue of tickets it makes durable.
#[derive(Debug)]
pub(crate) struct Flusher {
    tx: Mutex<Option<Sender<u64>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Flusher {
    /// Starts the thread. It holds a handle on `db` until [`Flusher::stop`].
    pub(crate) fn start(db: sled::Db, group: Arc<GroupFlush>) -> std::io::Result<Flusher> {
        let (tx, rx) = mpsc::channel::<u64>();
        let thread = std::thread::Builder::new()
            .name("knid-store-flush".into())
            .spawn(move || {
                while let Ok(mut ticket) = rx.recv() {
                    // Tickets queued meanwhile share this flush.
                    while let Ok(later) = rx.try_recv() {
                        ticket = ticket.max(later);
                    }
                    if let Err(e) = group.wait(ticket, || db.flush().map(drop)) {
                        // Whoever waits on the ticket runs the flush again and gets the error.
                        log::warn!("background flush failed: {e}");
                    }
                }
            })?;
        Ok(Flusher {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Asks the thread to make `ticket` durable. After [`Flusher::stop`] nothing is asked: the
    /// waiter flushes itself.
    pub(crate) fn request(&self, ticket: u64) {
        if let Some(tx) = self
            .tx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            // A send fails only if the thread is gone; the waiter then flushes itself.
            let _ = tx.send(ticket);
        }
    }

    /// Ends the thread once it has served what it was asked, and waits for it.
    pub(crate) fn stop(&self) {
        drop(
            self.tx
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            if thread.join().is_err() {
                log::error!("the store's flusher thread panicked");
            }
        }
    }
}
