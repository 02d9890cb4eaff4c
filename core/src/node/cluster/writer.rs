//! The publisher's share of the cluster thread, and its writer: the rounds (a comparison of what
//! the Node says with the node) run on the cluster thread, and the writes a round finds on a
//! thread of their own (`knid-node-publish`), started for them and ended once they are made.
//! Each write may block for the client's timeouts (5 s to connect, 30 s for the answer), a taint
//! write for several of them: on the cluster thread it would hold up the routes and
//! NetworkPolicy for as long. The publisher moves to the writer with the writes and comes back
//! with what it wrote, so it has one owner at a time and no lock; meanwhile no round runs, and
//! the first one due runs once it is back. An idle node, which has nothing to write, has no
//! writer.

use std::time::Instant;

use crossbeam_channel::{bounded, unbounded, Receiver, Select, Sender};

use super::publish::{Publisher, Writes};
use crate::shared::relay::Relay;

/// The publisher, at home on the cluster thread or away on the writer.
pub struct Publishing {
    /// The publisher, while no write is in flight.
    home: Option<Box<Publisher>>,
    /// Rung by attaches and detaches ([`super::View::nudge`]).
    nudges: Receiver<()>,
    /// Where the writer hands the publisher back.
    back: (Sender<Box<Publisher>>, Receiver<Box<Publisher>>),
    writer: Relay,
}

impl Publishing {
    /// `publisher`, at home, with the nudges of attaches and detaches.
    pub fn new(publisher: Publisher, nudges: Receiver<()>) -> Publishing {
        Publishing {
            home: Some(Box::new(publisher)),
            nudges,
            back: unbounded(),
            writer: Relay::new("knid-node-publish"),
        }
    }

    /// Adds what the publisher waits on to `select`: the nudges while it is home, the writer's
    /// return while it is away.
    pub fn wait_on<'a>(&'a self, select: &mut Select<'a>) {
        match self.home {
            Some(_) => select.recv(&self.nudges),
            None => select.recv(&self.back.1),
        };
    }

    /// When the next round is due, while the publisher is home.
    pub fn next_due(&self) -> Option<Instant> {
        self.home.as_ref().map(|p| p.next_due())
    }

    /// The publisher's turn: back from the writer, a nudge taken, a round if due, and its
    /// writes handed to a writer.
    pub fn turn(&mut self, now: Instant) {
        if self.home.is_none() {
            self.home = self.back.1.try_recv().ok();
        }
        let Some(publisher) = self.home.as_mut() else {
            return;
        };
        if self.nudges.try_recv().is_ok() {
            publisher.nudged();
        }
        let Some(writes) = publisher.due_round(now) else {
            return;
        };
        if let Some(publisher) = self.home.take() {
            self.home = self.hand_over(publisher, writes);
        }
    }

    /// Starts a writer with `publisher` and `writes`; the publisher back if it cannot start.
    fn hand_over(&mut self, publisher: Box<Publisher>, writes: Writes) -> Option<Box<Publisher>> {
        let (give, take) = bounded(1);
        let _ = give.send((publisher, writes));
        let back = self.back.0.clone();
        let taken = take.clone();
        let started = self.writer.start(move || {
            if let Ok((mut publisher, writes)) = taken.recv() {
                publisher.write(&writes);
                let _ = back.send(publisher);
            }
        });
        match started {
            Ok(()) => None,
            Err(e) => {
                log::warn!("cluster: start the Node writer: {e}; writing at the next round");
                take.try_recv().ok().map(|(publisher, _)| publisher)
            }
        }
    }

    /// Waits for a write in flight to end.
    pub fn stop(&mut self) {
        self.writer.take().join();
    }
}
